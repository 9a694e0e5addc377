"""Orchestration: everything that touches contestants (sandboxes, checkouts, agents)."""
