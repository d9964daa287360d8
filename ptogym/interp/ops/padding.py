"""Padding: ``pad`` (grows the last two axes right/bottom) and ``fillpad`` (fills a
view's region beyond its valid_shape, keeping the shape).

pypto 0.2.0 accepts only what its Pad operation implements (pad.cpp): exactly the
last two axes (four entries, ``(left, right, top, bottom)``) with left = top = 0,
mode 'constant', and a fill of 0, inf or -inf.  Anything else is rejected there,
so it is a C-API-06 error here.
"""
from __future__ import annotations

import math

import torch

from ..checks import violation
from ..tensor import Tensor, note_operand, wrap
from ._common import check_vector_tiles

_FILLS = (0.0, math.inf, -math.inf)


def _check_fill(op: str, mode: str, value) -> float:
    if mode != "constant":
        violation("C-API-06", f"pypto.{op}: mode {mode!r}; only 'constant' is supported")
    value = float(value)
    if value not in _FILLS:
        violation("C-API-06", f"pypto.{op}: value {value}; the fill must be 0, inf or -inf")
    return value


def pad(input: Tensor, pad, mode: str = "constant", value: float = 0.0) -> Tensor:
    note_operand(input)
    pads = list(pad)
    if len(pads) != 4 or pads[0] != 0 or pads[2] != 0 or min(pads) < 0 or input.dim() < 2:
        violation("C-API-06", f"pypto.pad: pad {pads} on rank-{input.dim()} input; only the last 2 axes, padded "
                              f"right/bottom: (0, right, 0, bottom)")
    value = _check_fill("pad", mode, value)
    right, bottom = pads[1], pads[3]
    data = torch.nn.functional.pad(input.data, [0, right, 0, bottom], value=value)
    shape = list(input._shape)
    shape[-1], shape[-2] = shape[-1] + right, shape[-2] + bottom
    result = wrap(data, input.dtype, shape)
    check_vector_tiles("pad", input, result)
    return result


def fillpad(input: Tensor, mode: str = "constant", value: float = 0.0) -> Tensor:
    """The tile at its full static shape, ``value`` beyond the valid region."""
    note_operand(input)
    value = _check_fill("fillpad", mode, value)
    static = [int(d) for d in input.shape]
    data = torch.full(static, value, dtype=input.data.dtype, device=input.data.device)
    data[tuple(slice(0, n) for n in input.data.shape)] = input.data
    result = wrap(data, input.dtype, static)
    check_vector_tiles("fillpad", input, result)
    return result
