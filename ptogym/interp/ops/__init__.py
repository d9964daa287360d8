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
    logical      logical_and, isfinite, signbit
    bitwise      bitwise_and/or/xor/not, bitwise_left/right_shift
    math_ext     hypot, copysign, cbrt, gcd, ceil_div, lrelu, prelu, expand_exp_dif
    statistics   var, rms_norm
    scan         cumsum
    sort         topk, argsort, sort32
    triangular   tril, triu
    padding      pad, fillpad
    expand       expand_clone
    indexing_ext index_add(_), index_put_, scatter(_), get_scatter_mode, one_hot, gathermask
    distributed  pypto.distributed (SHMEM): NotImplementedError stubs
    unsupported  the other names that cannot be emulated, each raising NotImplementedError with why
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
from .bitwise import bitwise_and, bitwise_left_shift, bitwise_not, bitwise_or, bitwise_right_shift, bitwise_xor
from .expand import expand_clone
from .indexing_ext import gathermask, get_scatter_mode, index_add, index_add_, index_put_, one_hot, scatter, scatter_
from .logical import isfinite, logical_and, signbit
from .math_ext import cbrt, ceil_div, copysign, expand_exp_dif, gcd, hypot, lrelu, prelu
from .padding import fillpad, pad
from .scan import cumsum
from .sort import argsort, sort32, topk
from .statistics import rms_norm, var
from .triangular import tril, triu
from .unsupported import (ConvParams, ConvTile, conv, get_conv_tile_shapes, mrgsort,  # noqa: F401
                          set_conv_tile_shapes)

__all__ = ["CastMode", "Element", "SaturationMode", "abs", "add", "amax", "amin", "arange", "cast", "ceil", "clip", "clone", "concat", "cos", "div", "eq", "exp", "exp2", "expm1", "floor", "fmod", "from_torch", "full", "gather", "ge", "greater", "gt", "index_select", "le", "log", "log10", "log1p", "log2", "logical_not", "lt", "matmul", "max", "maximum", "min", "minimum", "mul", "ne", "neg", "ones", "pow", "prod", "reciprocal", "relu", "remainder", "round", "rsqrt", "scaled_mm", "scatter_update", "sigmoid", "sign", "sin", "softmax", "sqrt", "sub", "sum", "transpose", "trunc", "unsqueeze", "where", "zeros",
           "bitwise_and", "bitwise_left_shift", "bitwise_not", "bitwise_or", "bitwise_right_shift", "bitwise_xor",
           "expand_clone", "gathermask", "get_scatter_mode", "index_add", "index_add_", "index_put_", "one_hot",
           "scatter", "scatter_", "isfinite", "logical_and", "signbit", "cbrt", "ceil_div", "copysign",
           "expand_exp_dif", "gcd", "hypot", "lrelu", "prelu", "fillpad", "pad", "cumsum", "argsort", "sort32",
           "topk", "rms_norm", "var", "tril", "triu",
           "ConvParams", "ConvTile", "conv", "get_conv_tile_shapes", "mrgsort", "set_conv_tile_shapes"]
