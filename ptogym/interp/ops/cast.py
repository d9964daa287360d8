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


def _saturate(x: torch.Tensor, target: torch.dtype) -> torch.Tensor:
    """Clamp to target's range before converting (NaN -> 0 for an integer target)."""
    if target.is_floating_point or target is torch.bool:
        return x
    info = torch.iinfo(target)
    if x.is_floating_point():
        return torch.nan_to_num(x.double(), nan=0.0).clamp(info.min, info.max)
    return x.long().clamp(info.min, info.max)


def cast(input: Tensor, dtype: DataType, mode: CastMode = CastMode.CAST_NONE,
         satmode: SaturationMode = SaturationMode.OFF) -> Tensor:
    """Convert to dtype (see the module docstring for the exact rules)."""
    note_operand(input)
    if dtype is input.dtype and mode is CastMode.CAST_NONE and satmode is SaturationMode.OFF:
        return input
    x, target = input.data, dtype.torch
    if target is None:
        violation("C-API-06", f"pypto.cast to {dtype}: the interpreter has no storage type for it")
    if x.is_floating_point():
        if mode in _TO_INTEGRAL:
            x = _TO_INTEGRAL[mode](x)
        elif not target.is_floating_point:
            x = torch.round(x)
    if satmode is SaturationMode.ON:
        x = _saturate(x, target)
    result = wrap(x.to(target), dtype, list(input._shape))
    check_vector_tiles("cast", input, result)
    return result
