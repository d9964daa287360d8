"""Statistics over axes: ``var`` and ``rms_norm`` (pypto.operator).

``rms_norm`` is written in pypto 0.2.0 itself as a chain of public ops; it is the
same chain of interpreter ops here, so every intermediate is rounded and checked as
pypto's would be."""
from __future__ import annotations

import torch

from ..checks import violation
from ..dtypes import DT_FP32
from ..symbolic import value_of
from ..tensor import Tensor, note_operand, reshape, wrap
from ._common import check_vector_tiles, refuse_input_dtype
from .cast import cast
from .creation import full
from .elementwise import div, mul, sqrt
from .reduction import sum


def _axes(op: str, input: Tensor, dim) -> list:
    rank = input.dim()
    dims = list(range(rank)) if dim is None else ([dim] if isinstance(dim, int) else list(dim))
    dims = dims or list(range(rank))
    for d in dims:
        if not -rank <= d < rank:
            violation("C-API-06", f"pypto.{op}: dim {d} out of range for rank {rank}")
    return sorted({d % rank for d in dims})


def var(input: Tensor, dim=None, correction: float = 1, keepdim: bool = False) -> Tensor:
    """sum((x - mean)^2) / max(0, N - correction) over ``dim`` (all axes when None), computed
    in FP32 and rounded once to the input dtype (bitwise as pypto 0.2.0 for BF16)."""
    note_operand(input)
    refuse_input_dtype("var", input)
    axes = _axes("var", input, dim)
    data = input.data.float() if input.dtype.is_float else input.data.double()
    result = torch.var(data, axes, correction=correction, keepdim=keepdim)
    if keepdim:
        shape = [1 if a in axes else d for a, d in enumerate(input._shape)]
    else:
        shape = [d for a, d in enumerate(input._shape) if a not in axes] or [1]
    check_vector_tiles("var", input)
    return wrap(result.reshape([value_of(s) for s in shape]).to(input.dtype.torch), input.dtype, shape)


def rms_norm(input: Tensor, gamma: Tensor | None = None, epsilon: float = 1e-6) -> Tensor:
    """x / sqrt(sum(x * x * (1/n)) + eps) * gamma along the last axis, in FP32."""
    x = cast(input, DT_FP32) if input.dtype is not DT_FP32 else input
    n = x.shape[-1]
    y = sqrt(sum(mul(mul(x, x), 1.0 / n), -1, keepdim=True) + epsilon)
    y = div(mul(x, full(y.shape, 1.0, DT_FP32)), y)
    if gamma is not None:
        g = reshape(gamma, [1] * (input.dim() - 1) + [gamma.shape[0]])
        y = mul(y, cast(g, DT_FP32) if g.dtype is not DT_FP32 else g)
    return cast(y, input.dtype) if input.dtype is not DT_FP32 else y

