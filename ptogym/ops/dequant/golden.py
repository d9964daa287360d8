"""Independent reference for dequantisation: plain torch fp32."""
import torch


def dequant_golden(acc, scale_a, scale_b, out_dtype=torch.bfloat16, compute_dtype=torch.float32):
    """acc [..., N] int32 * scale_a [..., 1] * scale_b ([N] / [1, N] or [..., 1]), cast to out_dtype."""
    value = acc.to(compute_dtype) * scale_a.to(compute_dtype) * scale_b.to(compute_dtype)
    return value.to(out_dtype)
