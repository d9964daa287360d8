"""RoPE (AT-04): see README.md, kernel.py (PyPTO), golden.py (torch), op.py (API)."""
