"""Index-driven updates and encodings: ``index_add(_)``, ``index_put_``,
``scatter(_)`` (with ``get_scatter_mode``), ``one_hot``, ``gathermask``.

In-place forms write their result back into ``input`` the way pypto does
(``input.Move(result)``), so the storage bookkeeping sees a write.  A refused call
(bad index dtype, out-of-range index) leaves ``input`` unchanged.
"""
from __future__ import annotations

import torch

from .. import runtime
from ..checks import violation
from ..dtypes import DT_INT32, DT_INT64
from ..enums import ScatterMode
from ..tensor import Tensor, note_operand, wrap
from ._common import Element, check_vector_tiles


def _index_data(op: str, index: Tensor, bound: int, what: str = "index") -> torch.Tensor:
    note_operand(index)
    if index.dtype not in (DT_INT32, DT_INT64):
        violation("C-API-06", f"pypto.{op}: {what} dtype {index.dtype}, needs DT_INT32 or DT_INT64")
    data = index.data.long()
    if data.numel() and (int(data.min()) < 0 or int(data.max()) >= bound):
        violation("C-API-06", f"pypto.{op}: {what} values in [{int(data.min())}, {int(data.max())}] outside "
                              f"[0, {bound})")
    return data


def _axis(op: str, input: Tensor, dim: int) -> int:
    if not -input.dim() <= dim < input.dim():
        violation("C-API-06", f"pypto.{op}: dim {dim} out of range for rank {input.dim()}")
    return dim % input.dim()


def _same_dtype(op: str, input: Tensor, other: Tensor, what: str) -> None:
    note_operand(other)
    if other.dtype is not input.dtype:
        violation("C-API-01", f"pypto.{op}: {what} is {other.dtype}, input is {input.dtype}")


def _result(op: str, input: Tensor, data: torch.Tensor) -> Tensor:
    result = wrap(data, input.dtype, list(input._shape))
    check_vector_tiles(op, input, result)
    return result


def index_add(input: Tensor, dim: int, index: Tensor, source: Tensor, *, alpha=1) -> Tensor:
    """input with ``alpha * source`` slices added at ``index`` along ``dim`` (1-D index)."""
    note_operand(input)
    axis = _axis("index_add", input, dim)
    positions = _index_data("index_add", index, input.data.shape[axis])
    _same_dtype("index_add", input, source, "source")
    if index.dim() != 1 or source.data.shape[axis] != positions.numel():
        violation("C-API-06", f"pypto.index_add: index {list(index.data.shape)} must be 1-D with one entry per "
                              f"slice of source {list(source.data.shape)} along dim {axis}")
    return _result("index_add", input, input.data.index_add(axis, positions, source.data, alpha=alpha))


def index_add_(input: Tensor, dim: int, index: Tensor, source: Tensor, *, alpha=1) -> Tensor:
    input.move(index_add(input, dim, index, source, alpha=alpha))
    return input


def index_put_(input: Tensor, indices: tuple, values: Tensor, accumulate: bool = False) -> None:
    """input[indices[0][i], ..., indices[k][i], ...] = (or +=) values[i, ...], in place."""
    note_operand(input)
    if not 0 < len(indices) <= input.dim():
        violation("C-API-06", f"pypto.index_put_: {len(indices)} index tensors for rank-{input.dim()} input")
    positions = tuple(_index_data("index_put_", t, input.data.shape[i], f"indices[{i}]")
                      for i, t in enumerate(indices))
    if any(t.dim() != 1 or t.data.numel() != positions[0].numel() for t in indices):
        violation("C-API-06", f"pypto.index_put_: indices must be 1-D of one length (no broadcast), got "
                              f"{[list(t.data.shape) for t in indices]}")
    _same_dtype("index_put_", input, values, "values")
    updated = input.data.index_put(positions, values.data, accumulate=accumulate)
    input.move(_result("index_put_", input, updated))


def get_scatter_mode(reduce) -> ScatterMode:
    modes = {None: ScatterMode.NONE, "add": ScatterMode.ADD, "multiply": ScatterMode.MULTIPLY}
    if reduce not in modes:
        raise ValueError("scatter reduce only support 'add', 'multiply'")
    return modes[reduce]


def scatter(input: Tensor, dim: int, index: Tensor, src, *, reduce: str | None = None) -> Tensor:
    """Out-of-place scatter of a scalar, Element or tensor ``src`` at ``index`` along ``dim``."""
    note_operand(input)
    mode = get_scatter_mode(reduce)
    axis = _axis("scatter", input, dim)
    positions = _index_data("scatter", index, input.data.shape[axis])
    if index.dim() != input.dim():
        violation("C-API-06", f"pypto.scatter: index rank {index.dim()} differs from input rank {input.dim()}")
    if isinstance(src, Tensor):
        _same_dtype("scatter", input, src, "src")
        values = src.data[tuple(slice(0, n) for n in positions.shape)]
    else:
        scalar = src.data if isinstance(src, Element) else float(src)
        values = torch.full(positions.shape, scalar, dtype=input.data.dtype, device=input.data.device)
    data = input.data.clone()
    if mode is ScatterMode.NONE:
        data.scatter_(axis, positions, values)
    else:
        data.scatter_reduce_(axis, positions, values, "sum" if mode is ScatterMode.ADD else "prod")
    return _result("scatter", input, data)


def scatter_(input: Tensor, dim: int, index: Tensor, src, *, reduce: str | None = None) -> Tensor:
    input.move(scatter(input, dim, index, src, reduce=reduce))
    return input


def one_hot(input: Tensor, num_classes: int) -> Tensor:
    """(*, num_classes) tensor of the input's integer dtype with 1 at each index."""
    note_operand(input)
    if not isinstance(num_classes, int):
        raise TypeError("num_classes must be an `int`")
    if num_classes <= 0:
        raise RuntimeError("num_classes must be a positive integer" if num_classes != -1 else
                           "num_classes must be specified")
    tile = runtime.current().vec_tile
    rank = input.dim() + 1
    if tile is not None and len(tile) >= rank and tile[rank - 1] != num_classes:
        violation("C-TILE-10", f"pypto.one_hot(..., {num_classes}) under vec tile {list(tile)}: its last dim "
                               f"{tile[rank - 1]} must equal num_classes")
    positions = _index_data("one_hot", input, num_classes, "input")
    data = torch.nn.functional.one_hot(positions, num_classes).to(input.data.dtype)
    result = wrap(data, input.dtype, list(input._shape) + [num_classes])
    check_vector_tiles("one_hot", result)
    return result


# gathermask pattern -> (period, kept position) along the last axis; 7 keeps everything
_GATHER_PATTERNS = {1: (2, 0), 2: (2, 1), 3: (4, 0), 4: (4, 1), 5: (4, 2), 6: (4, 3), 7: (1, 0)}


def gathermask(input: Tensor, pattern_mode: int) -> Tensor:
    """The elements of the last axis that pattern ``pattern_mode`` keeps (1: every 1st
    of 2, 2: every 2nd of 2, 3-6: 1st-4th of 4, 7: all)."""
    note_operand(input)
    if pattern_mode not in _GATHER_PATTERNS:
        violation("C-API-06", f"pypto.gathermask: pattern_mode {pattern_mode}; must be 1..7")
    period, kept = _GATHER_PATTERNS[pattern_mode]
    data = input.data[..., kept::period].contiguous()
    shape = list(input._shape)
    shape[-1] = data.shape[-1]
    result = wrap(data, input.dtype, shape)
    check_vector_tiles("gathermask", input, result)
    return result
