"""DeepSeek-V4 MLA prolog: see README.md, kernel.py (PyPTO), golden.py (torch), op.py (API)."""
