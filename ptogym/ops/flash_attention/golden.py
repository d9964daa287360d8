"""Independent reference for flash attention: plain torch, the whole score matrix at once."""
import torch


def causal_mask(q_len: int, kv_len: int, device=None) -> torch.Tensor:
    """True where query row i may not see key j: j > i + kv_len - q_len (bottom-right aligned)."""
    rows = torch.arange(q_len, device=device)[:, None]
    cols = torch.arange(kv_len, device=device)[None, :]
    return cols > rows + (kv_len - q_len)


def flash_attention_golden(q, k, v, causal=False, scale=None, compute_dtype=torch.float32):
    """(out [B, Sq, Hq, D] in q's dtype, lse [B, Hq, Sq] in ``compute_dtype``).

    A row that sees no key (causal, Sq > Skv) gives out = 0 and lse = -inf."""
    heads, kv_heads, head_dim = q.shape[2], k.shape[2], q.shape[3]
    scale = head_dim ** -0.5 if scale is None else scale
    group = heads // kv_heads
    qc, kc, vc = (t.to(compute_dtype).transpose(1, 2) for t in (q, k, v))  # [B, H, S, D]
    kc, vc = kc.repeat_interleave(group, dim=1), vc.repeat_interleave(group, dim=1)
    s = qc @ kc.transpose(-1, -2) * scale
    if causal:
        s = s.masked_fill(causal_mask(q.shape[1], k.shape[1], q.device), float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    p = torch.exp(s - lse.unsqueeze(-1)).nan_to_num(0.0)  # a row without keys: -inf - -inf
    return (p @ vc).transpose(1, 2).to(q.dtype), lse
