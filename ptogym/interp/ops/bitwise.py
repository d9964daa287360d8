"""Bitwise ops on integer tiles: ``bitwise_and/or/xor/not`` and the shifts.

Refused dtypes are those real pypto 0.2.0 rejects (tests/fixtures/api_ops.pt):
floats for every bitwise op (its passes reject BITWISEAND on FP32), and for the
shifts also int8, uint8 and int32 (its CheckBitwiseShiftDtype; int16 compiles).
Dtypes not recorded either way are let through.
"""
from __future__ import annotations

import torch

from ..checks import violation
from ..dtypes import DT_INT8, DT_INT32, DT_UINT8
from ..tensor import Tensor
from ._common import _binary, _unary

SHIFT_REJECTED = (DT_INT8, DT_UINT8, DT_INT32)


def _check_dtype(op: str, rejected: tuple, *operands) -> None:
    for x in operands:
        if isinstance(x, Tensor) and (x.dtype.is_float or x.dtype in rejected):
            violation("C-API-07", f"pypto.{op} on {x.dtype} {list(x.data.shape)}; pypto 0.2.0 rejects float"
                                  f"{''.join(', ' + d.name for d in rejected)} operands")


def _bitwise(op: str, fn, rejected: tuple = ()):
    def bitwise(input, other) -> Tensor:
        _check_dtype(op, rejected, input, other)
        if isinstance(other, float):  # pypto: TypeError "Scalar operand for <op> must be an integer"
            violation("C-API-06", f"pypto.{op}(..., {other!r}): the scalar operand must be an integer")
        return _binary(op, fn, input, other)

    bitwise.__name__ = op
    bitwise.__doc__ = f"``pypto.{op}(input, other)``: integer tensor or int operands."
    return bitwise


bitwise_and = _bitwise("bitwise_and", torch.bitwise_and)
bitwise_or = _bitwise("bitwise_or", torch.bitwise_or)
bitwise_xor = _bitwise("bitwise_xor", torch.bitwise_xor)
bitwise_left_shift = _bitwise("bitwise_left_shift", torch.bitwise_left_shift, SHIFT_REJECTED)
bitwise_right_shift = _bitwise("bitwise_right_shift", torch.bitwise_right_shift, SHIFT_REJECTED)


def bitwise_not(input: Tensor) -> Tensor:
    _check_dtype("bitwise_not", (), input)
    return _unary("bitwise_not", torch.bitwise_not, input)
