"""Qwen3 pre-attention: see README.md, kernel.py (PyPTO), golden.py (torch), op.py (API)."""
