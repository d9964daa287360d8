"""Independent reference for the linear projection: plain torch."""
import torch

MX_BLOCK = 32  # K elements per e8m0 scale (OCP MX)
FP8_DTYPES = (torch.float8_e4m3fn, torch.float8_e5m2)


def mx_dequantize(t, scale, dtype=torch.float32):
    """fp8 ``t`` [..., K] times its e8m0 ``scale`` [..., K/32], each scale covering 32
    consecutive elements along K; exact in fp32 (fp8 significands times powers of 2)."""
    return t.to(dtype) * scale.to(dtype).repeat_interleave(MX_BLOCK, dim=-1)


def linear_golden(x, weight, bias=None, x_scale=None, w_scale=None, out_dtype=None, compute_dtype=torch.float32):
    """y = x @ weight^T (+ bias) in ``compute_dtype``; int8 operands are multiplied exactly
    (fp64 holds every int8 dot product up to K = 2^39) and scaled by x_scale [..., 1] and
    w_scale [N] or [1, N]; fp8 operands are dequantised block by block with their MX
    scales x_scale [..., K/32] and w_scale [N, K/32], then multiplied."""
    if x.dtype == torch.int8:
        acc = (x.to(torch.float64) @ torch.transpose(weight.to(torch.float64), 0, 1)).to(compute_dtype)
        y = acc * x_scale.to(compute_dtype) * w_scale.to(compute_dtype).reshape(1, -1)
    elif x.dtype in FP8_DTYPES:
        y = mx_dequantize(x, x_scale, compute_dtype) @ torch.transpose(mx_dequantize(weight, w_scale, compute_dtype),
                                                                       0, 1)
    else:
        y = x.to(compute_dtype) @ torch.transpose(weight.to(compute_dtype), 0, 1)
    if bias is not None:
        y = y + bias.to(compute_dtype)
    return y.to(out_dtype or x.dtype)
