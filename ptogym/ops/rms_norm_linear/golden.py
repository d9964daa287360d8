"""Independent references for RMSNorm + Linear (AT-10) and + Quant (AT-11): plain torch."""
import torch

from ptogym.ops.linear.golden import linear_golden
from ptogym.ops.per_token_quant.golden import per_token_quant_golden
from ptogym.ops.rms_norm.golden import rms_norm_golden


def rms_norm_linear_golden(x, gamma, weight, eps=1e-6, bias=None):
    """normed = RMSNorm(x) * gamma rounded to x's dtype, then normed @ weight^T (+ bias) in fp32, x's dtype out."""
    normed, _ = rms_norm_golden(x, gamma, eps)
    return linear_golden(normed, weight, bias)


def rms_norm_linear_quant_golden(x, gamma, weight_int8, w_scale, eps=1e-6, out_dtype=torch.bfloat16):
    """The fp32 normed rows quantised per token, an exact int8 matmul, dequantised to out_dtype."""
    x32 = x.to(torch.float32)
    normed, _ = rms_norm_golden(x32, gamma.to(torch.float32), eps)
    x_int8, x_scale = per_token_quant_golden(normed)
    return linear_golden(x_int8, weight_int8, None, x_scale, w_scale, out_dtype)
