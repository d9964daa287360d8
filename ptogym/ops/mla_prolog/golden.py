"""Independent reference for the DeepSeek-V4 MLA prolog: plain torch, following the
golden chain of upstream's ``models/deepseek_v4/test_mla_prolog_v4.py``.

Every projection accumulates in fp32 and rounds to the input dtype; every RMSNorm is
fp32 inside (x / sqrt(mean(x^2) + eps), times gamma where there is one) and rounds to
the input dtype; RoPE (interleaved) multiplies in fp32 and rounds once.
"""
import torch

from ptogym.ops.rope.golden import rope_golden


def rms_norm(x, eps, gamma=None):
    """Upstream's variant B: x / sqrt(mean(x^2) + eps) [* gamma], fp32 inside, x's dtype out."""
    x_fp32 = x.to(torch.float32)
    y = x_fp32 / torch.sqrt(x_fp32.pow(2).mean(-1, keepdim=True) + eps)
    if gamma is not None:
        y = y * gamma.to(torch.float32)
    return y.to(x.dtype)


def matmul(a, b):
    """a @ b accumulated in fp32, rounded to a's dtype (b is K-major, as upstream passes it)."""
    return (a.to(torch.float32) @ b.to(torch.float32)).to(a.dtype)


def mla_prolog_golden(x, wq_a, wq_b, wkv, gamma_cq, gamma_ckv, cos, sin, eps=1e-6):
    """Returns (q [T, heads, D], kv [T, D], qr [T, q_lora_rank]) in x's dtype."""
    tokens = x.shape[0]
    head_dim = gamma_ckv.shape[0]
    qr = rms_norm(matmul(x, wq_a), eps, gamma_cq)
    q = rms_norm(matmul(qr, wq_b).reshape(tokens, -1, head_dim), eps)
    kv = rms_norm(matmul(x, wkv), eps, gamma_ckv)
    q = rope_golden(q, cos, sin, "interleave")
    kv = rope_golden(kv, cos, sin, "interleave")
    return q, kv, qr
