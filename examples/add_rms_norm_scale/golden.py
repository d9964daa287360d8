"""Independent reference for add_rms_norm_scale: plain torch in fp32.

Golden function inventory:
    M1 add           x_sum = x1 + x2
    M2 square_mean   mean_square = sum(x_sum^2, last axis) / hidden
    M2 rsqrt         rstd = 1 / sqrt(mean_square + eps)
    M2 normalize     normed = x_sum * rstd * gamma
    M3 smooth_scale  y = normed * smooth_scale

Outputs: y and x_add (= x_sum, the residual for the next layer), both in x1's dtype.
``ptogym.probe`` marks the fp32 boundary tensors of modules 1 and 2 and the
intermediates ``ptogym bisect`` checks.
"""
import torch

from ptogym import probe


def add_rms_norm_scale_golden(x1, x2, gamma, smooth_scale, eps=1e-6):
    """Return (y, x_add) in x1's dtype; inputs are not modified."""
    x_sum = probe("x_sum", x1.to(torch.float32) + x2.to(torch.float32))
    mean_square = probe("mean_square", x_sum.pow(2).sum(dim=-1, keepdim=True) / x_sum.shape[-1])
    rstd = probe("rstd", torch.rsqrt(mean_square + eps))
    normed = probe("normed", x_sum * rstd * gamma.to(torch.float32))
    y = normed * smooth_scale.to(torch.float32)
    return y.to(x1.dtype), x_sum.to(x1.dtype)
