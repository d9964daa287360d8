"""Independent reference for per-token int8 quantisation: plain torch."""
import torch

QMAX = 127.0
AMAX_FLOOR = 1e-30  # the kernel's floor: an all-zero row gives zeros and a finite scale


def per_token_quant_golden(x, compute_dtype=torch.float32):
    """Return (x_int8, scale [..., 1] in ``compute_dtype``): x_int8 = round-half-even(x * 127 / amax)."""
    xc = x.to(compute_dtype)
    amax = xc.abs().amax(dim=-1, keepdim=True).clamp_min(AMAX_FLOOR)
    # a true division: torch evaluates ``QMAX / amax`` (scalar / tensor) as QMAX * (1 / amax),
    # two roundings, which moves products off their .5 ties
    scaled = xc * torch.div(torch.full_like(amax, QMAX), amax)
    x_int8 = torch.round(scaled).clamp(-128, 127).to(torch.int8)
    return x_int8, amax / QMAX
