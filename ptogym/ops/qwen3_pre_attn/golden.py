"""Independent reference for the Qwen3 pre-attention: plain torch, following the
upstream test's golden chain (pypto-gym ``qwen3_pre_attn_fused`` test): every stage
computes in fp32 and rounds its result to the input dtype, as the model's own
bf16 modules do - residual add, input RMSNorm, QKV projection, per-head RMSNorm -
then RoPE (half layout) in fp32, rounded once.

The upstream test also rounds inside RoPE (bf16 torch ops for x*cos, rotate_half*sin
and their sum); here RoPE keeps fp32 inside, as the kernel does and as the seed's
RoPE pattern prescribes.
"""
import torch

from ptogym.ops.cache_scatter.golden import cache_scatter_golden
from ptogym.ops.rope.golden import rope_golden


def rms_norm(x, gamma, eps):
    """x * rsqrt(mean(x^2) + eps) * gamma over the last axis, fp32 inside, x's dtype out."""
    x_fp32 = x.to(torch.float32)
    variance = x_fp32.pow(2).mean(-1, keepdim=True)
    return (x_fp32 * torch.rsqrt(variance + eps) * gamma.to(torch.float32)).to(x.dtype)


def linear(x, weight):
    """x @ weight^T accumulated in fp32, rounded to x's dtype."""
    return (x.to(torch.float32) @ torch.transpose(weight.to(torch.float32), 0, 1)).to(x.dtype)


def qwen3_pre_attn_golden(hidden, residual, input_gamma, w_qkv, q_norm_gamma, k_norm_gamma, cos, sin,
                          k_cache, v_cache, slot_mapping, eps=1e-6):
    """Returns (q, residual, k_cache, v_cache): new tensors, the inputs are not modified."""
    tokens = hidden.shape[0]
    head_dim = q_norm_gamma.shape[0]
    kv_heads = k_cache.shape[1]
    heads = w_qkv.shape[0] // head_dim - 2 * kv_heads
    new_residual = (hidden.to(torch.float32) + residual.to(torch.float32)).to(hidden.dtype)
    qkv = linear(rms_norm(new_residual, input_gamma, eps), w_qkv)
    q, k, v = qkv.split([heads * head_dim, kv_heads * head_dim, kv_heads * head_dim], dim=-1)
    q = rope_golden(rms_norm(q.reshape(tokens, heads, head_dim), q_norm_gamma, eps), cos, sin, "half")
    k = rope_golden(rms_norm(k.reshape(tokens, kv_heads, head_dim), k_norm_gamma, eps), cos, sin, "half")
    v = v.reshape(tokens, kv_heads, head_dim)
    return (q, new_residual, cache_scatter_golden(k_cache, k, slot_mapping),
            cache_scatter_golden(v_cache, v, slot_mapping))
