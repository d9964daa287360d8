"""Independent reference for RMSNorm: plain torch in fp32 (fp64 in the tests)."""
import torch


def rms_norm_golden(x, gamma=None, eps=1e-6, bias=None, rsqrt_mode="rsqrt", compute_dtype=torch.float32):
    """Return (y in x's dtype, rstd [..., 1] in ``compute_dtype``); inputs untouched."""
    xc = x.to(compute_dtype)
    variance = xc.pow(2).mean(dim=-1, keepdim=True) + eps
    rstd = torch.rsqrt(variance) if rsqrt_mode == "rsqrt" else 1.0 / torch.sqrt(variance)
    y = xc * rstd
    if gamma is not None:
        y = y * gamma.to(compute_dtype)
    if bias is not None:
        y = y + bias.to(compute_dtype)
    return y.to(x.dtype), rstd
