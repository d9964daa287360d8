"""The paged KV cache the model's kernels share.

Per decoder layer one k and one v tensor of shape ``[num_blocks, block_size, kv_heads,
head_dim]``: the layout ``paged_attention`` reads and ``cache_scatter`` (inside
``qwen3_pre_attn``) writes through its flat ``[num_blocks * block_size, kv_heads,
head_dim]`` view, slot = block * block_size + offset.  Every sequence owns a list of
physical blocks (its block-table row); token p of a sequence lives at offset
p % block_size of its block p // block_size.  All layers use the same block tables.
"""
from __future__ import annotations

import math

import torch


class CacheFull(RuntimeError):
    """The sequences need more blocks than ``max_tokens`` allows."""


class PagedKVCache:
    def __init__(self, layers: int, kv_heads: int, head_dim: int, dtype: torch.dtype, block_size: int,
                 max_tokens: int | None):
        self.block_size = block_size
        self.max_blocks = None if max_tokens is None else math.ceil(max_tokens / block_size)
        self._row = (kv_heads, head_dim)
        blocks = self.max_blocks or 1  # without a bound the pool doubles on demand
        self.k = [torch.zeros(blocks, block_size, *self._row, dtype=dtype) for _ in range(layers)]
        self.v = [torch.zeros_like(k) for k in self.k]
        self.tables: list[list[int]] = []
        self.lengths: list[int] = []
        self._free = list(range(blocks))

    @property
    def num_blocks(self) -> int:
        return self.k[0].shape[0]

    def reset(self, sequences: int) -> None:
        """Forget every sequence; start ``sequences`` empty ones (the cache's contents stay, unreferenced)."""
        self.tables = [[] for _ in range(sequences)]
        self.lengths = [0] * sequences
        self._free = list(range(self.num_blocks))

    def append(self, sequence: int, tokens: int) -> torch.Tensor:
        """Room for ``tokens`` more tokens of ``sequence``; returns their slots [tokens] int64."""
        start = self.lengths[sequence]
        table = self.tables[sequence]
        while len(table) * self.block_size < start + tokens:
            table.append(self._take_block())
        positions = torch.arange(start, start + tokens)
        blocks = torch.tensor(table, dtype=torch.int64)[positions // self.block_size]
        self.lengths[sequence] = start + tokens
        return blocks * self.block_size + positions % self.block_size

    def slots(self, sequence: int) -> torch.Tensor:
        """The slots of every token the sequence holds, in order [length] int64."""
        positions = torch.arange(self.lengths[sequence])
        return torch.tensor(self.tables[sequence], dtype=torch.int64)[positions // self.block_size] * self.block_size \
            + positions % self.block_size

    def block_table(self) -> torch.Tensor:
        """[sequences, max blocks of a sequence] int32; entries past a sequence's blocks are 0 (never read)."""
        width = max(len(table) for table in self.tables)
        return torch.tensor([table + [0] * (width - len(table)) for table in self.tables], dtype=torch.int32)

    def seq_lens(self) -> torch.Tensor:
        return torch.tensor(self.lengths, dtype=torch.int32)

    def flat(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Layer ``layer``'s k and v caches as [slots, kv_heads, head_dim] views (what cache_scatter writes)."""
        return self.k[layer].view(-1, *self._row), self.v[layer].view(-1, *self._row)

    def _take_block(self) -> int:
        if not self._free:
            if self.max_blocks is not None:
                raise CacheFull(f"max_tokens: the KV cache's {self.max_blocks} blocks of {self.block_size} tokens "
                                f"are all in use (sequences of {self.lengths} tokens); raise max_tokens")
            grown = self.num_blocks
            self.k = [torch.cat((k, torch.zeros_like(k))) for k in self.k]
            self.v = [torch.cat((v, torch.zeros_like(v))) for v in self.v]
            self._free = list(range(grown, 2 * grown))
        return self._free.pop(0)
