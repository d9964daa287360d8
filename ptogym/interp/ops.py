"""The compute ops: each one is the specification of what a PyPTO op computes and
which constraints it enforces.  Tiles run as whole torch ops in the declared dtype,
so bf16/fp16 results are rounded at every op and fp32 stays fp32.
"""
from __future__ import annotations

import builtins
import enum
import math

import torch

from . import dtypes, runtime
from .checks import violation
from .dtypes import DT_BOOL, DT_FP32, DT_INT32, DataType
from .platform import platform
from .symbolic import SymbolicScalar, sym_max, sym_min, value_of
from .tensor import Tensor, _default_device, note_operand, wrap


class CastMode(enum.Enum):
    CAST_NONE = 0
    CAST_RINT = 1
    CAST_ROUND = 2
    CAST_FLOOR = 3
    CAST_CEIL = 4
    CAST_TRUNC = 5
    CAST_ODD = 6


class SaturationMode(enum.Enum):
    OFF = 0
    ON = 1


class Element:
    """``pypto.Element(dtype, value)``: a scalar with an explicit dtype."""

    def __init__(self, dtype: DataType, data):
        self.dtype, self.data = dtype, data

    def __repr__(self) -> str:
        return f"Element({self.dtype}, {self.data})"


# --- tile checks ---------------------------------------------------------------------
_checked: set = set()  # (tile, profile, operand signature) already proven valid


def _static(t: Tensor) -> tuple:
    """The static shape's concrete values (hot: every op's checks start here)."""
    return tuple(d if type(d) is int else value_of(d) for d in t._shape)


def check_dynamic_outside_loop(op: str, *tensors: Tensor) -> None:
    """C-LOOP-01: pypto cannot build a whole-tensor op over a dynamic dim outside a loop."""
    if runtime.current().loop_depth == 0 and runtime.in_kernel():
        for t in tensors:
            dynamic = [d for d in t._shape if isinstance(d, SymbolicScalar)]
            if dynamic:
                violation("C-LOOP-01", f"pypto.{op} on {t.name or 'tensor'} {t._shape} with dynamic dim "
                                       f"{dynamic[0].expr} outside any pypto.loop")


def check_vector_tiles(op: str, *tensors: Tensor) -> None:
    """C-LOOP-01 and C-TILE-06/08/02/03 for one vector op over its operands and result."""
    check_dynamic_outside_loop(op, *tensors)
    tile = runtime.current().vec_tile
    signature = (op, tile, platform.profile, tuple((_static(t), t.dtype) for t in tensors))
    if signature in _checked:
        return
    if tile is None:
        violation("C-TILE-06", f"pypto.{op} before any pypto.set_vec_tile_shapes")
        return
    total, valid = 0, True
    for t in tensors:
        shape = _static(t)
        if len(tile) != len(shape):
            valid = False
            violation("C-TILE-08", f"pypto.{op}: vec tile {list(tile)} (rank {len(tile)}) on {t.name or 'tensor'} "
                                   f"{list(shape)} (rank {len(shape)}); set a rank-{len(shape)} tile")
            continue
        effective = [builtins.min(a, b) for a, b in zip(tile, shape)]
        nbytes = t.dtype.nbytes
        last = effective[-1]
        if last > 1 and (last * nbytes) % platform.profile.ub_block_bytes:
            valid = False
            violation("C-TILE-02", f"pypto.{op}: tile last dim {last} x {nbytes} B ({t.dtype}) = {last * nbytes} B "
                                   f"is not a multiple of {platform.profile.ub_block_bytes} B (tile {list(tile)}, "
                                   f"tensor {list(shape)})")
        total += math.prod(effective) * nbytes
    if total > platform.profile.ub_bytes:
        valid = False
        violation("C-TILE-03", f"pypto.{op}: tiles of {len(tensors)} operand(s) need {total} B of UB > "
                               f"{platform.profile.ub_bytes} B on {platform.profile.npuarch} (vec tile {list(tile)}, "
                               f"shapes {[list(_static(t)) for t in tensors]})")
    if valid:  # a violation let through by lenient() must still be reported in strict mode
        _checked.add(signature)


# --- operand handling ----------------------------------------------------------------
def _scalar(x):
    if isinstance(x, Element):
        return x.data
    if isinstance(x, SymbolicScalar):
        return x.value
    return x


def _broadcast(op: str, a: Tensor, b: Tensor):
    """Data of two operands with equal rank, trimmed to their common valid extent."""
    if a.dim() != b.dim():
        violation("C-API-03", f"pypto.{op}: rank {a.dim()} {list(_static(a))} vs rank {b.dim()} {list(_static(b))}")
    sa, sb = _static(a), _static(b)
    for x, y in zip(sa, sb):
        if x != y and x != 1 and y != 1:
            violation("C-API-03", f"pypto.{op}: shapes {list(sa)} and {list(sb)} do not broadcast")
    da, db = a.data, b.data
    if da.shape != db.shape:
        common = [builtins.min(x, y) if (p != 1 and q != 1) else builtins.max(x, y)
                  for x, y, p, q in zip(da.shape, db.shape, sa, sb)]
        da = da[tuple(slice(0, c if p != 1 else 1) for c, p in zip(common, sa))]
        db = db[tuple(slice(0, c if q != 1 else 1) for c, q in zip(common, sb))]
    shape = [builtins.max(x, y) if builtins.min(x, y) == 1 else x for x, y in zip(sa, sb)]
    return da, db, shape


def _binary(op: str, fn, input, other, *, result_dtype=None):
    if not isinstance(input, Tensor):
        input, other = other, input
        fn_ = fn
        fn = lambda x, y: fn_(y, x)  # noqa: E731 - keep operand order for scalar-first calls
    note_operand(input)
    if isinstance(other, Tensor):
        note_operand(other)
        if other.dtype is not input.dtype:
            violation("C-API-01", f"pypto.{op}: {input.dtype} {list(_static(input))} with {other.dtype} "
                                  f"{list(_static(other))}; cast one side first")
        a, b, shape = _broadcast(op, input, other)
        out_dtype = result_dtype or input.dtype
        result = wrap(fn(a, b), out_dtype, shape)
        check_vector_tiles(op, input, other, result)
    else:
        if isinstance(other, Element) and other.dtype is not input.dtype:
            violation("C-API-01", f"pypto.{op}: {input.dtype} tensor with Element of {other.dtype}")
        result = wrap(fn(input.data, _scalar(other)), result_dtype or input.dtype, list(input._shape))
        check_vector_tiles(op, input, result)
    if result.data.dtype != result.dtype.torch:
        result.data = result.data.to(result.dtype.torch)
    return result


def _unary(op: str, fn, input: Tensor) -> Tensor:
    note_operand(input)
    result = wrap(fn(input.data), input.dtype, list(input._shape))
    check_vector_tiles(op, input, result)
    return result


def add(input, other, *, alpha=1):
    return _binary("add", (lambda a, b: a + b) if alpha == 1 else (lambda a, b: a + b * alpha), input, other)


def sub(input, other, *, alpha=1):
    return _binary("sub", (lambda a, b: a - b) if alpha == 1 else (lambda a, b: a - b * alpha), input, other)


def mul(input, other):
    return _binary("mul", lambda a, b: a * b, input, other)


def div(input, other):
    return _binary("div", lambda a, b: a / b, input, other)


def pow(input, other):
    return _binary("pow", torch.pow, input, other)


def maximum(input, other):
    return _binary("maximum", lambda a, b: torch.maximum(a, torch.as_tensor(b, dtype=a.dtype, device=a.device)),
                   input, other)


def minimum(input, other):
    return _binary("minimum", lambda a, b: torch.minimum(a, torch.as_tensor(b, dtype=a.dtype, device=a.device)),
                   input, other)


def fmod(input, other):
    return _binary("fmod", torch.fmod, input, other)


def remainder(input, other):
    return _binary("remainder", torch.remainder, input, other)


def _compare(op: str, fn):
    def compare(input, other):
        return _binary(op, fn, input, other, result_dtype=DT_BOOL)
    compare.__name__ = op
    return compare


eq = _compare("eq", torch.eq)
ne = _compare("ne", torch.ne)
lt = _compare("lt", torch.lt)
le = _compare("le", torch.le)
gt = _compare("gt", torch.gt)
ge = _compare("ge", torch.ge)
greater = gt


def _unary_op(op: str, fn):
    def unary(input):
        return _unary(op, fn, input)
    unary.__name__ = op
    return unary


exp = _unary_op("exp", torch.exp)
exp2 = _unary_op("exp2", torch.exp2)
expm1 = _unary_op("expm1", torch.expm1)
log = _unary_op("log", torch.log)
log2 = _unary_op("log2", torch.log2)
log10 = _unary_op("log10", torch.log10)
log1p = _unary_op("log1p", torch.log1p)
sqrt = _unary_op("sqrt", torch.sqrt)
rsqrt = _unary_op("rsqrt", torch.rsqrt)
reciprocal = _unary_op("reciprocal", torch.reciprocal)
abs = _unary_op("abs", torch.abs)
neg = _unary_op("neg", torch.neg)
relu = _unary_op("relu", torch.relu)
sigmoid = _unary_op("sigmoid", torch.sigmoid)
sin = _unary_op("sin", torch.sin)
cos = _unary_op("cos", torch.cos)
ceil = _unary_op("ceil", torch.ceil)
floor = _unary_op("floor", torch.floor)
trunc = _unary_op("trunc", torch.trunc)
sign = _unary_op("sign", torch.sign)
logical_not = _unary_op("logical_not", torch.logical_not)
clone = _unary_op("clone", torch.clone)


def round(input, decimals: int = 0):
    return _unary("round", lambda d: torch.round(d, decimals=decimals), input)


def clip(input, min=None, max=None):
    return _unary("clip", lambda d: torch.clamp(d, _scalar(min), _scalar(max)), input)


def where(condition: Tensor, input, other) -> Tensor:
    note_operand(condition)
    if condition.dtype is not DT_BOOL:
        violation("C-API-06", f"pypto.where: condition is {condition.dtype}, needs DT_BOOL")
    ref = input if isinstance(input, Tensor) else other
    values = [x.data if isinstance(x, Tensor) else _scalar(x) for x in (input, other)]
    if all(isinstance(x, Tensor) for x in (input, other)) and input.dtype is not other.dtype:
        violation("C-API-01", f"pypto.where: {input.dtype} vs {other.dtype}")
    if not isinstance(ref, Tensor):
        violation("C-API-06", "pypto.where needs at least one tensor value operand")
    data = torch.where(condition.data, *values).to(ref.dtype.torch)
    result = wrap(data, ref.dtype, [builtins.max(value_of(a), value_of(b)) for a, b in zip(condition._shape, ref._shape)])
    check_vector_tiles("where", condition, result)
    return result


# --- reductions ------------------------------------------------------------------------
def _reduce(op: str, fn, input: Tensor, dim: int, keepdim: bool) -> Tensor:
    note_operand(input)
    rank = input.dim()
    if not -rank <= dim < rank:
        violation("C-API-06", f"pypto.{op}: dim {dim} out of range for rank {rank}")
    axis = dim % rank
    shape = list(input._shape)
    if keepdim:
        shape[axis] = 1
    else:
        del shape[axis]
    result = wrap(fn(input.data, axis, keepdim), input.dtype, shape)
    check_vector_tiles(op, input)
    return result


def sum(input: Tensor, dim: int, keepdim: bool = False) -> Tensor:
    """Sum along dim.  Only DT_FP32 (C-API-05); the input tile must fit the reduction
    buffer (C-TILE-04)."""
    if input.dtype is not DT_FP32:
        violation("C-API-05", f"pypto.sum on {input.dtype} {list(_static(input))}; cast to DT_FP32 first")
    tile = runtime.current().vec_tile
    if tile is not None and len(tile) == input.dim():
        effective = [builtins.min(a, value_of(b)) for a, b in zip(tile, input._shape)]
        nbytes = math.prod(effective) * input.dtype.nbytes
        if nbytes > platform.profile.sum_buffer_bytes:
            violation("C-TILE-04", f"pypto.sum input tile {effective} x {input.dtype.nbytes} B = {nbytes} B > "
                                   f"{platform.profile.sum_buffer_bytes} B reduction buffer")
    return _reduce("sum", lambda d, a, k: torch.sum(d, a, keepdim=k), input, dim, keepdim)


def amax(input: Tensor, dim: int, keepdim: bool = False) -> Tensor:
    return _reduce("amax", lambda d, a, k: torch.amax(d, a, keepdim=k), input, dim, keepdim)


def amin(input: Tensor, dim: int, keepdim: bool = False) -> Tensor:
    return _reduce("amin", lambda d, a, k: torch.amin(d, a, keepdim=k), input, dim, keepdim)


def prod(input: Tensor, dim: int, keepdim: bool = False) -> Tensor:
    return _reduce("prod", lambda d, a, k: torch.prod(d, a, keepdim=k, dtype=d.dtype), input, dim, keepdim)


def max(a, b=-1, keepdim: bool = False):
    """``pypto.max``: of two runtime integers; on a tensor, the max along dim ``b``."""
    if isinstance(a, Tensor):
        return amax(a, b, keepdim)
    return sym_max(a, b)


def min(a, b=-1, keepdim: bool = False):
    if isinstance(a, Tensor):
        return amin(a, b, keepdim)
    return sym_min(a, b)


# --- casts -------------------------------------------------------------------------------
_INT_ROUNDING = {
    CastMode.CAST_NONE: lambda x: torch.round(x),  # round half to even, as CAST_RINT
    CastMode.CAST_RINT: lambda x: torch.round(x),
    CastMode.CAST_ROUND: lambda x: torch.sign(x) * torch.floor(torch.abs(x) + 0.5),
    CastMode.CAST_FLOOR: torch.floor,
    CastMode.CAST_CEIL: torch.ceil,
    CastMode.CAST_TRUNC: torch.trunc,
    CastMode.CAST_ODD: lambda x: torch.round(x),
}


def _float_to_float(x: torch.Tensor, target: torch.dtype, mode: CastMode) -> torch.Tensor:
    """Narrow a float tensor with a directed rounding mode (NONE/RINT: nearest-even)."""
    nearest = x.to(target)
    exact = target == x.dtype or torch.finfo(target).bits > torch.finfo(x.dtype).bits  # fp16 <-> bf16 is not
    if mode in (CastMode.CAST_NONE, CastMode.CAST_RINT) or exact:
        return nearest
    wide = x.to(torch.float64)
    back = nearest.to(torch.float64)
    up = torch.nextafter(nearest, torch.full_like(nearest, float("inf")))
    down = torch.nextafter(nearest, torch.full_like(nearest, float("-inf")))
    if mode == CastMode.CAST_FLOOR:
        return torch.where(back > wide, down, nearest)
    if mode == CastMode.CAST_CEIL:
        return torch.where(back < wide, up, nearest)
    if mode == CastMode.CAST_TRUNC:
        toward_zero = torch.where(wide > 0, torch.where(back > wide, down, nearest),
                                  torch.where(back < wide, up, nearest))
        return toward_zero
    if mode == CastMode.CAST_ROUND:  # nearest, ties away from zero
        tie_other = torch.where(back > wide, down, up)
        is_tie = (tie_other.to(torch.float64) - wide).abs() == (back - wide).abs()
        away = torch.where(tie_other.to(torch.float64).abs() > back.abs(), tie_other, nearest)
        return torch.where(is_tie, away, nearest)
    # CAST_ODD: an inexact result takes the truncated neighbour whose last mantissa bit is 1
    truncated = _float_to_float(x, target, CastMode.CAST_TRUNC)
    inexact = truncated.to(torch.float64) != wide
    bits = truncated.view(torch.int16 if torch.finfo(target).bits == 16 else torch.int32)
    even = (bits & 1) == 0
    return torch.where(inexact & even, _next_away(truncated), truncated)


def _next_away(t: torch.Tensor) -> torch.Tensor:
    direction = torch.where(torch.signbit(t), torch.full_like(t, float("-inf")), torch.full_like(t, float("inf")))
    return torch.nextafter(t, direction)


def cast(input: Tensor, dtype: DataType, mode: CastMode = CastMode.CAST_NONE,
         satmode: SaturationMode = SaturationMode.OFF) -> Tensor:
    """Convert to dtype.  Float->float rounds by ``mode`` (NONE = nearest-even).
    Float->int rounds by ``mode`` (NONE = nearest-even) and always saturates to the
    target range (the device's conversion instructions clamp; NaN -> 0).
    Int->narrower int wraps with ``SaturationMode.OFF`` and clamps with ``ON``."""
    note_operand(input)
    if dtype is input.dtype and mode is CastMode.CAST_NONE and satmode is SaturationMode.OFF:
        return input
    x, target = input.data, dtype.torch
    if target is None:
        violation("C-API-06", f"pypto.cast to {dtype}: the interpreter has no storage type for it")
    if x.is_floating_point() and target.is_floating_point:
        data = _float_to_float(x, target, mode)
    elif x.is_floating_point() and target is not torch.bool:
        info = torch.iinfo(target)
        rounded = _INT_ROUNDING[mode](torch.nan_to_num(x.to(torch.float64), nan=0.0))
        data = rounded.clamp(info.min, info.max).to(target)
    elif target.is_floating_point or target is torch.bool or x.dtype is torch.bool:
        data = x.to(target)
    else:
        info = torch.iinfo(target)
        data = x.to(torch.int64).clamp(info.min, info.max).to(target) if satmode is SaturationMode.ON else x.to(target)
    result = wrap(data, dtype, list(input._shape))
    check_vector_tiles("cast", input, result)
    return result


# --- matmul ------------------------------------------------------------------------------
_MATMUL_OUT = {
    "DT_FP16": ("DT_FP16", "DT_BF16", "DT_FP32"),
    "DT_BF16": ("DT_FP16", "DT_BF16", "DT_FP32"),
    "DT_FP32": ("DT_FP32",),
    "DT_INT8": ("DT_INT32",),
}


def _check_cube(op: str, a: Tensor, b: Tensor, m: int, k: int, n: int) -> None:
    cube = runtime.current().cube_tile
    if cube is None:
        violation("C-TILE-06", f"pypto.{op} before any pypto.set_cube_tile_shapes")
        return
    (m0, m1), (k0, k1), (n0, n1), _ = cube
    prof, nbytes = platform.profile, a.dtype.nbytes
    needs = {"L0A": (m0 * k0 * nbytes, prof.l0a_bytes), "L0B": (k0 * n0 * nbytes, prof.l0b_bytes),
             "L0C": (m0 * n0 * 4, prof.l0c_bytes), "L1": ((m1 * k1 + k1 * n1) * nbytes, prof.l1_bytes)}
    for buffer, (need, have) in needs.items():
        if need > have:
            violation("C-TILE-05", f"pypto.{op}: cube tile m{[m0, m1]} k{[k0, k1]} n{[n0, n1]} with {a.dtype} needs "
                                   f"{need} B of {buffer} > {have} B")


def _matmul_operands(op: str, input: Tensor, mat2: Tensor, out_dtype: DataType, a_trans: bool, b_trans: bool):
    note_operand(input)
    note_operand(mat2)
    allowed = _MATMUL_OUT.get(input.dtype.name, ())
    if input.dtype is not mat2.dtype or out_dtype.name not in allowed:
        violation("C-API-02", f"pypto.{op}: {input.dtype} x {mat2.dtype} -> {out_dtype}; pairs allowed: "
                              f"{ {k: list(v) for k, v in _MATMUL_OUT.items()} } (same dtype on both sides)")
    if input.dim() not in (2, 3) or mat2.dim() not in (2, 3):
        violation("C-API-06", f"pypto.{op}: operands must be 2-D or batched 3-D, got {input.dim()}-D x {mat2.dim()}-D")
    a = input.data.transpose(-1, -2) if a_trans else input.data
    b = mat2.data.transpose(-1, -2) if b_trans else mat2.data
    if a.shape[-1] != b.shape[-2]:
        violation("C-API-06", f"pypto.{op}: inner dims differ: {list(a.shape)} x {list(b.shape)} "
                              f"(a_trans={a_trans}, b_trans={b_trans})")
    _check_cube(op, input, mat2, a.shape[-2], a.shape[-1], b.shape[-1])
    return a, b


def _static_mm_shape(input: Tensor, mat2: Tensor, a_trans: bool, b_trans: bool) -> list:
    sa, sb = list(input._shape), list(mat2._shape)
    m = sa[-1] if a_trans else sa[-2]
    n = sb[-2] if b_trans else sb[-1]
    batch = sa[:-2] if len(sa) > 2 else sb[:-2]
    return batch + [m, n]


def matmul(input: Tensor, mat2: Tensor, out_dtype: DataType, *, a_trans=False, b_trans=False,
           c_matrix_nz=False, extend_params=None) -> Tensor:
    """Cube matmul: fp16/bf16/fp32 accumulate in fp32 and round once to out_dtype;
    int8 x int8 accumulates exactly into int32."""
    a, b = _matmul_operands("matmul", input, mat2, out_dtype, a_trans, b_trans)
    if input.dtype.is_int:
        acc = torch.matmul(a.to(torch.float64), b.to(torch.float64))
    else:
        acc = torch.matmul(a.to(torch.float32), b.to(torch.float32))
    return wrap(acc.to(out_dtype.torch), out_dtype, _static_mm_shape(input, mat2, a_trans, b_trans))


def scaled_mm(mat_a: Tensor, mat_b: Tensor, out_dtype: DataType, scale_a: Tensor, scale_b: Tensor, *,
              a_trans=False, b_trans=False, scale_a_trans=False, scale_b_trans=False, c_matrix_nz=False,
              extend_params=None) -> Tensor:
    """Block-scaled fp8 matmul (MX style): each scale covers K / scale_k consecutive
    elements along K of its row (A) or column (B); products accumulate in fp32."""
    for t in (mat_a, mat_b, scale_a, scale_b):
        note_operand(t)
    if not mat_a.dtype.name.startswith("DT_FP8") or mat_a.dtype is not mat_b.dtype:
        violation("C-API-02", f"pypto.scaled_mm: {mat_a.dtype} x {mat_b.dtype}; needs one fp8 type on both sides")
    a = (mat_a.data.transpose(-1, -2) if a_trans else mat_a.data).to(torch.float32)  # [M, K]
    b = (mat_b.data.transpose(-1, -2) if b_trans else mat_b.data).to(torch.float32)  # [K, N]
    sa = _scale_matrix(scale_a.data, scale_a_trans, for_a=True)  # [M, K/g]
    sb = _scale_matrix(scale_b.data, scale_b_trans, for_a=False)  # [K/g, N]
    k = a.shape[-1]
    if k % sa.shape[-1] or k % sb.shape[-2]:
        violation("C-API-06", f"pypto.scaled_mm: K={k} not divisible by scale blocks {list(sa.shape)}, {list(sb.shape)}")
    a = a * sa.repeat_interleave(k // sa.shape[-1], dim=-1)
    b = b * sb.repeat_interleave(k // sb.shape[-2], dim=-2)
    _check_cube("scaled_mm", mat_a, mat_b, a.shape[-2], k, b.shape[-1])
    out = torch.matmul(a, b).to(out_dtype.torch)
    return wrap(out, out_dtype, _static_mm_shape(mat_a, mat_b, a_trans, b_trans))


def _scale_matrix(scale: torch.Tensor, trans: bool, for_a: bool) -> torch.Tensor:
    """Block scales as [M, K/g] (A) or [K/g, N] (B).  pypto's layout is 3-D: scale_a
    [M, K/64, 2], scale_b [K/64, N, 2] (``*_trans`` swaps the first two axes), the
    K/32 entries each covering 32 consecutive K elements; 2-D scales are taken as
    [M, K/g] / [K/g, N] (transposed with ``*_trans``)."""
    s = scale.to(torch.float32)
    if s.dim() != 3:
        return s.transpose(-1, -2) if trans else s
    if trans:
        s = s.transpose(0, 1)
    if for_a:
        return s.reshape(s.shape[0], -1)
    return s.permute(0, 2, 1).reshape(-1, s.shape[1])


# --- layout ------------------------------------------------------------------------------
def transpose(input: Tensor, dim0: int, dim1: int) -> Tensor:
    note_operand(input)
    shape = list(input._shape)
    shape[dim0], shape[dim1] = shape[dim1], shape[dim0]
    result = wrap(input.data.transpose(dim0, dim1).contiguous(), input.dtype, shape)
    check_vector_tiles("transpose", result)
    return result


def concat(tensors: list, dim: int = 0) -> Tensor:
    first = tensors[0]
    for t in tensors:
        note_operand(t)
        if t.dtype is not first.dtype:
            violation("C-API-01", f"pypto.concat: {first.dtype} with {t.dtype}")
    shape = list(first._shape)
    shape[dim] = math.fsum(value_of(t._shape[dim]) for t in tensors)
    shape[dim] = int(shape[dim])
    result = wrap(torch.cat([t.data for t in tensors], dim), first.dtype, shape)
    check_vector_tiles("concat", result)
    return result


def unsqueeze(input: Tensor, dim: int) -> Tensor:
    shape = list(input._shape)
    shape.insert(dim % (len(shape) + 1), 1)
    return wrap(input.data.unsqueeze(dim), input.dtype, shape)


# --- creation ------------------------------------------------------------------------------
def full(size, fill_value, dtype: DataType, *, valid_shape=None) -> Tensor:
    if isinstance(fill_value, Element) and fill_value.dtype is not dtype:
        violation("C-API-06", f"pypto.full: fill_value is an Element of {fill_value.dtype}, dtype is {dtype}")
    extent = [value_of(v) for v in (valid_shape or size)]
    data = torch.full(extent, _scalar(fill_value), dtype=dtype.torch, device=_default_device())
    return wrap(data, dtype, list(size))


def _sizes(size) -> list:
    return list(size[0]) if len(size) == 1 and isinstance(size[0], (list, tuple)) else list(size)


def zeros(*size, dtype: DataType | None = None) -> Tensor:
    return full(_sizes(size), 0, dtype or DT_FP32)


def ones(*size, dtype: DataType | None = None) -> Tensor:
    return full(_sizes(size), 1, dtype or DT_FP32)


def arange(*args) -> Tensor:
    data = torch.arange(*args, device=_default_device())
    dtype = DT_FP32 if data.is_floating_point() else DT_INT32
    return wrap(data.to(dtype.torch), dtype)


# --- indexing ------------------------------------------------------------------------------
def _check_index(op: str, index: Tensor, bound: int) -> None:
    note_operand(index)
    if index.dtype.name not in ("DT_INT32", "DT_INT64"):
        violation("C-API-06", f"pypto.{op}: index dtype {index.dtype}, needs DT_INT32 or DT_INT64")
    if index.data.numel():
        low, high = int(index.data.min()), int(index.data.max())
        if low < 0 or high >= bound:
            violation("C-API-06", f"pypto.{op}: index values in [{low}, {high}] outside [0, {bound})")


def index_select(input: Tensor, dim: int, index: Tensor) -> Tensor:
    note_operand(input)
    _check_index("index_select", index, input.data.shape[dim])
    data = torch.index_select(input.data, dim, index.data.reshape(-1).long())
    shape = list(input._shape)
    shape[dim] = index.data.numel()
    return wrap(data, input.dtype, shape)


def gather(input: Tensor, dim: int, index: Tensor) -> Tensor:
    note_operand(input)
    _check_index("gather", index, input.data.shape[dim])
    return wrap(torch.gather(input.data, dim, index.data.long()), input.dtype, list(index._shape))


def scatter_update(input: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    """Rows of input along ``dim`` (default -2) at ``index`` replaced by rows of src;
    returns the updated tensor.  No broadcast: src holds one row per index."""
    note_operand(input)
    note_operand(src)
    if dim not in (-2, input.dim() - 2):
        violation("C-API-06", f"pypto.scatter_update: dim {dim}; only the row axis (-2) is supported")
    row = input.data.shape[-1]
    rows = input.data.reshape(-1, row).clone()
    _check_index("scatter_update", index, rows.shape[0])
    if src.data.numel() != index.data.numel() * row:
        violation("C-API-06", f"pypto.scatter_update: src {list(src.data.shape)} must hold one row of {row} per "
                              f"index ({index.data.numel()} indices); no broadcast")
    if src.dtype is not input.dtype:
        violation("C-API-01", f"pypto.scatter_update: src {src.dtype} into {input.dtype}")
    rows[index.data.reshape(-1).long()] = src.data.reshape(-1, row)
    return wrap(rows.reshape(input.data.shape), input.dtype, list(input._shape))


def from_torch(tensor: torch.Tensor, name: str = "", dynamic_axis=None, tensor_format=None, dtype=None) -> Tensor:
    return Tensor(list(tensor.shape), dtype or dtypes.from_torch(tensor.dtype), name, _data=tensor)


def softmax(input: Tensor, dim: int) -> Tensor:
    return _unary("softmax", lambda d: torch.softmax(d, dim), input)
