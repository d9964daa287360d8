"""Linear projection (AT-09): see op.py."""
