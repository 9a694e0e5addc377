"""One sample, in the order it happens."""
