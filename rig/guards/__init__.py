"""What proves a run honest."""
