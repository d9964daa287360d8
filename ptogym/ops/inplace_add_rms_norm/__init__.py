"""fused residual add + RMSNorm, y and x_add written back into x1 and x2 in place

See README.md, kernel.py (PyPTO), golden.py (torch), op.py (API).
"""
