"""``pypto.cast`` with every ``CastMode`` and ``SaturationMode``."""
from __future__ import annotations

import enum

import torch

from ..checks import violation
from ..dtypes import DataType
from ..tensor import Tensor, note_operand, wrap
from ._common import check_vector_tiles


class CastMode(enum.Enum):
    CAST_NONE = 0
    CAST_RINT = 1
    CAST_ROUND = 2
    CAST_FLOOR = 3
    CAST_CEIL = 4
    CAST_TRUNC = 5
    CAST_ODD = 6


class SaturationMode(enum.Enum):
    OFF = 0
    ON = 1


_INT_ROUNDING = {
    CastMode.CAST_NONE: lambda x: torch.round(x),  # round half to even, as CAST_RINT
    CastMode.CAST_RINT: lambda x: torch.round(x),
    CastMode.CAST_ROUND: lambda x: torch.sign(x) * torch.floor(torch.abs(x) + 0.5),
    CastMode.CAST_FLOOR: torch.floor,
    CastMode.CAST_CEIL: torch.ceil,
    CastMode.CAST_TRUNC: torch.trunc,
    CastMode.CAST_ODD: lambda x: torch.round(x),
}


def _float_to_float(x: torch.Tensor, target: torch.dtype, mode: CastMode) -> torch.Tensor:
    """Narrow a float tensor with a directed rounding mode (NONE/RINT: nearest-even)."""
    nearest = x.to(target)
    exact = target == x.dtype or torch.finfo(target).bits > torch.finfo(x.dtype).bits  # fp16 <-> bf16 is not
    if mode in (CastMode.CAST_NONE, CastMode.CAST_RINT) or exact:
        return nearest
    wide = x.to(torch.float64)
    back = nearest.to(torch.float64)
    up = torch.nextafter(nearest, torch.full_like(nearest, float("inf")))
    down = torch.nextafter(nearest, torch.full_like(nearest, float("-inf")))
    if mode == CastMode.CAST_FLOOR:
        return torch.where(back > wide, down, nearest)
    if mode == CastMode.CAST_CEIL:
        return torch.where(back < wide, up, nearest)
    if mode == CastMode.CAST_TRUNC:
        toward_zero = torch.where(wide > 0, torch.where(back > wide, down, nearest),
                                  torch.where(back < wide, up, nearest))
        return toward_zero
    if mode == CastMode.CAST_ROUND:  # nearest, ties away from zero
        tie_other = torch.where(back > wide, down, up)
        is_tie = (tie_other.to(torch.float64) - wide).abs() == (back - wide).abs()
        away = torch.where(tie_other.to(torch.float64).abs() > back.abs(), tie_other, nearest)
        return torch.where(is_tie, away, nearest)
    # CAST_ODD: an inexact result takes the truncated neighbour whose last mantissa bit is 1
    truncated = _float_to_float(x, target, CastMode.CAST_TRUNC)
    inexact = truncated.to(torch.float64) != wide
    bits = truncated.view(torch.int16 if torch.finfo(target).bits == 16 else torch.int32)
    even = (bits & 1) == 0
    return torch.where(inexact & even, _next_away(truncated), truncated)


def _next_away(t: torch.Tensor) -> torch.Tensor:
    direction = torch.where(torch.signbit(t), torch.full_like(t, float("-inf")), torch.full_like(t, float("inf")))
    return torch.nextafter(t, direction)


def cast(input: Tensor, dtype: DataType, mode: CastMode = CastMode.CAST_NONE,
         satmode: SaturationMode = SaturationMode.OFF) -> Tensor:
    """Convert to dtype.  Float->float rounds by ``mode`` (NONE = nearest-even).
    Float->int rounds by ``mode`` (NONE = nearest-even) and always saturates to the
    target range (the device's conversion instructions clamp; NaN -> 0).
    Int->narrower int wraps with ``SaturationMode.OFF`` and clamps with ``ON``."""
    note_operand(input)
    if dtype is input.dtype and mode is CastMode.CAST_NONE and satmode is SaturationMode.OFF:
        return input
    x, target = input.data, dtype.torch
    if target is None:
        violation("C-API-06", f"pypto.cast to {dtype}: the interpreter has no storage type for it")
    if x.is_floating_point() and target.is_floating_point:
        data = _float_to_float(x, target, mode)
    elif x.is_floating_point() and target is not torch.bool:
        info = torch.iinfo(target)
        rounded = _INT_ROUNDING[mode](torch.nan_to_num(x.to(torch.float64), nan=0.0))
        data = rounded.clamp(info.min, info.max).to(target)
    elif target.is_floating_point or target is torch.bool or x.dtype is torch.bool:
        data = x.to(target)
    else:
        info = torch.iinfo(target)
        data = x.to(torch.int64).clamp(info.min, info.max).to(target) if satmode is SaturationMode.ON else x.to(target)
    result = wrap(data, dtype, list(input._shape))
    check_vector_tiles("cast", input, result)
    return result
