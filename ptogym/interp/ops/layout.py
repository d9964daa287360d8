"""Layout ops: ``transpose``, ``concat``, ``unsqueeze``."""
from __future__ import annotations

import math

import torch

from ..checks import violation
from ..symbolic import value_of
from ..tensor import Tensor, note_operand, wrap
from ._common import _static, check_vector_tiles, refuse_input_dtype


def transpose(input: Tensor, dim0: int, dim1: int) -> Tensor:
    note_operand(input)
    shape = list(input._shape)
    shape[dim0], shape[dim1] = shape[dim1], shape[dim0]
    result = wrap(input.data.transpose(dim0, dim1).contiguous(), input.dtype, shape)
    check_vector_tiles("transpose", result)
    return result


def concat(tensors: list, dim: int = 0) -> Tensor:
    """``pypto.concat``.  Each input lands at its full tile's place (the sum of the earlier
    tiles' shapes along dim), and only its valid data is copied there, as pypto 0.2.0 computes
    it (recorded: probes ``concat_tail_*``).  Tail tiles of unequal valid extents leave gaps
    of invalid data, held as zeros inside the result's valid box."""
    first = tensors[0]
    refuse_input_dtype("concat", first)
    for t in tensors:
        note_operand(t)
        if t.dtype is not first.dtype:
            violation("C-API-01", f"pypto.concat: {first.dtype} with {t.dtype}")
    dim %= first.dim()
    shape = list(first._shape)
    shape[dim] = int(math.fsum(value_of(t._shape[dim]) for t in tensors))
    starts = [0]
    for t in tensors[:-1]:
        starts.append(starts[-1] + value_of(t._shape[dim]))
    if _whole_tiles_alike(tensors, dim):  # (hot: a kernel joining its row tasks) no gaps to leave
        data = torch.cat([t.data for t in tensors], dim)
    else:
        extent = [max(t.data.shape[axis] for t in tensors) for axis in range(first.dim())]
        extent[dim] = max(start + t.data.shape[dim] for start, t in zip(starts, tensors))
        data = torch.zeros(extent, dtype=first.data.dtype, device=first.data.device)
        for start, t in zip(starts, tensors):
            region = [slice(0, n) for n in t.data.shape]
            region[dim] = slice(start, start + t.data.shape[dim])
            data[tuple(region)] = t.data
    result = wrap(data, first.dtype, shape)
    check_vector_tiles("concat", result)
    return result


def _whole_tiles_alike(tensors: list, dim: int) -> bool:
    """Whether every tile holds valid data over its whole static shape and all agree off
    ``dim`` and in storage dtype: then each lands right after the one before, and the
    result is their plain concatenation."""
    first, dtype = tuple(tensors[0].data.shape), tensors[0].data.dtype
    for t in tensors:
        shape = tuple(t.data.shape)
        if t.data.dtype != dtype or shape != _static(t) or len(shape) != len(first) or any(
                n != m for axis, (n, m) in enumerate(zip(shape, first)) if axis != dim):
            return False
    return True


def unsqueeze(input: Tensor, dim: int) -> Tensor:
    shape = list(input._shape)
    shape.insert(dim % (len(shape) + 1), 1)
    return wrap(input.data.unsqueeze(dim), input.dtype, shape)
