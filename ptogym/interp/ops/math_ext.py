"""More elementwise math: ``hypot``, ``copysign``, ``cbrt``, ``gcd``, ``ceil_div``,
``lrelu``, ``prelu``, ``expand_exp_dif``.  Each runs as torch ops in the declared
dtype, like the elementwise family; ``cbrt`` is composed of pypto ops exactly as
pypto 0.2.0 composes it (copysign(pow(abs(x), 1/3), x))."""
from __future__ import annotations

import torch

from ..checks import violation
from ..dtypes import DT_FP32, DT_INT32
from ..tensor import Tensor, note_operand, wrap
from ._common import Element, _binary, _unary, check_vector_tiles, integer_division
from .elementwise import abs, pow


def hypot(input: Tensor, other: Tensor) -> Tensor:
    """A float input takes an ``other`` of any dtype, the result in the input's (recorded)."""
    return _binary("hypot", lambda a, b: torch.hypot(a, b.to(a.dtype)), input, other,
                   mixed=lambda input_dtype, other_dtype: input_dtype if input_dtype.is_float else None)


def _copysign_result_dtype(input_dtype, other_dtype):
    """pypto's copysign: any pair of DT_FP32/INT16/INT32 gives DT_FP32 (equal int dtypes too);
    other pairs of two dtypes it refuses (recorded for all 81 pairs)."""
    if {input_dtype.name, other_dtype.name} <= {"DT_FP32", "DT_INT16", "DT_INT32"}:
        return DT_FP32
    return None


def copysign(input: Tensor, other: Tensor) -> Tensor:
    result_dtype = _copysign_result_dtype(input.dtype, other.dtype) if isinstance(other, Tensor) else None
    return _binary("copysign", lambda a, b: torch.copysign(a.float(), b), input, other, result_dtype=result_dtype,
                   mixed=_copysign_result_dtype)


def cbrt(input: Tensor) -> Tensor:
    return copysign(pow(abs(input), 1.0 / 3.0), input)


def gcd(input: Tensor, other) -> Tensor:
    if input.dtype.is_float:
        violation("C-API-07", f"pypto.gcd on {input.dtype}; needs an integer dtype")
    return _binary("gcd", lambda a, b: torch.gcd(a, torch.as_tensor(b, dtype=a.dtype, device=a.device)),
                   input, other)


def ceil_div(input: Tensor, other) -> Tensor:
    """ceil(input / other), exact; pypto 0.2.0 accepts only DT_INT32 operands (binary.cpp)."""
    for x in (input, other):
        if isinstance(x, Tensor) and x.dtype is not DT_INT32:
            violation("C-API-07", f"pypto.ceil_div on {x.dtype}; only DT_INT32")
    return _binary("ceil_div", integer_division("ceil_div", lambda a, b: -torch.div(-a, b, rounding_mode="floor")),
                   input, other)


def lrelu(input: Tensor, negative_slope=0.01) -> Tensor:
    slope = negative_slope.data if isinstance(negative_slope, Element) else negative_slope
    return _unary("lrelu", lambda d: torch.nn.functional.leaky_relu(d, float(slope)), input)


def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """max(0, x) + weight * min(0, x), weight along the channel axis (dim 1; one value for 1-D input)."""
    note_operand(input)
    note_operand(weight)
    channels = input.data.shape[1] if input.dim() > 1 else 1
    if weight.dim() != 1 or weight.data.shape[0] not in (1, channels):
        violation("C-API-06", f"pypto.prelu: weight {list(weight.data.shape)} must be 1-D with 1 or {channels} "
                              f"(channel) entries for input {list(input.data.shape)}")
    if weight.dtype is not input.dtype:
        violation("C-API-01", f"pypto.prelu: {input.dtype} input with {weight.dtype} weight")
    result = wrap(torch.nn.functional.prelu(input.data, weight.data), input.dtype, list(input._shape))
    check_vector_tiles("prelu", input, result)
    return result


def expand_exp_dif(input: Tensor, other: Tensor) -> Tensor:
    """exp(input - other), other broadcast along its size-1 axes."""
    return _binary("expand_exp_dif", lambda a, b: torch.exp(a - b), input, other)
