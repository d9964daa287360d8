"""Elementwise ops: binary arithmetic, comparisons, unary math, ``where``, ``softmax``.
Each tile runs as one torch op in its declared dtype (bf16/fp16 rounded per op).

Where real pypto 0.2.0 computes an op as a composition of simpler ones, so does the
interpreter, to give the same bits (checked by tests/conformance): ``rsqrt`` is
1/sqrt, ``log2``/``log10`` are ln(x)/ln(base), ``sigmoid`` is 1/(1 + exp(-x)) and
``softmax`` exp(x - max) / sum, all computed in fp32 for fp16/bf16 inputs."""
from __future__ import annotations

import builtins
import math

import torch

from ..checks import violation
from ..dtypes import DT_BOOL, DT_FP32
from ..symbolic import value_of
from ..tensor import Tensor, note_operand, wrap
from ._common import (Element, _binary, _scalar, _static, _unary, check_vector_tiles, integer_division,
                      pad_undefined)


def add(input, other, *, alpha=1):
    return _binary("add", (lambda a, b: a + b) if alpha == 1 else (lambda a, b: a + b * alpha), input, other)


def sub(input, other, *, alpha=1):
    return _binary("sub", (lambda a, b: a - b) if alpha == 1 else (lambda a, b: a - b * alpha), input, other)


def mul(input, other):
    return _binary("mul", lambda a, b: a * b, input, other)


def div(input, other):
    """True division; pypto 0.2.0 rejects an integer dividend, by a tensor (DIVOpError) or a
    scalar (DIVSOpError)."""
    if isinstance(input, Tensor) and input.dtype.is_int:
        violation("C-API-06", f"pypto.div of a {input.dtype} tensor: pypto rejects integer division; cast to a "
                              f"float type first")
    return _binary("div", lambda a, b: a / b, input, other)


def _pow_result_dtype(input_dtype, other_dtype):
    """The result dtype pypto 0.2.0 gives ``pow`` of two tensors (recorded for all 81 pairs of
    DT_FP32/FP16/BF16/INT8/INT16/INT32/INT64/UINT8/BOOL): FP32 wins; equal dtypes keep theirs
    only for FP16, BF16 and INT32 (FP32 otherwise); INT32, then BF16 (not against FP16),
    yield to the other operand; any other pair gives FP32."""
    names = (input_dtype.name, other_dtype.name)
    if "DT_FP32" in names:
        return DT_FP32
    if input_dtype is other_dtype:
        return input_dtype if names[0] in ("DT_FP16", "DT_BF16", "DT_INT32") else DT_FP32
    for mine, theirs in ((input_dtype, other_dtype), (other_dtype, input_dtype)):
        if mine.name == "DT_INT32":
            return theirs
    for mine, theirs in ((input_dtype, other_dtype), (other_dtype, input_dtype)):
        if mine.name == "DT_BF16" and theirs.name != "DT_FP16":
            return theirs
    return DT_FP32


def pow(input, other):
    if isinstance(other, Tensor):
        return _binary("pow", _pow_values, input, other, result_dtype=_pow_result_dtype(input.dtype, other.dtype),
                       mixed=_pow_result_dtype)
    if isinstance(other, float) and input.dtype.name in ("DT_INT8", "DT_INT64", "DT_UINT8", "DT_BOOL"):
        violation("C-API-07", f"pypto.pow of a {input.dtype} tensor by a float: pypto 0.2.0 refuses it (LNOpError); "
                              f"cast it first")
    scalar_into_fp32 = isinstance(other, float) and input.dtype.name in ("DT_INT16", "DT_INT32")  # recorded
    return _binary("pow", _pow_values, input, other, result_dtype=DT_FP32 if scalar_into_fp32 else None)


def _pow_values(a, b):
    """torch.pow on the promoted operands; two integer or bool tensors in fp64 (pypto computes
    int8 4 ** 4 = 256 into its FP32 result; torch has no bool pow); a fractional float exponent
    other than 0.5 as pypto computes it, exp(b * ln(a)) in fp32 (measured bitwise for 1.5 and 2.5,
    where torch.pow is 1 ulp off; 0.5 and integral exponents are torch.pow's)."""
    if isinstance(b, float) and not b.is_integer() and b != 0.5:
        return torch.exp(b * torch.log(a.float()))
    if isinstance(b, torch.Tensor) and not a.is_floating_point() and not b.is_floating_point():
        return torch.pow(a.double(), b.double())
    if a.dtype == torch.bool:
        a = a.float()
    return torch.pow(a, b)


def maximum(input, other):
    return _binary("maximum", _bound(torch.maximum), input, other)


def minimum(input, other):
    return _binary("minimum", _bound(torch.minimum), input, other)


def fmod(input, other):
    return _binary("fmod", integer_division("fmod", torch.fmod), input, other)


def remainder(input, other):
    return _binary("remainder", integer_division("remainder", torch.remainder), input, other,
                   mixed=_int16_takes_any)


def _int16_takes_any(input_dtype, other_dtype):
    """pypto's remainder of a DT_INT16 tensor by a tensor of any dtype is DT_INT16; other
    pairs of two dtypes it refuses (recorded)."""
    return input_dtype if input_dtype.name == "DT_INT16" else None


def _compared_as_numbers(input_dtype, other_dtype):
    """pypto compares operands of two dtypes by value (bools as 0/1), recorded for every pair."""
    return DT_BOOL


def _compare(op: str, fn):
    def compare(input, other):
        if isinstance(other, int):  # bool too
            violation("C-API-06", f"pypto.{op}(..., {other!r}): pypto's Compare takes a tensor, a float or an "
                                  f"Element, not a Python int (TypeError: incompatible function arguments; "
                                  f"write {float(other)!r})")
        return _binary(op, fn, input, other, result_dtype=DT_BOOL, mixed=_compared_as_numbers)
    compare.__name__ = op
    return compare


eq = _compare("eq", torch.eq)
ne = _compare("ne", torch.ne)
lt = _compare("lt", torch.lt)
le = _compare("le", torch.le)
gt = _compare("gt", torch.gt)
ge = _compare("ge", torch.ge)
greater = gt


def _in_fp32(data: torch.Tensor, fn) -> torch.Tensor:
    """fn computed in fp32 and rounded back to data's dtype once, as pypto computes
    its composite ops (and rsqrt/log2/log10) for fp16/bf16 inputs; an integer or bool
    input gets the result rounded half to even (recorded: cos of int16 1 -> 1, rsqrt of 4 -> 0)."""
    result = fn(data.to(torch.float32))
    if not data.is_floating_point():
        result = torch.round(result)
    return result.to(data.dtype)


def _float_math(fn):
    """A float function; integer and bool inputs are computed in fp32 (``_in_fp32``)."""
    return lambda d: fn(d) if d.is_floating_point() else _in_fp32(d, fn)


def _unary_op(op: str, fn, result_dtype=None):
    """``result_dtype(input_dtype)``: the result's dtype where it is not the input's."""
    def unary(input):
        return _unary(op, fn, input, result_dtype and result_dtype(input.dtype))
    unary.__name__ = op
    return unary


def _fp32_for_ints(dtype):
    """pypto computes these ops of an integer tensor into DT_FP32 (recorded: int16, int32)."""
    return DT_FP32 if dtype.is_int else None


exp = _unary_op("exp", torch.exp)
exp2 = _unary_op("exp2", lambda d: torch.exp2(d if d.is_floating_point() else d.float()), _fp32_for_ints)
expm1 = _unary_op("expm1", lambda d: torch.expm1(d if d.is_floating_point() else d.float()), _fp32_for_ints)
log = _unary_op("log", torch.log)
log2 = _unary_op("log2", lambda d: _in_fp32(d, lambda x: torch.log(x) / math.log(2.0)))
log10 = _unary_op("log10", lambda d: _in_fp32(d, lambda x: torch.log(x) / math.log(10.0)))
log1p = _unary_op("log1p", lambda d: torch.log1p(d.double()).to(d.dtype))  # fp32 torch.log1p flushes subnormals
sqrt = _unary_op("sqrt", torch.sqrt)
rsqrt = _unary_op("rsqrt", lambda d: _in_fp32(d, lambda x: torch.reciprocal(torch.sqrt(x))))
reciprocal = _unary_op("reciprocal", torch.reciprocal)
abs = _unary_op("abs", torch.abs)
neg = _unary_op("neg", torch.neg)
relu = _unary_op("relu", torch.relu)
def sigmoid(input: Tensor) -> Tensor:
    """pypto composes it as ``div(full(shape, 1.0), 1 + exp(-x))`` with a ones tile whose
    valid shape is the whole tile, so the result is valid over the whole tile: a tail
    tile's padding becomes undefined (NaN here) values, and assembling the result where
    the tail ended overhangs (pypto rejects it, ASSEMBLEOpError)."""
    result = _unary("sigmoid", lambda d: _in_fp32(d, lambda x: torch.reciprocal(torch.exp(x * -1.0) + 1.0)), input)
    result.data = pad_undefined("sigmoid", result.data, _static(input))
    return result
sin = _unary_op("sin", _float_math(torch.sin))
cos = _unary_op("cos", _float_math(torch.cos))
ceil = _unary_op("ceil", _float_math(torch.ceil))
floor = _unary_op("floor", _float_math(torch.floor))
trunc = _unary_op("trunc", _float_math(torch.trunc))
sign = _unary_op("sign", torch.sign)
logical_not = _unary_op("logical_not", torch.logical_not, lambda dtype: DT_BOOL)
clone = _unary_op("clone", torch.clone)


def round(input, decimals: int = 0):
    return _unary("round", lambda d: torch.round(d, decimals=decimals), input)


def clip(input, min=None, max=None):
    """``pypto.clip``: bounds are numbers or tensors that broadcast against input (pypto
    0.2.0 passes tensor bounds to its Clip op, numpy-style broadcasting as binary ops)."""
    if not isinstance(min, Tensor) and not isinstance(max, Tensor):
        return _unary("clip", lambda d: torch.clamp(d, _scalar(min), _scalar(max)), input)
    # max/min are exact, so the two-step form equals one clamp(x, lo, hi)
    result = input if min is None else _binary("clip", _bound(torch.maximum), input, min)
    return result if max is None else _binary("clip", _bound(torch.minimum), result, max)


def _bound(fn):
    return lambda a, b: fn(a, torch.as_tensor(b, dtype=a.dtype, device=a.device))


def _where_takes(first, second) -> bool:
    """Whether pypto's where takes a ``second`` value tensor with a ``first`` (recorded for all 81
    pairs): the result is the first's dtype, which must hold the second's values - DT_FP32 takes
    any, FP16/BF16 any integer or bool, an integer type integers (and bools) no wider than itself."""
    if first is second or first.name == "DT_FP32":
        return True
    if first.is_float:
        return not second.is_float
    return first.is_int and not second.is_float and second.nbytes <= first.nbytes


def where(condition: Tensor, input, other) -> Tensor:
    note_operand(condition)
    if condition.dtype is not DT_BOOL:
        violation("C-API-06", f"pypto.where: condition is {condition.dtype}, needs DT_BOOL")
    values = [x.data if isinstance(x, Tensor) else _scalar(x) for x in (input, other)]
    ref = input if isinstance(input, Tensor) else other
    scalar = other if ref is input else input
    if isinstance(ref, Tensor) and not ref.dtype.is_float and isinstance(scalar, float):
        violation("C-API-07", f"pypto.where: a {ref.dtype} tensor with the float {scalar!r}: pypto 0.2.0 refuses it "
                              f"(recorded); pass an int or cast the tensor")
    if isinstance(input, Tensor) and isinstance(other, Tensor) and not _where_takes(input.dtype, other.dtype):
        violation("C-API-07", f"pypto.where: a {other.dtype} second value with a {input.dtype} first: pypto 0.2.0 "
                              f"refuses the pair (WHERE_TTOpError); cast one")
    if isinstance(ref, Tensor):
        dtype, shape = ref.dtype, [builtins.max(value_of(a), value_of(b)) for a, b in zip(condition._shape, ref._shape)]
    else:  # two scalars: pypto makes a Python number an Element of DT_FP32; the shape is the condition's
        dtype = next((x.dtype for x in (input, other) if isinstance(x, Element)), DT_FP32)
        shape = [value_of(d) for d in condition._shape]
    data = torch.where(condition.data, *[torch.as_tensor(v, dtype=dtype.torch) if not isinstance(v, torch.Tensor)
                                         else v for v in values]).to(dtype.torch)
    result = wrap(data, dtype, shape)
    check_vector_tiles("where", condition, *[x for x in (input, other) if isinstance(x, Tensor)], result)
    return result


def _softmax_fp32(x: torch.Tensor, dim: int) -> torch.Tensor:
    shifted = torch.exp(x - torch.amax(x, dim, keepdim=True))
    return shifted / torch.sum(shifted, dim, keepdim=True)


def softmax(input: Tensor, dim: int) -> Tensor:
    """pypto's composition (operator.py): in fp32, exp(x - amax) / sum, cast back
    (torch.softmax rounds differently: 1 ulp off pypto on published examples)."""
    return _unary("softmax", lambda d: _in_fp32(d, lambda x: _softmax_fp32(x, dim)), input)
