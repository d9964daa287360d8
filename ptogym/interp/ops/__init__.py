"""The compute ops, one module per family; each op is the specification of what the
PyPTO op computes and which constraints it enforces.  Tiles run as whole torch ops
in the declared dtype, so bf16/fp16 results are rounded at every op and fp32 stays
fp32.

    _common      Element, operand handling, vector-tile checks
    elementwise  arithmetic, comparisons, unary math, where, softmax
    reduction    sum, amax, amin, prod, max, min
    cast         cast, CastMode, SaturationMode
    matmul       matmul, scaled_mm
    layout       transpose, concat, unsqueeze
    creation     full, zeros, ones, arange, from_torch
    indexing     index_select, gather, scatter_update
"""
from ._common import Element
from .cast import CastMode, SaturationMode, cast
from .creation import arange, from_torch, full, ones, zeros
from .elementwise import (abs, add, ceil, clip, clone, cos, div, eq, exp, exp2, expm1, floor, fmod, ge, greater,
                          gt, le, log, log1p, log2, log10, logical_not, lt, maximum, minimum, mul, ne, neg, pow,
                          reciprocal, relu, remainder, round, rsqrt, sigmoid, sign, sin, softmax, sqrt, sub, trunc,
                          where)
from .indexing import gather, index_select, scatter_update
from .layout import concat, transpose, unsqueeze
from .matmul import matmul, scaled_mm
from .reduction import amax, amin, max, min, prod, sum

__all__ = ["CastMode", "Element", "SaturationMode", "abs", "add", "amax", "amin", "arange", "cast", "ceil", "clip", "clone", "concat", "cos", "div", "eq", "exp", "exp2", "expm1", "floor", "fmod", "from_torch", "full", "gather", "ge", "greater", "gt", "index_select", "le", "log", "log10", "log1p", "log2", "logical_not", "lt", "matmul", "max", "maximum", "min", "minimum", "mul", "ne", "neg", "ones", "pow", "prod", "reciprocal", "relu", "remainder", "round", "rsqrt", "scaled_mm", "scatter_update", "sigmoid", "sign", "sin", "softmax", "sqrt", "sub", "sum", "transpose", "trunc", "unsqueeze", "where", "zeros"]
