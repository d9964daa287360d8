"""add_rms_norm_scale: see README.md, DESIGN.md, kernel.py (PyPTO), golden.py (torch), op.py (API)."""
