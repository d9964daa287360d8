"""Independent reference for RMSNorm + Linear + Quant (AT-11)."""
from ptogym.ops.rms_norm_linear.golden import rms_norm_linear_quant_golden

__all__ = ["rms_norm_linear_quant_golden"]
