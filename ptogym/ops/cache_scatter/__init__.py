"""KV-cache scatter (AT-16): see README.md, kernel.py (PyPTO), golden.py (torch), op.py (API)."""
