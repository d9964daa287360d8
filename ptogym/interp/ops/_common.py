"""What every op family shares: the ``Element`` scalar, operand handling (scalars,
broadcasting, binary/unary application) and the vector-tile checks (C-LOOP-01,
C-TILE-03/06/08, advice A-TILE-02) each op runs over its operands and result."""
from __future__ import annotations

import builtins
import math

import torch

from .. import runtime
from ..checks import advise, violation
from ..dtypes import DataType
from ..platform import platform
from ..symbolic import SymbolicScalar, value_of
from ..tensor import Tensor, note_operand, wrap


class Element:
    """``pypto.Element(dtype, value)``: a scalar with an explicit dtype."""

    def __init__(self, dtype: DataType, data):
        self.dtype, self.data = dtype, data

    @property
    def value(self):
        """The scalar, as pypto's ``Element.value``."""
        return self.data

    def __repr__(self) -> str:
        return f"Element({self.dtype}, {self.data})"


# --- tile checks ---------------------------------------------------------------------
_checked: set = set()  # (tile, profile, operand signature) already proven valid


def _static(t: Tensor) -> tuple:
    """The static shape's concrete values (hot: every op's checks start here, so the
    all-int shape takes a loop without a generator)."""
    shape = t._shape
    for d in shape:
        if type(d) is not int:
            return tuple(d if type(d) is int else value_of(d) for d in shape)
    return tuple(shape)


def check_dynamic_outside_loop(op: str, *tensors: Tensor) -> None:
    """C-LOOP-01: pypto cannot build a whole-tensor op over a dynamic dim outside a loop."""
    if runtime.current().loop_depth == 0 and runtime.in_kernel():
        for t in tensors:
            dynamic = [d for d in t._shape if isinstance(d, SymbolicScalar)]
            if dynamic:
                violation("C-LOOP-01", f"pypto.{op} on {t.name or 'tensor'} {t._shape} with dynamic dim "
                                       f"{dynamic[0].expr} outside any pypto.loop")


def effective_vec_tile(tile, shape) -> list:
    """The tile pypto cuts a tensor of ``shape`` into: tile axis i applies to tensor axis i
    (a higher-rank tile's trailing entries are unused: pypto's tiling loops index
    ``vecTile[cur]`` for each tensor axis ``cur``), clamped to the tensor's extent."""
    return [builtins.min(a, value_of(b)) for a, b in zip(tile[:len(shape)], shape)]


def require_vec_tile(op: str) -> None:
    """C-TILE-06: a vector op before any ``set_vec_tile_shapes`` (pypto rejects it; the
    indexing ops only in a later pass, as "Errcode: FFFFFF! Run pass failed")."""
    if runtime.current().vec_tile is None:
        violation("C-TILE-06", f"pypto.{op} before any pypto.set_vec_tile_shapes")


def check_vector_tiles(op: str, *tensors: Tensor) -> None:
    """C-LOOP-01 and C-TILE-06/08/02/03 for one vector op over its operands and result."""
    _check_tiles(op, tensors, [_static(t) for t in tensors])


def _largest(sizes) -> int:
    return max(sizes[:-1] or sizes)


# The UB a vector op's lowering holds beside its operands and result, from the tiles' bytes (the
# result last): measured through real pypto 0.2.0 as the largest [rows, 512] and [rows, 1024] fp32
# tile each op compiles (probes scratch_*; 2026-12-04).  Where the data leave a range the smaller
# end is taken, so the check never refuses what pypto compiles: one 32-byte block for an op that
# fails at exactly UB ("just over"), two tiles for log1p (39 of 48 rows at 512: ~2.4).
_JUST_OVER = 32
SCRATCH = {
    "rsqrt": _largest, "reciprocal": _largest, "sigmoid": _largest, "tril": _largest, "log1p": _largest,
    "fmod": _largest, "copysign": _largest,
    "sin": lambda sizes: 2 * _largest(sizes), "cos": lambda sizes: 2 * _largest(sizes),
    "round": lambda sizes: _largest(sizes) + _JUST_OVER, "exp2": lambda sizes: _largest(sizes) + _JUST_OVER,
    "sign": lambda sizes: _JUST_OVER, "expm1": lambda sizes: _JUST_OVER, "hypot": lambda sizes: _JUST_OVER,
    # tensor ** tensor: two tiles more; where: its result in a buffer of its own and one more condition tile
    "pow": lambda sizes: 2 * _largest(sizes) if len(sizes) == 3 else 0,
    "prod": lambda sizes: sizes[0] + _JUST_OVER, "cumsum": lambda sizes: 2 * _largest(sizes),
    "where": lambda sizes: (sizes[-1] if sizes[-1] <= _largest(sizes) else 0) + sizes[0] if len(sizes) == 4 else 0,
}


def _check_tiles(op: str, tensors, shapes) -> None:
    """``check_vector_tiles`` with the tensors' static shapes (``_static``) given."""
    run = runtime.current()
    if run.loop_depth == 0:  # (hot: inside loops there is nothing to check)
        check_dynamic_outside_loop(op, *tensors)
    tile = run.vec_tile
    signature = (op, tile, platform.profile, *zip(shapes, [t.dtype for t in tensors]))
    if signature in _checked:
        return
    if tile is None:
        require_vec_tile(op)
        return
    sizes, valid = [], True
    for t in tensors:
        shape = _static(t)
        if len(tile) < len(shape):
            valid = False
            violation("C-TILE-08", f"pypto.{op}: vec tile {list(tile)} (rank {len(tile)}) on {t.name or 'tensor'} "
                                   f"{list(shape)} (rank {len(shape)}); set a tile of rank >= {len(shape)}")
            continue
        own = tile[:len(shape)]
        nbytes = t.dtype.nbytes
        if own[-1] * nbytes % platform.profile.ub_block_bytes:
            valid = False  # re-checked at every call: advice is per site
            advise("A-TILE-02", f"pypto.{op}: tile last dim {own[-1]} x {nbytes} B ({t.dtype}) = {own[-1] * nbytes} B "
                                f"is not a multiple of {platform.profile.ub_block_bytes} B (tile {list(tile)}, "
                                f"tensor {list(shape)})")
        sizes.append(math.prod(effective_vec_tile(tile, shape)) * nbytes)
    if len(sizes) == 3 and len(shapes[-1]) and shapes[-1][-1] > 1:
        # an operand broadcast along the last axis ([rows, 1]) takes a full tile of the result's
        # (probes broadcast_last_axis_*: sub of [48, 512] and [48, 1] fp32 compiles, 49 rows do not)
        full = math.prod(effective_vec_tile(tile, shapes[-1]))
        for i in (0, 1):
            if len(shapes[i]) == len(shapes[-1]) and shapes[i][-1] == 1:
                sizes[i] = builtins.max(sizes[i], full * tensors[i].dtype.nbytes)
    # the result (last) reuses an operand's buffer when it is no larger (measured: exp of two 98 KB tiles
    # compiles in 192 KB, probe tile_ub_one_row_over; add of three 128 KB tiles does not, tile_ub_overflow)
    total = sum(sizes) - (sizes[-1] if len(sizes) > 1 and sizes[-1] <= max(sizes[:-1]) else 0)
    scratch = SCRATCH[op](sizes) if op in SCRATCH else 0
    if total + scratch > platform.profile.ub_bytes:
        valid = False
        extra = f" and {scratch} B of the op's own scratch: {total + scratch} B" if scratch else ""
        violation("C-TILE-03", f"pypto.{op}: tiles of {len(tensors)} operand(s) need {total} B of UB (the result "
                               f"in an operand's buffer){extra} > "
                               f"{platform.profile.ub_bytes} B on {platform.profile.npuarch} (vec tile {list(tile)}, "
                               f"shapes {[list(_static(t)) for t in tensors]})")
    if valid:  # a violation let through by lenient(), or advice, must be reported at the next site too
        _checked.add(signature)


# --- operand dtypes pypto refuses --------------------------------------------------------
_INTS = ("DT_INT8", "DT_INT16", "DT_INT32", "DT_INT64", "DT_UINT8")
_NARROW = ("DT_INT8", "DT_INT64", "DT_UINT8", "DT_BOOL")
# Per op, the input dtypes real pypto 0.2.0 refuses: while it builds the graph (FC0001 "The
# datatype is not supported") or when it compiles (the op's verifier: EXPOpError, SQRTOpError...).
# Recorded for every op form and dtype by scripts/record_result_dtypes.py (both modes); the
# key "<op>/scalar" is the op with a Python number as its second operand.
REFUSED_INPUT_DTYPES = {
    # refused while building the graph
    "exp2": _NARROW, "expm1": _NARROW, "log": (*_INTS, "DT_BOOL"), "log1p": (*_INTS, "DT_BOOL"),
    "log2": (*_INTS, "DT_BOOL"), "log10": (*_INTS, "DT_BOOL"), "logical_not": ("DT_INT16", "DT_INT32", "DT_INT64"),
    "isfinite": ("DT_BOOL",), "bitwise_left_shift": ("DT_INT64",), "bitwise_right_shift": ("DT_INT64",),
    "gcd": ("DT_INT64",), "maximum/scalar": _NARROW, "minimum/scalar": _NARROW, "cumsum": ("DT_INT64", "DT_UINT8"),
    "tril": ("DT_INT64", "DT_UINT8", "DT_BOOL"), "triu": ("DT_INT64", "DT_UINT8", "DT_BOOL"),
    "concat": ("DT_INT64", "DT_UINT8", "DT_BOOL"), "var": (*_INTS, "DT_BOOL"), "clip": _NARROW, "gather": _NARROW,
    # refused by the op's verifier when compiling
    "exp": (*_INTS, "DT_BOOL"), "sqrt": (*_INTS, "DT_BOOL"), "reciprocal": (*_INTS, "DT_BOOL"),
    "round": ("DT_INT16", "DT_INT32"), "abs": ("DT_BOOL",), "neg": ("DT_BOOL",), "relu": ("DT_BOOL",),
    "sub": ("DT_BOOL",), "div": ("DT_BOOL",), "fmod": ("DT_BOOL",), "remainder": ("DT_BOOL",),
    "add/scalar": ("DT_BOOL",), "mul/scalar": ("DT_BOOL",), "hypot": (*_INTS, "DT_BOOL"), "lrelu": (*_INTS, "DT_BOOL"),
    "copysign": ("DT_INT8", "DT_INT64", "DT_UINT8", "DT_BOOL"), "bitwise_and/scalar": ("DT_BOOL",),
    "bitwise_or/scalar": ("DT_BOOL",), "bitwise_xor/scalar": ("DT_BOOL",),
}


def refuse_input_dtype(op: str, t: Tensor, scalar_operand: bool = False) -> None:
    """C-API-07 where pypto refuses ``t``'s dtype as the input of ``op`` (with a scalar operand:
    also the ``op/scalar`` entry)."""
    refused = REFUSED_INPUT_DTYPES.get(op, ()) + (REFUSED_INPUT_DTYPES.get(f"{op}/scalar", ()) if scalar_operand else ())
    if t.dtype.name in refused:
        violation("C-API-07", f"pypto.{op} on {t.dtype} {list(_static(t))}: pypto 0.2.0 refuses this input dtype; "
                              f"cast it first")


# --- operand handling ----------------------------------------------------------------
def _scalar(x):
    if isinstance(x, Element):
        return x.data
    if isinstance(x, SymbolicScalar):
        return x.value
    return x


def _broadcast(op: str, a: Tensor, b: Tensor):
    """Operands with equal rank (a lower-rank one gains leading 1-dims, numpy style, as
    in pypto), their data trimmed to the common valid extent, and the result shape.
    (The result's own valid extent is the first operand's: see :func:`_first_operand_extent`.)"""
    a, b = _leading_ones(a, b.dim()), _leading_ones(b, a.dim())
    sa, sb = _static(a), _static(b)
    shape = _broadcast_shape(op, sa, sb)
    da, db = a.data, b.data
    checked = (sa, sb) in _broadcast_shapes  # else a violation let through by lenient(): trim as for a tail
    if da.shape != db.shape and (not checked or da.shape != sa or db.shape != sb):  # trim to the valid extent
        # per axis, the valid extent both share: a broadcast (static 1) axis with no valid data
        # leaves nothing valid on that axis
        common = [0 if 0 in (x, y) else builtins.min(x, y) if (p != 1 and q != 1) else builtins.max(x, y)
                  for x, y, p, q in zip(da.shape, db.shape, sa, sb)]
        da = da[tuple(slice(0, c if p != 1 else builtins.min(c, 1)) for c, p in zip(common, sa))]
        db = db[tuple(slice(0, c if q != 1 else builtins.min(c, 1)) for c, q in zip(common, sb))]
    return da, db, list(shape)


_broadcast_shapes: dict = {}  # (static shape, static shape) -> result shape, for pairs that passed the checks


def _broadcast_shape(op: str, sa: tuple, sb: tuple) -> tuple:
    """The broadcast result shape of two equal-rank static shapes (C-API-03 checked;
    hot, so a pair is remembered once it passed without a violation)."""
    known = _broadcast_shapes.get((sa, sb))
    if known is not None:
        return known
    valid = True
    for x, y in zip(sa, sb):
        if x != y and x != 1 and y != 1:
            valid = False
            violation("C-API-03", f"pypto.{op}: shapes {list(sa)} and {list(sb)} do not broadcast")
    for mine, theirs in ((sa, sb), (sb, sa)):
        expanded = [axis for axis, (x, y) in enumerate(zip(mine, theirs)) if x == 1 and y > 1]
        if len(expanded) > 1:  # measured: [1, 1] against [4, 32] is refused (FC0000)
            valid = False
            violation("C-API-03", f"pypto.{op}: shapes {list(sa)} and {list(sb)}: {list(mine)} would expand on "
                                  f"axes {expanded}; pypto expands one axis of an operand per op")
    shape = tuple(builtins.max(x, y) if builtins.min(x, y) == 1 else x for x, y in zip(sa, sb))
    if valid:  # under lenient() a violation only warns: it must warn again at the next site
        _broadcast_shapes[(sa, sb)] = shape
    return shape


def _first_operand_extent(first: Tensor, second: Tensor, computed) -> list:
    """The valid extent of a binary op's result.  Measured on pypto 0.2.0: it is the
    first operand's valid extent (``add(full_tile, tail_tile)`` writes the whole tile,
    ``add(tail_tile, full_tile)`` only the tail), except along an axis the first
    operand broadcasts (static 1), which takes the other operand's."""
    rank = len(computed)
    extent = [1] * (rank - first.data.dim()) + list(first.data.shape)
    static = [1] * (rank - first.dim()) + list(_static(first))
    return [c if p == 1 else e for c, e, p in zip(computed, extent, static)]


def pad_undefined(op: str, data, extent):
    """``data`` grown to ``extent``: the added elements come from an operand's padding,
    which on a device holds whatever the buffer held.  Floats carry them as NaN, so any
    use shows; integers their type's minimum and bools False, with advice (A-VALID-01),
    since no value of theirs stands out."""
    if list(data.shape) == list(extent):
        return data
    if data.is_floating_point():
        fill = float("nan")
    else:
        advise("A-VALID-01", f"pypto.{op}: result valid extent {list(extent)} (its first operand's) exceeds the "
                             f"operands' common valid data {list(data.shape)}; the rest is undefined on a device "
                             f"(here {data.dtype} minimum)")
        fill = False if data.dtype == torch.bool else torch.iinfo(data.dtype).min
    grown = data.new_full(extent, fill)
    grown[tuple(slice(0, n) for n in data.shape)] = data
    return grown


def _leading_ones(t: Tensor, rank: int) -> Tensor:
    extra = rank - t.dim()
    if extra <= 0:
        return t
    return wrap(t.data.reshape([1] * extra + list(t.data.shape)), t.dtype, [1] * extra + list(t._shape))


_FP32_MAX = 3.4028234663852886e38


def fp32_scalar(value: float) -> float:
    """A Python float as pypto takes it into fp32: clamped to +-FP32_MAX (infinities too; NaN
    stays NaN), measured for scalar operands and ``pypto.full`` (probes ``full_fp32_*``)."""
    return builtins.max(-_FP32_MAX, builtins.min(_FP32_MAX, value)) if value == value else value


def _binary(op: str, fn, input, other, *, result_dtype=None, mixed=None):
    """``fn`` over two operands (tensor-tensor with broadcasting, or tensor-scalar).  Operands of
    two dtypes are refused (C-API-01) unless pypto computes them: ``mixed(input_dtype,
    other_dtype)`` gives the result dtype of those it computes (None: refused; ``result_dtype``
    where it is fixed), and the
    values are torch's on the promoted operands, converted to it (as pypto's CPU run does,
    recorded: fixtures/result_dtypes_compiled_pypto.json)."""
    if not isinstance(input, Tensor):  # pypto builds Element(input.dtype, ...) from the first operand
        violation("C-API-06", f"pypto.{op}({input!r}, ...): the first operand must be a Tensor (pypto refuses a "
                              f"scalar first operand; write the tensor first or use its operator)")
        input, other = other, input
        fn_ = fn
        fn = lambda x, y: fn_(y, x)  # noqa: E731 - keep operand order for scalar-first calls
    note_operand(input)
    refuse_input_dtype(op, input, scalar_operand=not isinstance(other, Tensor))
    if isinstance(other, Tensor):
        note_operand(other)
        out_dtype = result_dtype or input.dtype
        if other.dtype is not input.dtype:
            computed = mixed and mixed(input.dtype, other.dtype)
            if computed is None:
                violation("C-API-01", f"pypto.{op}: {input.dtype} {list(_static(input))} with {other.dtype} "
                                      f"{list(_static(other))}; cast one side first")
            else:
                out_dtype = result_dtype or computed
        sa, sb, da, db = _static(input), _static(other), input.data, other.data
        shape = _broadcast_shapes.get((sa, sb))
        if shape is not None and da.shape == sa and db.shape == sb:
            # (hot) full tiles of a checked pair: no trimming, and the result's extent is its shape
            result = wrap(fn(da, db), out_dtype, list(shape))
            _check_tiles(op, (input, other, result), (sa, sb, shape))
        else:
            a, b, shape = _broadcast(op, input, other)
            data = fn(a, b)
            result = wrap(pad_undefined(op, data, _first_operand_extent(input, other, data.shape)), out_dtype, shape)
            check_vector_tiles(op, input, other, result)
    else:
        if isinstance(other, Element):  # pypto wraps the operand in an Element itself, and refuses one
            violation("C-API-06", f"pypto.{op}: {other!r} as the scalar operand; pass a Python number")
        scalar = _scalar(other)
        if input.dtype.name == "DT_FP32" and isinstance(scalar, float):  # pypto clamps it (measured)
            scalar = fp32_scalar(scalar)
        if isinstance(scalar, float) and input.dtype.is_int and not (result_dtype or input.dtype).is_float:
            scalar = int(scalar)  # into the integer tensor's dtype first (recorded: x * 2.5 = x * 2, x < 2.5 = x < 2)
        result = wrap(fn(input.data, scalar), result_dtype or input.dtype, list(input._shape))
        check_vector_tiles(op, input, result)
    if result.data.dtype != result.dtype.torch:
        result.data = result.data.to(result.dtype.torch)
    return result


def integer_division(op: str, fn):
    """``fn(a, b)`` of an integer division; where an integer divisor is zero, the dtype's
    minimum, with advice (A-DIV-01), instead of torch's ZeroDivisionError."""
    def divide(a, b):
        if a.is_floating_point() or (isinstance(b, torch.Tensor) and b.is_floating_point()):
            return fn(a, b)
        zero = torch.as_tensor(b) == 0
        if not bool(zero.any()):
            return fn(a, b)
        advise("A-DIV-01", f"pypto.{op}: {int(zero.sum())} integer divisor element(s) are zero")
        result = fn(a, torch.where(zero, torch.ones_like(torch.as_tensor(b)), b))
        low = False if result.dtype == torch.bool else torch.iinfo(result.dtype).min
        return torch.where(zero, torch.full_like(result, low), result)
    return divide


def _unary(op: str, fn, input: Tensor, result_dtype=None) -> Tensor:
    note_operand(input)
    refuse_input_dtype(op, input)
    dtype = result_dtype or input.dtype
    data = fn(input.data)
    result = wrap(data if data.dtype == dtype.torch else data.to(dtype.torch), dtype, list(input._shape))
    check_vector_tiles(op, input, result)
    return result
