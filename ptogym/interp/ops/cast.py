"""``pypto.cast`` with every ``CastMode`` and ``SaturationMode``, as real pypto 0.2.0
computes it (its op calculator, ``lib/calculator/src/calc_torch.cpp``, checked
bitwise by the differential corpus, tests/conformance):

* ``CAST_ROUND``/``FLOOR``/``CEIL``/``TRUNC`` first round a float input to an integral
  value in its own dtype - also for a float target: ``cast(x, DT_FP32, CAST_ROUND)``
  is pypto's round-to-integer (its own ``sin``/``cos`` rely on it).  ``CAST_ROUND``
  rounds half to even, like ``CAST_RINT``.
* Otherwise a float target gets the nearest value (``NONE``/``RINT``/``ODD`` alike)
  and an integer or bool target the input rounded half to even.
* The rounded value is then converted as C++ converts it: out of range wraps
  (fp32 300.0 -> int8 44), NaN/inf give 0 for int8/int16 and INT_MIN for int32;
  int -> narrower int wraps.
* ``SaturationMode.ON`` clamps to the target's range (pypto's documented meaning;
  pypto 0.2.0's own interpreter ignores it - a known difference, docs/fidelity.md).
"""
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


class SaturationMode(enum.Enum):  # values as pypto numbers them
    OFF = 1
    ON = 0


_TO_INTEGRAL = {CastMode.CAST_ROUND: torch.round, CastMode.CAST_FLOOR: torch.floor,
                CastMode.CAST_CEIL: torch.ceil, CastMode.CAST_TRUNC: torch.trunc}


_FP32_EXACT_BOUNDS = {127, 255, 32767}  # int8, uint8, int16 maxima: float32 holds them (and their minima) exactly
_HALF_EXACT_BOUNDS = {127, 255}  # int8, uint8: fp16 and bf16 hold them (and their minima) exactly too


def _is_integer(dtype: torch.dtype) -> bool:
    return not dtype.is_floating_point and dtype is not torch.bool


def _saturate(x: torch.Tensor, target: torch.dtype) -> torch.Tensor:
    """Clamp to target's range before converting (NaN -> 0 for an integer target).

    A float input is clamped in its own dtype when both bounds are exact there (fp16 or
    bf16 into int8 / uint8: the hot quantisation path), else in float32 when they are
    exact there (int16; float32 holds every fp16/bf16 value exactly), otherwise in
    float64 (int32 and int64 bounds)."""
    if not _is_integer(target):
        return x
    info = torch.iinfo(target)
    if not x.is_floating_point():
        return x.long().clamp(info.min, info.max)
    if x.dtype in (torch.float16, torch.bfloat16) and info.max in _HALF_EXACT_BOUNDS:
        work = x.dtype
    else:
        work = torch.float32 if (x.dtype.itemsize <= 4 and info.max in _FP32_EXACT_BOUNDS) else torch.float64
    return torch.nan_to_num(x.to(work), nan=0.0).clamp_(info.min, info.max)


def _convert(x: torch.Tensor, target: torch.dtype) -> torch.Tensor:
    """``x.to(target)``; an integer into fp16 goes through float32, which gives the same
    bits faster: every integer below fp16's overflow threshold is exact in float32, and
    every one above it stays above it there, so both roads round once (or overflow)."""
    if target is torch.float16 and not x.is_floating_point() and x.dtype is not torch.bool:
        x = x.to(torch.float32)
    return x.to(target)


def cast(input: Tensor, dtype: DataType, mode: CastMode = CastMode.CAST_NONE,
         satmode: SaturationMode = SaturationMode.OFF) -> Tensor:
    """Convert to dtype (see the module docstring for the exact rules)."""
    note_operand(input)
    if input.dtype.name == "DT_BOOL" and dtype.is_int:  # recorded: pypto's verifier refuses it (CASTOpError)
        violation("C-API-07", f"pypto.cast of a DT_BOOL tensor to {dtype}: pypto 0.2.0 refuses it; cast to a float "
                              f"type (then to {dtype})")
    if dtype is input.dtype and mode is CastMode.CAST_NONE and satmode is SaturationMode.OFF:
        return input
    x, target = input.data, dtype.torch
    if target is None:
        violation("C-API-06", f"pypto.cast to {dtype}: the interpreter has no storage type for it")
    saturating_trunc = satmode is SaturationMode.ON and mode is CastMode.CAST_TRUNC and _is_integer(target)
    if x.is_floating_point() and not saturating_trunc:  # that one: clamping to integral bounds commutes
        if mode in _TO_INTEGRAL:                         # with trunc, and the conversion truncates
            x = _TO_INTEGRAL[mode](x)
        elif not target.is_floating_point:
            x = torch.round(x)
    if satmode is SaturationMode.ON:
        x = _saturate(x, target)
    result = wrap(_convert(x, target), dtype, list(input._shape))
    check_vector_tiles("cast", input, result)
    return result
