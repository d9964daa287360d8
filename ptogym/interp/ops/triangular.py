"""Triangular masks of the last two axes: ``tril``, ``triu`` (elements outside the
triangle become 0; ``diagonal`` shifts it like torch's)."""
from __future__ import annotations

import torch

from ..checks import violation
from ..symbolic import value_of
from ..tensor import Tensor, note_operand, wrap
from ._common import check_vector_tiles, refuse_input_dtype


def _triangle(op: str, fn):
    def triangle(input: Tensor, diagonal=0) -> Tensor:
        note_operand(input)
        refuse_input_dtype(op, input)
        if not 2 <= input.dim() <= 5:
            violation("C-API-06", f"pypto.{op} on rank-{input.dim()} {list(input.data.shape)}; needs rank 2 to 5")
        result = wrap(fn(input.data, value_of(diagonal)), input.dtype, list(input._shape))
        check_vector_tiles(op, input, result)
        return result

    triangle.__name__ = op
    return triangle


tril = _triangle("tril", torch.tril)
triu = _triangle("triu", torch.triu)
