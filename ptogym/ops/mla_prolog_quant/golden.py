"""Independent reference for the quantised DeepSeek-V4 MLA prolog: plain torch after the
golden chain of upstream's ``models/deepseek_v4/test_mla_prolog_quant_v4.py``.

Differences from the bf16 prolog: q_a and kv accumulate in fp32 and are not rounded
before their norms; qr is quantised per token to int8 (scale 127 / amax, round half to
even, dequant scale 1 / that); q_b is an exact int8 x int8 -> int32 product with the
int8 weight, dequantised by qr's scale and wq_b's per-channel scale, and stays fp32
into the per-head norm.
"""
import torch

from ptogym.ops.mla_prolog.golden import rms_norm
from ptogym.ops.rope.golden import rope_golden

QMAX = 127.0


def quantize(x, dim=-1):
    """Symmetric int8 along ``dim``: (int8 values, dequant scale = 1 / (127 / amax)), fp32 inside."""
    x_fp32 = x.to(torch.float32)
    to_int = QMAX / x_fp32.abs().amax(dim=dim, keepdim=True)
    return torch.round(x_fp32 * to_int).to(torch.int8), 1.0 / to_int


def mla_prolog_quant_golden(x, wq_a, wq_b, wkv, gamma_cq, gamma_ckv, cos, sin, wq_b_scale, eps=1e-6):
    """wq_b int8 [q_lora_rank, heads * D], wq_b_scale [heads * D, 1] fp32.
    Returns (q, kv in x's dtype, qr int8 [T, q_lora_rank], qr_scale fp32 [T, 1])."""
    tokens = x.shape[0]
    head_dim = gamma_ckv.shape[0]
    x_fp32 = x.to(torch.float32)
    qr, qr_scale = quantize(rms_norm(x_fp32 @ wq_a.to(torch.float32), eps, gamma_cq))
    q_b = (qr.to(torch.int64) @ wq_b.to(torch.int64)).to(torch.float32) * qr_scale * wq_b_scale.reshape(1, -1)
    q = rms_norm(q_b.reshape(tokens, -1, head_dim), eps).to(x.dtype)
    kv = rms_norm(x_fp32 @ wkv.to(torch.float32), eps, gamma_ckv).to(x.dtype)
    return rope_golden(q, cos, sin, "interleave"), rope_golden(kv, cos, sin, "interleave"), qr, qr_scale
