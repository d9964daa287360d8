"""RMSNorm (AT-03): see op.py."""
