"""Indexing ops: ``index_select``, ``gather``, ``scatter_update``."""
from __future__ import annotations

import torch

from ..checks import violation
from .. import trace
from ..tensor import ScatteredRows, Tensor, note_operand, wrap
from ._common import refuse_input_dtype, require_vec_tile


def _check_index(op: str, index: Tensor, bound: int) -> None:
    note_operand(index)
    if index.dtype.name not in ("DT_INT32", "DT_INT64"):
        violation("C-API-06", f"pypto.{op}: index dtype {index.dtype}, needs DT_INT32 or DT_INT64")
    if index.data.numel():
        low, high = int(index.data.min()), int(index.data.max())
        if low < 0 or high >= bound:
            violation("C-API-06", f"pypto.{op}: index values in [{low}, {high}] outside [0, {bound})")


def index_select(input: Tensor, dim: int, index: Tensor) -> Tensor:
    note_operand(input)
    require_vec_tile("index_select")
    _check_index("index_select", index, input.data.shape[dim])
    data = torch.index_select(input.data, dim, index.data.reshape(-1).long())
    shape = list(input._shape)
    shape[dim] = index.data.numel()
    return wrap(data, input.dtype, shape)


def gather(input: Tensor, dim: int, index: Tensor) -> Tensor:
    note_operand(input)
    require_vec_tile("gather")
    refuse_input_dtype("gather", input)
    _check_index("gather", index, input.data.shape[dim])
    return wrap(torch.gather(input.data, dim, index.data.long()), input.dtype, list(index._shape))


def scatter_update(input: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    """Rows of input along ``dim`` (default -2) at ``index`` replaced by rows of src;
    returns the updated tensor.  No broadcast: src holds one row per index."""
    note_operand(input)
    note_operand(src)
    require_vec_tile("scatter_update")
    if dim not in (-2, input.dim() - 2):
        violation("C-API-06", f"pypto.scatter_update: dim {dim}; only the row axis (-2) is supported")
    row = input.data.shape[-1]
    _check_index("scatter_update", index, input.data.numel() // row if row else 0)
    if src.data.numel() != index.data.numel() * row:
        violation("C-API-06", f"pypto.scatter_update: src {list(src.data.shape)} must hold one row of {row} per "
                              f"index ({index.data.numel()} indices); no broadcast")
    if src.dtype is not input.dtype:
        violation("C-API-01", f"pypto.scatter_update: src {src.dtype} into {input.dtype}")
    # computed when read; moved back into input it writes only these rows (ScatteredRows)
    result = ScatteredRows(input.data, index.data.reshape(-1).long(), src.data.reshape(-1, row), input.dtype,
                           list(input._shape))
    if trace.recorders:  # ptogym bisect is recording op results
        trace.record(result)
    return result
