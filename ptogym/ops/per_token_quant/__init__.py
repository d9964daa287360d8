"""Per-token int8 quantisation (AT-05): see op.py."""
