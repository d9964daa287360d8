"""KV-cache scatter (AT-16) as a PyPTO kernel: cache[slot[t]] = values[t], in place.

    values [T, row], index [T, 1] (int32/int64, valid distinct slots), cache [slots, row]

Tokens are one dynamic axis walked with ``loop_unroll`` over ``UNROLL`` block sizes;
each block views its values and slots and scatters them into the cache with
``ptogym.atoms.cache_scatter.scatter_rows`` (``pypto.scatter_update`` moved back
into the cache parameter).  The vector tile is [block, row], capped so that a block
of rows stays within a quarter of the unified buffer.

``TUNING`` below is what ``ptogym tune`` may change; the values the operator runs are
in ``tuned.json`` beside this file.

No torch here: ``build`` receives the ``pypto`` namespace.
"""
from ptogym.atoms.cache_scatter import scatter_rows
from ptogym.tune.space import Param, Tuning, token_band

UB_BYTES = 192 * 1024
UNROLL = (32, 8, 1)

#: what ``ptogym tune`` may change (``ptogym.tune.space``); the values the operator runs
#: are in ``tuned.json`` beside this file, per token band (tokens of the call, padding
#: included); plain: a token a step.  The vector tile follows the block (``block_tokens``).
TUNING = Tuning(
    params={"unroll": Param((UNROLL, (128, 32, 8, 1), (64, 16, 4, 1), (16, 4, 1), (8, 1), (1,)))},
    band=lambda tokens, row, dtype, index_dtype: (token_band(tokens),),
    plain={"unroll": (1,)},
)


def block_tokens(row_bytes: int, largest: int) -> int:
    """Rows per vector tile: as many as fit a quarter of the UB, at most ``largest``."""
    return max(1, min(largest, UB_BYTES // 4 // row_bytes))


def build(pypto, *, row: int, dtype: str, index_dtype: str, unroll=UNROLL):
    """The jit kernel: kernel(values, index, cache)."""
    dt, index_dt = getattr(pypto, dtype), getattr(pypto, index_dtype)
    unroll_list = sorted(set(unroll) | {1}, reverse=True)
    row_bytes = row * pypto.bytes_of(dt)

    @pypto.frontend.jit()
    def cache_scatter_kernel(
        values: pypto.Tensor([pypto.DYNAMIC, row], dt),
        index: pypto.Tensor([pypto.DYNAMIC, 1], index_dt),
        cache: pypto.Tensor([pypto.DYNAMIC, row], dt),
    ):
        for token, count in pypto.loop_unroll(0, values.shape[0], 1, name="LOOP_TOKENS", idx_name="token",
                                              unroll_list=unroll_list):
            pypto.set_vec_tile_shapes(block_tokens(row_bytes, count), row)
            rows = pypto.view(values, [count, row], [token, 0])
            slots = pypto.view(index, [count, 1], [token, 0])
            scatter_rows(pypto, cache, slots, rows)

    return cache_scatter_kernel
