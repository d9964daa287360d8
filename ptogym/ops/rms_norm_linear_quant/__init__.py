"""RMSNorm + Linear + Quant fused (AT-11): see op.py."""
