"""Logical ops and float predicates: ``logical_and``, ``isfinite``, ``signbit``.
Results are DT_BOOL; operands of any dtype count as true when non-zero (pypto
accepts ``logical_and`` on FP32 operands, see tests/fixtures/api_ops.pt)."""
from __future__ import annotations

import torch

from ..dtypes import DT_BOOL
from ..tensor import Tensor, note_operand, wrap
from ._common import _broadcast, check_vector_tiles, refuse_input_dtype


def logical_and(input: Tensor, other: Tensor) -> Tensor:
    note_operand(input)
    note_operand(other)
    a, b, shape = _broadcast("logical_and", input, other)
    result = wrap(torch.logical_and(a, b), DT_BOOL, shape)
    check_vector_tiles("logical_and", input, other, result)
    return result


def _predicate(op: str, fn):
    def predicate(input: Tensor) -> Tensor:
        note_operand(input)
        refuse_input_dtype(op, input)
        result = wrap(fn(input.data), DT_BOOL, list(input._shape))
        check_vector_tiles(op, input, result)
        return result

    predicate.__name__ = op
    predicate.__doc__ = f"``pypto.{op}``: elementwise, DT_BOOL result."
    return predicate


isfinite = _predicate("isfinite", torch.isfinite)
signbit = _predicate("signbit", torch.signbit)
