"""Layout ops: ``transpose``, ``concat``, ``unsqueeze``."""
from __future__ import annotations

import math

import torch

from ..checks import violation
from ..symbolic import value_of
from ..tensor import Tensor, note_operand, wrap
from ._common import check_vector_tiles


def transpose(input: Tensor, dim0: int, dim1: int) -> Tensor:
    note_operand(input)
    shape = list(input._shape)
    shape[dim0], shape[dim1] = shape[dim1], shape[dim0]
    result = wrap(input.data.transpose(dim0, dim1).contiguous(), input.dtype, shape)
    check_vector_tiles("transpose", result)
    return result


def concat(tensors: list, dim: int = 0) -> Tensor:
    first = tensors[0]
    for t in tensors:
        note_operand(t)
        if t.dtype is not first.dtype:
            violation("C-API-01", f"pypto.concat: {first.dtype} with {t.dtype}")
    shape = list(first._shape)
    shape[dim] = math.fsum(value_of(t._shape[dim]) for t in tensors)
    shape[dim] = int(shape[dim])
    result = wrap(torch.cat([t.data for t in tensors], dim), first.dtype, shape)
    check_vector_tiles("concat", result)
    return result


def unsqueeze(input: Tensor, dim: int) -> Tensor:
    shape = list(input._shape)
    shape.insert(dim % (len(shape) + 1), 1)
    return wrap(input.data.unsqueeze(dim), input.dtype, shape)
