"""Scans along one axis: ``cumsum``."""
from __future__ import annotations

import torch

from ..checks import violation
from ..tensor import Tensor, note_operand, wrap
from ._common import check_vector_tiles, refuse_input_dtype


def cumsum(input: Tensor, dim: int) -> Tensor:
    """Running sum along ``dim``, in the input dtype (same shape)."""
    note_operand(input)
    refuse_input_dtype("cumsum", input)
    rank = input.dim()
    if not -rank <= dim < rank:
        violation("C-API-06", f"pypto.cumsum: dim {dim} out of range for rank {rank}")
    data = torch.cumsum(input.data, dim, dtype=input.data.dtype)
    result = wrap(data, input.dtype, list(input._shape))
    check_vector_tiles("cumsum", input, result)
    return result
