"""Independent reference for RoPE: plain torch, fp32 inside, one rounding at the end.

The interleaved layout follows upstream's test chain literally (de-interleave the
pairs with reshape/permute, rotate_half, re-interleave), not the kernel's rotation
matrix, so the two are independent derivations of the same permutation.
"""
import torch

LAYOUTS = ("interleave", "half")


def rotate_half(x):
    """[-x2, x1] for the halves x1, x2 of the last axis."""
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rotate_interleaved(x):
    """Pairs (x[2i], x[2i+1]) -> (-x[2i+1], x[2i]): de-interleave, rotate_half, re-interleave."""
    *lead, width = x.shape
    grouped = x.reshape(*lead, width // 2, 2).transpose(-1, -2).reshape(*lead, width)
    rotated = rotate_half(grouped)
    return rotated.reshape(*lead, 2, width // 2).transpose(-1, -2).reshape(*lead, width)


def rope_golden(x, cos, sin, layout="interleave"):
    """x [T, D] or [T, heads, D]; cos, sin [T, R]: the last R elements of every head rotate."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout: {layout!r} is not one of {LAYOUTS}")
    rope_dim = cos.shape[-1]
    x_fp32 = x.to(torch.float32)
    shape = (x.shape[0],) + (1,) * (x.dim() - 2) + (rope_dim,)  # broadcast over heads
    cos_fp32, sin_fp32 = cos.to(torch.float32).reshape(shape), sin.to(torch.float32).reshape(shape)
    part = x_fp32[..., x.shape[-1] - rope_dim:]
    rotated = rotate_interleaved(part) if layout == "interleave" else rotate_half(part)
    embedded = part * cos_fp32 + rotated * sin_fp32
    return torch.cat((x_fp32[..., :x.shape[-1] - rope_dim], embedded), dim=-1).to(x.dtype)
