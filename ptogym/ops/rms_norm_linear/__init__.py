"""RMSNorm + Linear fused (AT-10): see op.py."""
