"""Independent reference for the linear projection: plain torch."""
import torch


def linear_golden(x, weight, bias=None, x_scale=None, w_scale=None, out_dtype=None, compute_dtype=torch.float32):
    """y = x @ weight^T (+ bias) in ``compute_dtype``; int8 operands are multiplied exactly
    (fp64 holds every int8 dot product up to K = 2^39) and scaled by x_scale [..., 1] and
    w_scale [N] or [1, N]."""
    if x.dtype == torch.int8:
        acc = (x.to(torch.float64) @ weight.to(torch.float64).t()).to(compute_dtype)
        y = acc * x_scale.to(compute_dtype) * w_scale.to(compute_dtype).reshape(1, -1)
    else:
        y = x.to(compute_dtype) @ weight.to(compute_dtype).t()
    if bias is not None:
        y = y + bias.to(compute_dtype)
    return y.to(out_dtype or x.dtype)
