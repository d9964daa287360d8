"""Independent reference for paged decode attention: each sequence's keys gathered from
its blocks in plain torch, then the whole-matrix attention of ``flash_attention_golden``."""
import torch

from ptogym.ops.flash_attention.golden import flash_attention_golden


def gather_sequence(cache, block_table_row, seq_len: int) -> torch.Tensor:
    """[1, seq_len, Hkv, D]: the first seq_len slots of the sequence's blocks, in order."""
    block_size = cache.shape[1]
    blocks = block_table_row[:-(-seq_len // block_size)].long()
    return cache[blocks].reshape(-1, *cache.shape[2:])[:seq_len].unsqueeze(0)


def paged_attention_golden(q, k_cache, v_cache, block_table, seq_lens, scale=None, compute_dtype=torch.float32):
    """out [B, Hq, D] in q's dtype (fp32 maths inside)."""
    rows = []
    for b in range(q.shape[0]):
        seq_len = int(seq_lens[b])
        k, v = (gather_sequence(cache, block_table[b], seq_len) for cache in (k_cache, v_cache))
        out, _ = flash_attention_golden(q[b][None, None], k, v, scale=scale, compute_dtype=compute_dtype)
        rows.append(out[0, 0])
    return torch.stack(rows) if rows else torch.empty_like(q)
