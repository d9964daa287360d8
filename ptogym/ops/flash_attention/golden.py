"""Independent reference for flash attention: plain torch, whole rows of the score matrix at once."""
import torch


def causal_mask(q_len: int, kv_len: int, device=None) -> torch.Tensor:
    """True where query row i may not see key j: j > i + kv_len - q_len (bottom-right aligned)."""
    rows = torch.arange(q_len, device=device)[:, None]
    cols = torch.arange(kv_len, device=device)[None, :]
    return cols > rows + (kv_len - q_len)


SCORES_PER_CHUNK = 1 << 26  # score elements held at once (256 MB in fp32): b8_s4096_h32 whole would be 17 GB


def flash_attention_golden(q, k, v, causal=False, scale=None, compute_dtype=torch.float32):
    """(out [B, Sq, Hq, D] in q's dtype, lse [B, Hq, Sq] in ``compute_dtype``).

    A row that sees no key (causal, Sq > Skv) gives out = 0 and lse = -inf.  The score
    matrix is formed whole for up to ``SCORES_PER_CHUNK`` elements, else a block of
    query rows at a time (every row still sees all its keys at once)."""
    heads, kv_heads, head_dim = q.shape[2], k.shape[2], q.shape[3]
    scale = head_dim ** -0.5 if scale is None else scale
    group = heads // kv_heads
    qc, kc, vc = (t.to(compute_dtype).transpose(1, 2) for t in (q, k, v))  # [B, H, S, D]
    kc, vc = kc.repeat_interleave(group, dim=1), vc.repeat_interleave(group, dim=1)
    q_len, kv_len = q.shape[1], k.shape[1]
    mask = causal_mask(q_len, kv_len, q.device) if causal else None
    rows = max(1, SCORES_PER_CHUNK // max(1, q.shape[0] * heads * kv_len))
    out = torch.empty(qc.shape[:3] + (vc.shape[-1],), dtype=compute_dtype, device=q.device)
    lse = torch.empty(qc.shape[:3], dtype=compute_dtype, device=q.device)
    for start in range(0, q_len, rows):
        block = slice(start, start + rows)
        s = qc[:, :, block] @ kc.transpose(-1, -2) * scale
        if causal:
            s = s.masked_fill(mask[block], float("-inf"))
        lse[:, :, block] = torch.logsumexp(s, dim=-1)
        p = torch.exp(s - lse[:, :, block].unsqueeze(-1)).nan_to_num(0.0)  # a row without keys: -inf - -inf
        out[:, :, block] = p @ vc
    return out.transpose(1, 2).to(q.dtype), lse
