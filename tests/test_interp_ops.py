"""Conformance of every ptogym.interp compute op against a torch reference.

Each op runs inside a tiny jit kernel (see interp_helpers.run_op) on [8, 64] tiles
with a (8, 64) vector tile.  Elementwise ops in one dtype must be bit-identical to
torch doing the same op in that dtype (so bf16/fp16 round at every op); reductions
and matmuls, whose accumulation order legitimately differs, are held to a tight
bound against an fp64 reference; casts are checked bit-exactly against independent
rounding references (interp_helpers.round_float_ref / round_int_ref).
"""
import math

import pytest
import torch

import ptogym.interp as pypto
from ptogym.interp import ConstraintViolation
from ptogym.interp.platform import PROFILES, platform as interp_platform
from interp_helpers import assert_same, round_float_ref, round_int_ref, run_op, ulp_distance

FLOATS = [torch.bfloat16, torch.float16, torch.float32]
SHAPE = (8, 64)


def rand(dtype, shape=SHAPE, seed=0, low=-4.0, high=4.0):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return (torch.rand(shape, generator=g, dtype=torch.float64) * (high - low) + low).to(dtype)
    return torch.randint(int(low), int(high) + 1, shape, generator=g, dtype=torch.int64).to(dtype)


def nonzero(t):
    return torch.where(t == 0, torch.ones_like(t), t)


# --- binary elementwise ---------------------------------------------------------------------
BINARY = {
    "add": (pypto.add, torch.add),
    "sub": (pypto.sub, torch.sub),
    "mul": (pypto.mul, torch.mul),
    "div": (pypto.div, torch.div),
    "pow": (pypto.pow, torch.pow),
    "maximum": (pypto.maximum, torch.maximum),
    "minimum": (pypto.minimum, torch.minimum),
    "fmod": (pypto.fmod, torch.fmod),
    "remainder": (pypto.remainder, torch.remainder),
}
INT_BINARY = ["add", "sub", "mul", "maximum", "minimum", "fmod", "remainder"]


def test_op_results_carry_what_a_constructed_tensor_does():
    """``wrap`` builds op results without Tensor's constructor (hot): every slot must
    still hold what the constructor would set."""
    from ptogym.interp.tensor import Tensor, wrap

    data = torch.zeros(2, 3)
    built, wrapped = Tensor([2, 3], pypto.DT_FP32, _data=data), wrap(data, pypto.DT_FP32, [2, 3])
    assert wrapped.data is built.data
    for slot in set(Tensor.__slots__) - {"__weakref__", "data"}:
        assert getattr(wrapped, slot) == getattr(built, slot), slot


@pytest.mark.parametrize("name,dtype", [(n, d) for n in BINARY for d in FLOATS] +
                         [(n, torch.int32) for n in INT_BINARY], ids=str)
def test_binary_tensor_tensor(name, dtype):
    op, ref_op = BINARY[name]
    a = rand(dtype, seed=1)
    b = rand(dtype, seed=2, low=0.25 if name == "pow" else -4)
    if name in ("fmod", "remainder", "div"):
        b = nonzero(b)
    if name == "pow":
        a = a.abs() + 0.5 if dtype.is_floating_point else a
    got = run_op(op, [a, b], ref_op(a, b))
    assert_same(got, ref_op(a, b))
    assert got.dtype == dtype


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("name", list(BINARY))
def test_binary_tensor_scalar(name, dtype):
    op, ref_op = BINARY[name]
    a = rand(dtype, seed=3)
    if name == "pow":
        a = a.abs() + 0.5
    scalar = 1.75
    ref = ref_op(a, torch.tensor(scalar, dtype=dtype) if name in ("maximum", "minimum") else scalar)
    if name == "pow":  # pypto: a fractional exponent is exp(y * ln x) in fp32 (measured; torch.pow is 1 ulp off)
        ref = torch.exp(scalar * torch.log(a.float())).to(dtype)
    assert_same(run_op(lambda x: op(x, scalar), [a], ref), ref)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("other_shape", [(1, 64), (8, 1)])  # pypto refuses [1, 1]: two axes (C-API-03)
def test_binary_broadcast(dtype, other_shape):
    a, b = rand(dtype, seed=4), rand(dtype, other_shape, seed=5)
    for op, ref_op in (BINARY["add"], BINARY["mul"], BINARY["maximum"]):
        assert_same(run_op(op, [a, b], ref_op(a, b)), ref_op(a, b))
        assert_same(run_op(op, [b, a], ref_op(b, a)), ref_op(b, a))


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_operators_methods_alpha_and_element(dtype):
    a, b = rand(dtype, seed=6), nonzero(rand(dtype, seed=7))
    cases = [
        (lambda x, y: x + y, a + b), (lambda x, y: x - y, a - b), (lambda x, y: x * y, a * b),
        (lambda x, y: x / y, a / b), (lambda x, y: 2.0 - x, 2.0 - a), (lambda x, y: 3.0 * x, 3.0 * a),
        (lambda x, y: 1.5 + x, 1.5 + a), (lambda x, y: -x, -a),
        (lambda x, y: x.add(y), a + b), (lambda x, y: x.sub(y).mul(y), (a - b) * b),
        (lambda x, y: pypto.add(x, y, alpha=2), torch.add(a, b, alpha=2)),
        (lambda x, y: pypto.sub(x, y, alpha=0.5), torch.sub(a, b, alpha=0.5)),
        (lambda x, y: pypto.mul(x, 2.5), a * 2.5),  # an Element operand is refused (C-API-06)
    ]
    for fn, ref in cases:
        assert_same(run_op(fn, [a, b], ref), ref)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_low_precision_rounds_at_every_op(dtype):
    """A chain of ops in bf16/fp16 equals torch doing each op in that dtype, which
    differs from computing the chain in fp32 and rounding once."""
    a, b, c = rand(dtype, seed=8), rand(dtype, seed=9), rand(dtype, seed=10)

    def chain(x, y, z):
        return pypto.sub(pypto.mul(pypto.add(x, y), z), pypto.exp(pypto.div(x, 3.0)))

    ref = (a + b) * c - torch.exp(a / 3.0)
    got = run_op(chain, [a, b, c], ref)
    assert_same(got, ref)
    once = ((a.float() + b.float()) * c.float() - torch.exp(a.float() / 3.0)).to(dtype)
    assert not torch.equal(got, once)


# --- comparisons and where ---------------------------------------------------------------------
COMPARE = {"eq": (pypto.eq, torch.eq), "ne": (pypto.ne, torch.ne), "lt": (pypto.lt, torch.lt),
           "le": (pypto.le, torch.le), "gt": (pypto.gt, torch.gt), "ge": (pypto.ge, torch.ge)}


@pytest.mark.parametrize("dtype", FLOATS + [torch.int32], ids=str)
@pytest.mark.parametrize("name", list(COMPARE))
def test_compare(name, dtype):
    op, ref_op = COMPARE[name]
    a = rand(torch.int32, seed=11).to(dtype)  # small integers: plenty of equal pairs
    b = rand(torch.int32, seed=12).to(dtype)
    ref = ref_op(a, b)
    assert ref.any() and not ref.all()
    got = run_op(op, [a, b], ref)
    assert_same(got, ref)
    assert_same(run_op(lambda x: op(x, 1.0), [a], ref_op(a, 1.0)), ref_op(a, 1.0))
    with pytest.raises(ConstraintViolation, match="not a Python int"):  # pypto: TypeError (result_dtypes fixture)
        run_op(lambda x: op(x, 1), [a], ref_op(a, 1))


def test_compare_operators_and_greater():
    a, b = rand(torch.float32, seed=13), rand(torch.float32, seed=14)
    for fn, ref in [(lambda x, y: x < y, a < b), (lambda x, y: x <= y, a <= b), (lambda x, y: x > y, a > b),
                    (lambda x, y: x >= y, a >= b), (lambda x, y: pypto.greater(x, y), a > b),
                    (lambda x, y: x.greater(y), a > b)]:
        assert_same(run_op(fn, [a, b], ref), ref)


@pytest.mark.parametrize("dtype", FLOATS + [torch.int32], ids=str)
def test_where(dtype):
    a, b = rand(dtype, seed=15), rand(dtype, seed=16)
    cond = rand(torch.float32, seed=17) > 0
    for fn, ref in [(lambda c, x, y: pypto.where(c, x, y), torch.where(cond, a, b)),
                    (lambda c, x, y: pypto.where(c, x, 2), torch.where(cond, a, torch.tensor(2, dtype=dtype))),
                    (lambda c, x, y: pypto.where(c, 3, y), torch.where(cond, torch.tensor(3, dtype=dtype), b)),
                    (lambda c, x, y: x.where(c, y), torch.where(cond, a, b))]:
        assert_same(run_op(fn, [cond, a, b], ref), ref)


def test_where_of_two_scalars_is_fp32_over_the_condition():
    """pypto makes each Python number an Element of DT_FP32 (pypto/op/other.py), so the result
    is fp32 shaped like the condition (its upstream test test_verify_where relies on it)."""
    cond = rand(torch.float32, seed=18) > 0
    ref = torch.where(cond, torch.tensor(1.0), torch.tensor(0.0))
    assert_same(run_op(lambda c: pypto.where(c, 1.0, 0.0), [cond], ref), ref)


# --- unary -------------------------------------------------------------------------------------
UNARY = {
    "exp": (pypto.exp, torch.exp, None), "exp2": (pypto.exp2, torch.exp2, None),
    "expm1": (pypto.expm1, torch.expm1, None), "log": (pypto.log, torch.log, "pos"),
    "log2": (pypto.log2, torch.log2, "pos"), "log10": (pypto.log10, torch.log10, "pos"),
    "log1p": (pypto.log1p, torch.log1p, "pos"), "sqrt": (pypto.sqrt, torch.sqrt, "pos"),
    "rsqrt": (pypto.rsqrt, torch.rsqrt, "pos"), "reciprocal": (pypto.reciprocal, torch.reciprocal, None),
    "abs": (pypto.abs, torch.abs, None), "neg": (pypto.neg, torch.neg, None),
    "relu": (pypto.relu, torch.relu, None), "sigmoid": (pypto.sigmoid, torch.sigmoid, None),
    "sin": (pypto.sin, torch.sin, None), "cos": (pypto.cos, torch.cos, None),
    "ceil": (pypto.ceil, torch.ceil, None), "floor": (pypto.floor, torch.floor, None),
    "trunc": (pypto.trunc, torch.trunc, None), "sign": (pypto.sign, torch.sign, None),
    "round": (pypto.round, torch.round, "halves"), "clone": (pypto.clone, torch.clone, None),
}


PYPTO_COMPOSED = {"log2", "log10", "log1p", "rsqrt", "sigmoid"}


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("name", list(UNARY))
def test_unary(name, dtype):
    op, ref_op, domain = UNARY[name]
    x = rand(dtype, seed=18)
    if domain == "pos":
        x = x.abs() + 0.125
    elif domain == "halves":  # exact .5 ties: round half to even
        x = (torch.arange(512, dtype=torch.float32).reshape(SHAPE) / 2 - 128).to(dtype)
    ref = ref_op(x)
    got = run_op(op, [x], ref)
    if name in PYPTO_COMPOSED and dtype == torch.float32:
        # pypto composes these (1/sqrt, ln/ln2, ...): bitwise against real pypto in tests/conformance,
        # within 2 ulp of torch's own here
        assert ulp_distance(got, ref).max() <= 2
        return
    assert_same(got, ref)
    method = getattr(x.__class__, name, None) and getattr(pypto.Tensor, name, None)
    if method is not None:
        assert_same(run_op(lambda t: method(t), [x], ref), ref)


@pytest.mark.parametrize("dtype", [torch.int32], ids=str)
@pytest.mark.parametrize("name", ["abs", "neg", "sign", "clone"])
def test_unary_int(name, dtype):
    op, ref_op, _ = UNARY[name]
    x = rand(dtype, seed=19)
    assert_same(run_op(op, [x], ref_op(x)), ref_op(x))


def test_logical_not():
    x = rand(torch.float32, seed=20) > 0
    assert_same(run_op(pypto.logical_not, [x], ~x), ~x)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_round_decimals_clip_softmax(dtype):
    x = rand(dtype, seed=21)
    ref = torch.round(x, decimals=1)
    assert_same(run_op(lambda t: pypto.round(t, 1), [x], ref), ref)
    ref = torch.clamp(x, -1.5, 2.25)
    assert_same(run_op(lambda t: pypto.clip(t, -1.5, 2.25), [x], ref), ref)
    ref = torch.clamp(x, min=0.5)
    assert_same(run_op(lambda t: pypto.clip(t, min=0.5), [x], ref), ref)
    lo, hi = rand(dtype, seed=22, low=-3, high=0), rand(dtype, (64,), seed=23, low=0, high=3)
    ref = torch.clamp(x, lo, hi)  # tensor bounds, the upper one broadcast from a lower rank
    assert_same(run_op(lambda t, a, b: pypto.clip(t, a, b), [x, lo, hi], ref), ref)
    ref = torch.clamp(x, max=hi)
    assert_same(run_op(lambda t, b: pypto.clip(t, max=b), [x, hi], ref), ref)
    xf = x.float()  # pypto's composition (operator.py), bitwise equal to pypto on published examples
    e = torch.exp(xf - xf.amax(-1, keepdim=True))
    ref = (e / e.sum(-1, keepdim=True)).to(dtype)
    got = run_op(lambda t: pypto.softmax(t, -1), [x], ref)
    assert_same(got, ref)
    exact = torch.softmax(x.double(), -1)
    assert torch.allclose(got.double(), exact, rtol=torch.finfo(dtype).eps, atol=1e-6)


# --- reductions ----------------------------------------------------------------------------------
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("dtype", FLOATS + [torch.int32], ids=str)
def test_amax_amin_max_min(dtype, dim, keepdim):
    x = rand(dtype, seed=22, low=-100, high=100)
    for op, ref_op in [(pypto.amax, torch.amax), (pypto.amin, torch.amin)]:
        ref = ref_op(x, dim, keepdim=keepdim)
        assert_same(run_op(lambda t: op(t, dim, keepdim), [x], ref), ref)
    ref = torch.amax(x, -1, keepdim=True)
    assert_same(run_op(lambda t: t.amax(-1, True), [x], ref), ref)
    for op in (pypto.max, pypto.min):  # two scalars only in pypto 0.2.0 (tests/conformance: max_tensor_form_fp32)
        with pytest.raises(pypto.ConstraintViolation, match=r"\[C-API-06\].*takes two scalars"):
            run_op(lambda t: op(t, dim), [x], ref)


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_sum_fp32_against_fp64(dim, keepdim):
    x = rand(torch.float32, seed=23)
    exact = torch.sum(x.double(), dim, keepdim=keepdim)
    got = run_op(lambda t: pypto.sum(t, dim, keepdim), [x], exact.float())
    assert got.dtype == torch.float32 and got.shape == exact.shape
    n = x.shape[dim]
    bound = n * torch.finfo(torch.float32).eps * torch.sum(x.double().abs(), dim, keepdim=keepdim)
    assert ((got.double() - exact).abs() <= bound).all()
    assert ((got.double() - exact).abs() <= 4 * bound / n).all()  # far tighter than the worst case


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", [0, -1])
@pytest.mark.parametrize("dtype", FLOATS + [torch.int32], ids=str)
def test_prod(dtype, dim, keepdim):
    if dtype.is_floating_point:
        x = rand(dtype, seed=24, low=0.9, high=1.1)
    else:
        x = torch.where(rand(dtype, seed=24, low=-1, high=1) >= 0, 1, -1).to(dtype)
        x[0, 0] = 3
    exact = torch.prod(x.double(), dim, keepdim=keepdim)
    got = run_op(lambda t: pypto.prod(t, dim, keepdim), [x], exact.to(dtype))
    assert got.dtype == dtype
    if dtype.is_floating_point:
        n = x.shape[dim]
        rel = (got.double() - exact).abs() / exact.abs()
        assert (rel <= (n + 1) * torch.finfo(dtype).eps / 2).all()
    else:
        assert torch.equal(got, exact.to(dtype))


# --- casts ----------------------------------------------------------------------------------------
# pypto 0.2.0's rules (its op calculator; recorded bitwise in tests/conformance, cast_*):
# ROUND/FLOOR/CEIL/TRUNC first round a float to an integral value (ROUND: half to even), also
# for a float target; then a float target takes the nearest value, an integer target the value
# rounded half to even, converted as C converts (wrapping; NaN/inf/out of int32 -> INT_MIN's low
# bits).  SaturationMode.ON clamps (pypto's documented meaning).
CAST_MODES = list(pypto.CastMode)
_INTEGRAL = {"CAST_ROUND": torch.round, "CAST_FLOOR": torch.floor, "CAST_CEIL": torch.ceil,
             "CAST_TRUNC": torch.trunc}


def pypto_float_ref(x: torch.Tensor, target: torch.dtype, mode: str) -> torch.Tensor:
    integral = _INTEGRAL.get(mode)
    return round_float_ref(integral(x) if integral else x, target, "CAST_NONE")


def pypto_int_ref(values, mode: str, bits: int, saturate: bool) -> list[int]:
    rounding = mode if mode in _INTEGRAL and mode != "CAST_ROUND" else "CAST_RINT"
    lo, hi = -2 ** (bits - 1), 2 ** (bits - 1) - 1
    if saturate:
        return round_int_ref(values, rounding, lo, hi)
    result = []
    for v, n in zip(values, round_int_ref(values, rounding, -2 ** 63, 2 ** 63 - 1)):
        n = n if math.isfinite(v) and -2 ** 31 <= n < 2 ** 31 else -2 ** 31  # C's float -> int32
        result.append((n - lo) % 2 ** bits + lo)
    return result


def special_fp32(target, n_random=448, seed=25):
    """fp32 values that stress rounding into target: exact values, half-way points,
    just-off-ties, subnormals, overflow, +-inf, NaN, signed zeros."""
    g = torch.Generator().manual_seed(seed)
    raw = torch.randint(-2**31, 2**31 - 1, (n_random,), generator=g, dtype=torch.int64).to(torch.int32)
    rnd = raw.view(torch.float32)
    rnd = rnd[torch.isfinite(rnd)][: n_random // 2]
    base = (torch.randn(64, generator=g) * 8).to(target).to(torch.float32)
    nxt = torch.nextafter(base.to(target), torch.full_like(base, math.inf).to(target)).to(torch.float32)
    half = (base + nxt) / 2  # exact ties in fp32
    tiny = torch.nextafter(half, torch.full_like(half, math.inf))
    largest = torch.finfo(target).max
    specials = torch.tensor([0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, -1.0, largest, -largest,
                             largest * 1.001, -largest * 1.001, 70000.0, -70000.0, 65519.0, 65520.0,
                             2.0 ** -133, -2.0 ** -133, 2.0 ** -140, 2.0 ** -24, 3 * 2.0 ** -26, 2.0 ** -25,
                             -(2.0 ** -25), 1e-40, -1e-40, 1.0 + 2 ** -8, 1.0 + 3 * 2 ** -9], dtype=torch.float32)
    values = torch.cat([specials, base, half, -half, tiny, rnd, rnd * 2.0 ** -100])
    pad = (-values.numel()) % 64
    return torch.cat([values, torch.ones(pad)]).reshape(-1, 64)


@pytest.mark.parametrize("mode", CAST_MODES, ids=lambda m: m.name)
@pytest.mark.parametrize("target", [torch.bfloat16, torch.float16], ids=str)
def test_cast_fp32_to_half_by_mode(target, mode):
    x = special_fp32(target)
    ref = pypto_float_ref(x, target, mode.name)
    got = run_op(lambda t: pypto.cast(t, pypto.dtypes.from_torch(target), mode), [x], ref,
                 tile=(x.shape[0], 64))
    assert_same(got, ref)
    if mode in (pypto.CastMode.CAST_NONE, pypto.CastMode.CAST_RINT, pypto.CastMode.CAST_ODD):
        assert_same(got, x.to(target))  # nearest-even is torch's own conversion


def test_cast_modes_spelled_out():
    """Near 1.0 the bf16 grid step is 2**-7: 1.0, 1.0078125, 1.015625.  The rounding modes
    round to integers first; only NONE/RINT/ODD round onto the bf16 grid."""
    x = torch.tensor([1 + 2**-9, 1 + 2**-8, 1 + 3 * 2**-9, -(1 + 2**-8), 1 + 3 * 2**-8, 2.5, -0.5] * 9 + [0.0])
    x = x.reshape(1, 64).repeat(8, 1)
    lo, hi, hi2 = 1.0, 1.0078125, 1.015625
    expected = {  # 1+2^-9, 1+2^-8 (tie), 1+3*2^-9, -(1+2^-8) (tie), 1+3*2^-8 (tie, odd lo), 2.5, -0.5
        "CAST_NONE": [lo, lo, hi, -lo, hi2, 2.5, -0.5], "CAST_RINT": [lo, lo, hi, -lo, hi2, 2.5, -0.5],
        "CAST_ODD": [lo, lo, hi, -lo, hi2, 2.5, -0.5], "CAST_ROUND": [1.0, 1.0, 1.0, -1.0, 1.0, 2.0, -0.0],
        "CAST_FLOOR": [1.0, 1.0, 1.0, -2.0, 1.0, 2.0, -1.0], "CAST_CEIL": [2.0, 2.0, 2.0, -1.0, 2.0, 3.0, -0.0],
        "CAST_TRUNC": [1.0, 1.0, 1.0, -1.0, 1.0, 2.0, -0.0],
    }
    for mode in pypto.CastMode:
        got = run_op(lambda t: pypto.cast(t, pypto.DT_BF16, mode), [x], x.to(torch.bfloat16))
        assert got[3, :7].tolist() == expected[mode.name], mode
    same = run_op(lambda t: pypto.cast(t, pypto.DT_FP32, pypto.CastMode.CAST_ROUND), [x], x)
    assert same[3, :7].tolist() == expected["CAST_ROUND"]  # pypto's own sin/cos round this way


@pytest.mark.parametrize("mode", CAST_MODES, ids=lambda m: m.name)
@pytest.mark.parametrize("pair", [(torch.float16, torch.bfloat16), (torch.bfloat16, torch.float16)], ids=str)
def test_cast_between_16_bit_floats_rounds_by_mode(pair, mode):
    source, target = pair
    x = special_fp32(target).to(source)  # nearest-even into the source first
    ref = pypto_float_ref(x, target, mode.name)
    got = run_op(lambda t: pypto.cast(t, pypto.dtypes.from_torch(target), mode), [x], ref,
                 tile=(x.shape[0], 64))
    assert_same(got, ref)


@pytest.mark.parametrize("source", FLOATS, ids=str)
def test_cast_widening_is_exact(source):
    x = special_fp32(torch.bfloat16).to(source)
    for target in (torch.float32, torch.float64):
        if target == source:
            continue
        for mode in (pypto.CastMode.CAST_NONE, pypto.CastMode.CAST_RINT):
            got = run_op(lambda t: pypto.cast(t, pypto.dtypes.from_torch(target), mode), [x], x.to(target),
                         tile=(x.shape[0], 64))
            assert_same(got, x.to(target))


INT8_VALUES = [math.nan, -math.nan, math.inf, -math.inf, 127.5, -128.5, 127.49, -128.49, 126.5, -127.5, 2.5, -2.5,
               3.5, -3.5, 0.5, -0.5, 1.5, 0.49999997, -0.49999997, 300.0, -300.0, 1e30, -1e30, 0.0, -0.0, 7.25,
               -7.75, 100.0, -128.0, 127.0, 128.0, -129.0]


@pytest.mark.parametrize("satmode", list(pypto.SaturationMode), ids=lambda m: m.name)
@pytest.mark.parametrize("mode", CAST_MODES, ids=lambda m: m.name)
@pytest.mark.parametrize("source", FLOATS, ids=str)
def test_cast_float_to_int8_wraps_or_saturates(source, mode, satmode):
    values = torch.tensor(INT8_VALUES * 2, dtype=torch.float32).to(source)
    x = torch.cat([values, torch.zeros(64 - values.numel(), dtype=source)]).reshape(1, 64).repeat(8, 1)
    expected = pypto_int_ref(x.double().reshape(-1).tolist(), mode.name, 8, satmode is pypto.SaturationMode.ON)
    ref = torch.tensor(expected, dtype=torch.int8).reshape(8, 64)
    got = run_op(lambda t: pypto.cast(t, pypto.DT_INT8, mode, satmode), [x], ref)
    assert_same(got, ref)


def test_cast_int8_ties_and_specials_spelled_out():
    x = torch.tensor([math.nan, math.inf, -math.inf, 127.5, -128.5, 2.5, -2.5] + [0.0] * 57).repeat(8, 1)
    rint = run_op(lambda t: pypto.cast(t, pypto.DT_INT8, pypto.CastMode.CAST_RINT), [x], (SHAPE, torch.int8))
    assert rint[0, :7].tolist() == [0, 0, 0, -128, -128, 2, -2]  # 128 wraps; NaN/inf -> 0
    ties = run_op(lambda t: pypto.cast(t, pypto.DT_INT8, pypto.CastMode.CAST_ROUND), [x], (SHAPE, torch.int8))
    assert ties[0, :7].tolist() == [0, 0, 0, -128, -128, 2, -2]  # pypto's CAST_ROUND: half to even
    sat = run_op(lambda t: pypto.cast(t, pypto.DT_INT8, satmode=pypto.SaturationMode.ON), [x], (SHAPE, torch.int8))
    assert sat[0, :7].tolist() == [0, 127, -128, 127, -128, 2, -2]
    wide = run_op(lambda t: pypto.cast(t, pypto.DT_INT32, pypto.CastMode.CAST_TRUNC), [x * 1e10],
                  (SHAPE, torch.int32))
    assert wide[0, :3].tolist() == [-2**31] * 3


def test_cast_int32_to_int8_wraps_or_clamps():
    x = torch.tensor([200, -200, 300, -129, 128, 127, -128, 0, 1000, -1000, 2**31 - 1, -2**31] + [5] * 52,
                     dtype=torch.int32).repeat(8, 1)
    off = run_op(lambda t: pypto.cast(t, pypto.DT_INT8, satmode=pypto.SaturationMode.OFF), [x], (SHAPE, torch.int8))
    on = run_op(lambda t: pypto.cast(t, pypto.DT_INT8, satmode=pypto.SaturationMode.ON), [x], (SHAPE, torch.int8))
    wrapped = [((v + 128) % 256) - 128 for v in x[0].tolist()]
    clamped = [max(-128, min(127, v)) for v in x[0].tolist()]
    assert off[0].tolist() == wrapped
    assert on[0].tolist() == clamped
    assert off[0, :3].tolist() == [-56, 56, 44] and on[0, :3].tolist() == [127, -128, 127]


def test_cast_every_fp16_to_int8_trunc_saturated():
    """The quantisation chain's last step over all 65536 fp16 bit patterns, against
    Python's trunc and clamp (NaN -> 0): the interpreter clamps in fp32 without a trunc."""
    x = torch.arange(-2**15, 2**15, dtype=torch.int32).to(torch.int16).view(torch.float16).reshape(-1, 64)
    expected = [0 if math.isnan(v) else max(-128, min(127, math.trunc(v) if math.isfinite(v) else v))
                for v in x.double().reshape(-1).tolist()]
    ref = torch.tensor(expected, dtype=torch.int8).reshape(x.shape)
    got = run_op(lambda t: pypto.cast(t, pypto.DT_INT8, pypto.CastMode.CAST_TRUNC, pypto.SaturationMode.ON),
                 [x], ref, tile=(x.shape[0], 64))
    assert_same(got, ref)


def test_cast_int32_to_fp16_rounds_once():
    """int32 -> fp16 (the interpreter goes through fp32) against numpy's one rounding,
    across fp16's overflow threshold (65520 rounds to inf, 65519 to 65504) and int32's ends."""
    import numpy as np

    values = list(range(-66000, 66000, 7)) + [65519, 65520, -65519, -65520, 2**24 + 1, 2**31 - 1, -2**31]
    values += [0] * ((-len(values)) % 64)
    x = torch.tensor(values, dtype=torch.int32).reshape(-1, 64)
    with np.errstate(over="ignore"):
        ref = torch.from_numpy(np.array(values, dtype=np.int64).astype(np.float16)).reshape(x.shape)
    got = run_op(lambda t: pypto.cast(t, pypto.DT_FP16, pypto.CastMode.CAST_ROUND), [x], ref,
                 tile=(x.shape[0], 64))
    assert_same(got, ref)


def test_cast_int_to_float_and_same_dtype_identity():
    x = torch.arange(512, dtype=torch.int32).reshape(SHAPE) * 1001
    ref = x.to(torch.bfloat16)
    assert_same(run_op(lambda t: pypto.cast(t, pypto.DT_BF16), [x], ref), ref)

    seen = {}

    def same(t):
        seen["result"] = pypto.cast(t, pypto.DT_INT32)
        seen["input"] = t
        return seen["result"]
    run_op(same, [x], x)
    assert seen["result"] is seen["input"]  # pypto returns the input itself


# --- matmul ----------------------------------------------------------------------------------------
CUBE = ([16, 16], [32, 64], [32, 32])  # nL0 * 1 B must be 32-byte aligned for int8 (real pypto refuses 16)


def mm(a, b, out, **kw):
    return run_op(lambda x, y: pypto.matmul(x, y, pypto.dtypes.from_torch(out), **kw), [a, b],
                  (torch.matmul(a.double(), b.double()).shape if not kw else _mm_shape(a, b, **kw), out),
                  tile=None, cube=CUBE)


def _mm_shape(a, b, a_trans=False, b_trans=False):
    a = a.transpose(-1, -2) if a_trans else a
    b = b.transpose(-1, -2) if b_trans else b
    return torch.matmul(a.double(), b.double()).shape


@pytest.mark.parametrize("out", FLOATS, ids=str)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_matmul_half_integers_round_once(dtype, out):
    """Integer-valued inputs: fp32 accumulation is exact, so the result must be the
    exact product rounded once into out_dtype."""
    a = rand(dtype, (16, 64), seed=30, low=-8, high=8).round()
    b = rand(dtype, (64, 32), seed=31, low=-8, high=8).round()
    exact = torch.matmul(a.double(), b.double())
    assert_same(mm(a, b, out), exact.to(out))


@pytest.mark.parametrize("trans", [(False, False), (True, False), (False, True), (True, True)], ids=str)
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_matmul_random_against_fp64(dtype, trans):
    a_trans, b_trans = trans
    a = rand(dtype, (16, 64), seed=32, low=-1, high=1)
    b = rand(dtype, (64, 32), seed=33, low=-1, high=1)
    a_in = a.t().contiguous() if a_trans else a
    b_in = b.t().contiguous() if b_trans else b
    exact = torch.matmul(a.double(), b.double())
    got32 = mm(a_in, b_in, torch.float32, a_trans=a_trans, b_trans=b_trans)
    bound = 64 * torch.finfo(torch.float32).eps * torch.matmul(a.double().abs(), b.double().abs())
    assert ((got32.double() - exact).abs() <= bound).all()
    if dtype != torch.float32:
        got = mm(a_in, b_in, dtype, a_trans=a_trans, b_trans=b_trans)
        once = exact.to(dtype)
        dist = ulp_distance(got, once)
        assert (dist <= 1).all() and (dist == 0).float().mean() > 0.95


def test_matmul_bf16_out_accumulates_in_fp32_at_long_k():
    """bf16 x bf16 -> bf16: one rounding of an fp32 sum even over K = 4096 (in steps of the
    cube tile's L1 k), within 1 ulp of the exact product rounded once (a bf16 accumulator
    would be off by many)."""
    a = rand(torch.bfloat16, (8, 4096), seed=36, low=-1, high=1)
    b = rand(torch.bfloat16, (4096, 64), seed=37, low=-1, high=1)
    dist = ulp_distance(mm(a, b, torch.bfloat16), torch.matmul(a.double(), b.double()).to(torch.bfloat16))
    assert (dist <= 1).all() and (dist == 0).float().mean() > 0.99


def test_matmul_batched_3d():
    a = rand(torch.bfloat16, (2, 16, 32), seed=34, low=-8, high=8).round()
    b = rand(torch.bfloat16, (2, 32, 16), seed=35, low=-8, high=8).round()
    exact = torch.matmul(a.double(), b.double())
    assert_same(mm(a, b, torch.float32), exact.float())
    bt = b.transpose(-1, -2).contiguous()
    assert_same(mm(a, bt, torch.bfloat16, b_trans=True), exact.to(torch.bfloat16))
    assert_same(run_op(lambda x, y: x.matmul(y, pypto.DT_FP32), [a, b], exact.float(), tile=None, cube=CUBE),
                exact.float())


def test_matmul_int8_to_int32_exact():
    a = rand(torch.int8, (16, 64), seed=36, low=-128, high=127)
    b = rand(torch.int8, (64, 32), seed=37, low=-128, high=127)
    exact = torch.matmul(a.long(), b.long())
    assert exact.abs().max() > 2**16  # beyond fp16/bf16 exactness
    assert_same(mm(a, b, torch.int32), exact.to(torch.int32))


@pytest.mark.parametrize("engine", ["int_mm", "fp32 blocks"])
@pytest.mark.parametrize("rows", ["typical", "extreme"])
def test_matmul_int8_to_int32_exact_at_large_k(rows, engine, monkeypatch):
    """K = 5000 (past 2**24 / 2**14 products), on quantised-looking activations and on
    rows and columns of -128 whose every partial sum is as large as int8 allows; on
    torch._int_mm and on the exact fp32 K blocks used where it is missing."""
    import importlib

    matmul_module = importlib.import_module("ptogym.interp.ops.matmul")

    if engine == "int_mm":
        assert matmul_module._INT_MM, "torch._int_mm is missing or inexact here"
    else:
        monkeypatch.setattr(matmul_module, "_INT_MM", False)
    k = 5000
    a = (rand(torch.float32, (8, k), seed=40, low=-1, high=1) * 127).round().to(torch.int8)
    b = rand(torch.int8, (k, 32), seed=41, low=-128, high=127)
    if rows == "extreme":
        a[:3], b[:, :5] = -128, -128
    exact = torch.matmul(a.long(), b.long())
    assert torch.matmul(a.long().abs(), b.long().abs()).max() > 2**24  # one fp32 pass over K is not bound exact
    assert_same(mm(a, b, torch.int32), exact.to(torch.int32))
    assert_same(mm(a, b.t().contiguous(), torch.int32, b_trans=True), exact.to(torch.int32))


def bf16_accumulate(a, b):
    """What a kernel accumulating in bf16 would compute: round after every add."""
    acc = torch.zeros(a.shape[0], b.shape[1], dtype=torch.bfloat16)
    for k in range(a.shape[1]):
        acc = (acc.float() + a[:, k:k + 1].float() * b[k:k + 1, :].float()).to(torch.bfloat16)
    return acc


def test_matmul_accumulates_in_fp32_not_bf16():
    """Large K: pypto.matmul accumulates in fp32 and rounds once; a bf16 accumulator
    would stall (256 + 1 == 256 in bf16) and differ."""
    k = 1024
    ones_a, ones_b = torch.ones(16, k, dtype=torch.bfloat16), torch.ones(k, 16, dtype=torch.bfloat16)
    cube = ([16, 16], [64, 256], [16, 16])
    got = run_op(lambda x, y: pypto.matmul(x, y, pypto.DT_BF16), [ones_a, ones_b], ((16, 16), torch.bfloat16),
                 tile=None, cube=cube)
    assert (got == 1024).all()
    assert (bf16_accumulate(ones_a, ones_b) == 256).all()

    a = rand(torch.bfloat16, (16, k), seed=38, low=0, high=3).round()
    b = rand(torch.bfloat16, (k, 16), seed=39, low=0, high=3).round()
    got = run_op(lambda x, y: pypto.matmul(x, y, pypto.DT_BF16), [a, b], ((16, 16), torch.bfloat16),
                 tile=None, cube=cube)
    once = torch.matmul(a.double(), b.double()).to(torch.bfloat16)
    assert_same(got, once)
    assert not torch.equal(bf16_accumulate(a, b), once)


# --- scaled_mm (MX fp8) -------------------------------------------------------------------------
def mx_dequant(x, scale, for_a):
    """fp64 dequantisation of an fp8 matrix with pypto's 3-D block scales: A [M, K] with
    scale [M, K/64, 2], B [K, N] with scale [K/64, N, 2]; each scale covers 32 K elements."""
    s = scale.to(torch.float64)
    blocks = s.reshape(s.shape[0], -1) if for_a else s.permute(0, 2, 1).reshape(-1, s.shape[1])
    if for_a:
        return x.to(torch.float64) * blocks.repeat_interleave(32, dim=1)
    return x.to(torch.float64) * blocks.repeat_interleave(32, dim=0)


@pytest.mark.parametrize("out", [torch.float32, torch.bfloat16], ids=str)
def test_scaled_mm_fp8_block_scales(out, monkeypatch):
    monkeypatch.setattr(interp_platform, "profile", PROFILES["DAV_3510"])  # fp8 scaled_mm is A5-only in pypto
    fp8, e8m0 = torch.float8_e4m3fn, torch.float8_e8m0fnu
    g = torch.Generator().manual_seed(40)
    a = (torch.randn(16, 128, generator=g) * 4).to(fp8)
    b = (torch.randn(128, 32, generator=g) * 4).to(fp8)
    scale_a = (2.0 ** torch.randint(-4, 5, (16, 2, 2), generator=g).float()).to(e8m0)
    scale_b = (2.0 ** torch.randint(-4, 5, (2, 32, 2), generator=g).float()).to(e8m0)
    da, db = mx_dequant(a, scale_a, True), mx_dequant(b, scale_b, False)
    exact = torch.matmul(da, db)
    got = run_op(lambda x, y, sa, sb: pypto.scaled_mm(x, y, pypto.dtypes.from_torch(out), sa, sb),
                 [a, b, scale_a, scale_b], ((16, 32), out), tile=None, cube=([16, 16], [64, 128], [16, 16]))
    bound = 128 * torch.finfo(torch.float32).eps * torch.matmul(da.abs(), db.abs())
    if out == torch.float32:
        assert ((got.double() - exact).abs() <= bound).all()
    else:
        assert (ulp_distance(got, exact.to(out)) <= 1).all()
    # the scales matter: unscaled fp8 products differ
    plain = torch.matmul(a.double(), b.double())
    assert not torch.allclose(got.double(), plain, rtol=0.01)
    # transposed scale layouts give the same result
    got_t = run_op(lambda x, y, sa, sb: pypto.scaled_mm(x, y, pypto.dtypes.from_torch(out), sa, sb,
                                                        scale_a_trans=True, scale_b_trans=True),
                   [a, b, scale_a.transpose(0, 1).contiguous(), scale_b.transpose(0, 1).contiguous()],
                   ((16, 32), out), tile=None, cube=([16, 16], [64, 128], [16, 16]))
    assert_same(got_t, got)


def test_scaled_mm_follows_pypto_front_end_rules(monkeypatch):
    """pypto 0.2.0 traces fp8 scaled_mm for DAV_3510 only (FC3000 on DAV_2201, see
    test_linear.py's live probe) and its front end wants K % 64 == 0 and 3-D scales."""
    fp8, e8m0 = torch.float8_e4m3fn, torch.float8_e8m0fnu
    a, b = torch.zeros(16, 128, dtype=fp8), torch.zeros(128, 32, dtype=fp8)
    sa, sb = torch.ones(16, 2, 2, dtype=e8m0), torch.ones(2, 32, 2, dtype=e8m0)

    def call(*tensors):
        return run_op(lambda x, y, p, q: pypto.scaled_mm(x, y, pypto.DT_FP32, p, q), list(tensors),
                      ((16, 32), torch.float32), tile=None, cube=([16, 16], [64, 128], [16, 16]))

    with pytest.raises(pypto.ConstraintViolation, match=r"C-API-07.*DAV_3510 only"):
        call(a, b, sa, sb)
    monkeypatch.setattr(interp_platform, "profile", PROFILES["DAV_3510"])
    call(a, b, sa, sb)
    with pytest.raises(pypto.ConstraintViolation, match=r"C-API-06.*scales 3-D"):
        call(a, b, sa.reshape(16, 4), sb.reshape(2, 64))
    with pytest.raises(pypto.ConstraintViolation, match=r"C-API-06.*K=96 is not a multiple of 64"):
        call(a[:, :96].contiguous(), b[:96].contiguous(), sa, sb)
    with pytest.raises(pypto.ConstraintViolation, match=r"C-API-06.*do not match"):
        call(a, b, torch.ones(16, 4, 1, dtype=e8m0), sb)


# --- layout ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS + [torch.int32], ids=str)
def test_transpose_concat_unsqueeze(dtype):
    x = rand(dtype, (16, 64), seed=41)
    assert_same(run_op(lambda t: pypto.transpose(t, 0, 1), [x], x.t().contiguous(), tile=(16, 64)), x.t().contiguous())
    assert_same(run_op(lambda t: t.transpose(1, 0), [x], x.t().contiguous(), tile=(16, 64)), x.t().contiguous())
    a, b = rand(dtype, seed=42), rand(dtype, seed=43)
    for dim in (0, 1, -1):
        ref = torch.cat([a, b], dim)
        assert_same(run_op(lambda s, t: pypto.concat([s, t], dim), [a, b], ref), ref)
    v = rand(dtype, (64,), seed=44)
    for dim in (0, 1, -1):
        ref = v.unsqueeze(dim)
        assert_same(run_op(lambda t: pypto.unsqueeze(t, dim), [v], ref), ref)


@pytest.mark.parametrize("dtype", FLOATS + [torch.int32, torch.int8], ids=str)
def test_full_zeros_ones_element(dtype):
    dt = pypto.dtypes.from_torch(dtype)
    for fn, ref in [(lambda: pypto.full([8, 64], 3, dt), torch.full(SHAPE, 3, dtype=dtype)),
                    (lambda: pypto.full([8, 64], pypto.Element(dt, 5), dt), torch.full(SHAPE, 5, dtype=dtype)),
                    (lambda: pypto.zeros(8, 64, dtype=dt), torch.zeros(SHAPE, dtype=dtype)),
                    (lambda: pypto.zeros([8, 64], dtype=dt), torch.zeros(SHAPE, dtype=dtype)),
                    (lambda: pypto.ones((8, 64), dtype=dt), torch.ones(SHAPE, dtype=dtype))]:
        assert_same(run_op(fn, [], ref), ref)
    assert_same(run_op(lambda: pypto.ones(8, 64), [], torch.ones(SHAPE)), torch.ones(SHAPE))  # default fp32
    if dtype.is_floating_point:
        ref = torch.full(SHAPE, 0.1, dtype=dtype)  # rounded to the dtype once
        assert_same(run_op(lambda: pypto.full([8, 64], 0.1, dt), [], ref), ref)


def test_full_valid_shape_and_symbolic_fill():
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([pypto.DYNAMIC, 64], pypto.DT_INT32),
               out: pypto.Tensor([pypto.DYNAMIC, 64], pypto.DT_INT32)):
        pypto.set_vec_tile_shapes(8, 64)
        n = x.shape[0]
        head = pypto.full([8, 64], n, pypto.DT_INT32, valid_shape=[n.min(8), 64])
        pypto.assemble(head, [0, 0], out)
        pypto.assemble(pypto.full([8, 64], 7, pypto.DT_INT32, valid_shape=[n - 5, 64]), [5, 0], out)

    x = torch.zeros(11, 64, dtype=torch.int32)
    out = torch.full_like(x, -1)
    kernel(x, out)
    assert (out[:5] == 11).all() and (out[5:] == 7).all()


@pytest.mark.parametrize("dtype", FLOATS + [torch.int32], ids=str)
def test_index_select_gather_scatter_update(dtype):
    x = rand(dtype, seed=45)
    index = torch.tensor([7, 0, 3, 3], dtype=torch.int32)
    ref = torch.index_select(x, 0, index.long())
    assert_same(run_op(lambda t, i: pypto.index_select(t, 0, i), [x, index], ref), ref)
    col_index = torch.tensor([63, 0, 1, 31, 32, 2, 2, 5], dtype=torch.int32)
    ref = torch.index_select(x, 1, col_index.long())
    assert_same(run_op(lambda t, i: pypto.index_select(t, 1, i), [x, col_index], ref), ref)

    g = torch.Generator().manual_seed(46)
    gidx = torch.randint(0, 64, SHAPE, generator=g, dtype=torch.int64)
    ref = torch.gather(x, 1, gidx)
    assert_same(run_op(lambda t, i: pypto.gather(t, 1, i), [x, gidx], ref), ref)
    gidx0 = torch.randint(0, 8, (4, 64), generator=g, dtype=torch.int32)
    ref = torch.gather(x, 0, gidx0.long())
    assert_same(run_op(lambda t, i: t.gather(0, i), [x, gidx0], ref), ref)

    rows = torch.tensor([6, 1, 4], dtype=torch.int32)
    src = rand(dtype, (3, 64), seed=47)
    ref = x.clone()
    ref[rows.long()] = src
    got = run_op(lambda t, i, s: pypto.scatter_update(t, -2, i, s), [x, rows, src], ref)
    assert_same(got, ref)
    assert not torch.equal(got, x)


def test_scatter_update_value_is_what_it_was_at_the_scatter():
    """The interpreter computes scatter_update's value when it is read (moved back into
    its base it writes only the rows): a value read after its base or its rows were
    written is still the one at the scatter."""
    @pypto.frontend.jit()
    def kernel(cache: pypto.Tensor([8, 64], pypto.DT_FP32), rows: pypto.Tensor([2, 64], pypto.DT_FP32),
               index: pypto.Tensor([2, 1], pypto.DT_INT32), before_move: pypto.Tensor([8, 64], pypto.DT_FP32),
               before_rows: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        first = pypto.scatter_update(cache, -2, index, rows)
        cache.move(pypto.scatter_update(cache, -2, index, pypto.mul(rows, 2.0)))  # writes only two rows
        second = pypto.scatter_update(cache, -2, index, rows)
        rows.move(pypto.full([2, 64], -1.0, pypto.DT_FP32))  # (an assemble after the reads: F21007 in pypto)
        before_move.move(first)
        before_rows.move(second)

    cache, rows = rand(torch.float32, seed=50), rand(torch.float32, (2, 64), seed=51)
    index = torch.tensor([[5], [2]], dtype=torch.int32)
    start, rows0 = cache.clone(), rows.clone()
    before_move, before_rows = torch.zeros_like(cache), torch.zeros_like(cache)
    kernel(cache, rows, index, before_move, before_rows)
    expected = start.clone()
    expected[[5, 2]] = rows0 * 2
    assert_same(cache, expected)
    expected_first = start.clone()
    expected_first[[5, 2]] = rows0
    assert_same(before_move, expected_first)
    assert_same(before_rows, expected_first)  # cache rows 5, 2 replaced again by rows as they were
    assert (rows == -1).all()


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_reshape_inplace_and_copy(dtype):
    x = rand(dtype, seed=48)
    ref = x.reshape(16, 32)
    assert_same(run_op(lambda t: pypto.reshape(t, [16, 32]), [x], ref, tile=(16, 32)), ref)
    assert_same(run_op(lambda t: t.reshape([4, 128]), [x], x.reshape(4, 128)), x.reshape(4, 128))

    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(16, 32)
        flat = pypto.reshape(out, [16, 32], inplace=True)
        flat[:] = pypto.exp(pypto.reshape(x, [16, 32]))

    x32 = x.float()
    out = torch.zeros(8, 64)
    kernel(x32, out)  # in-place reshape writes through to out: no A-OUT-01
    assert_same(out, torch.exp(x32))


def test_reshape_of_a_tail_tile_takes_its_padding_along():
    """A tile whose valid extent is smaller than its shape, reshaped to a full shape (the
    DeepSeek-V3.2 sparse attention's key scales): the padding comes along undefined (NaN)."""
    seen = {}

    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([16, 32], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(16, 64)
        tile = pypto.add(pypto.view(x, [8, 64], [0, 0], valid_shape=[8, 32]), 0.0)
        seen["flat"] = pypto.reshape(tile, [16, 32])
        out[:] = seen["flat"]

    x = rand(torch.float32, seed=49)
    out = torch.zeros(16, 32)
    kernel(x, out)
    assert_same(out[0::2], x[:, :32])  # each 64-wide row's valid half lands in the even rows
    assert out[1::2].isnan().all()


def test_view_valid_shape_tail_tiles():
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([pypto.DYNAMIC, 64], pypto.DT_BF16),
               out: pypto.Tensor([pypto.DYNAMIC, 64], pypto.DT_BF16)):
        pypto.set_vec_tile_shapes(8, 64)
        n = x.shape[0]
        for i in pypto.loop(0, (n + 7) // 8):
            rows = (n - i * 8).min(8)
            tile = pypto.view(x, [8, 64], [i * 8, 0], valid_shape=[rows, 64])
            assert tile.shape == [8, 64]
            # sigmoid's result is valid over the whole tile (pypto's composition); mul takes the
            # valid extent of its first operand, the tail
            pypto.assemble(pypto.mul(tile, pypto.sigmoid(tile)), [i * 8, 0], out)

    for n in (1, 8, 21, 24):
        x = rand(torch.bfloat16, (n, 64), seed=n)
        out = torch.full_like(x, float("nan"))
        kernel(x, out)
        assert_same(out, x * torch.sigmoid(x))


def test_view_method_and_dtype_reinterpretation():
    x = rand(torch.float32, seed=49)

    def fn(t):
        half = t.view([8, 32], [0, 32])
        return pypto.add(half, half)
    ref = x[:, 32:] * 2
    assert_same(run_op(fn, [x], ref, tile=(8, 32)), ref)
    for dtype, torch_dtype in [(pypto.DT_INT8, torch.int8), (pypto.DT_BF16, torch.bfloat16),
                               (pypto.DT_INT32, torch.int32)]:
        ref = x.view(torch_dtype)  # same bytes, last dim scaled by the size ratio
        assert_same(run_op(lambda t: pypto.view(t, dtype=dtype), [x], ref), ref)


def test_arange():
    ref = torch.arange(64, dtype=torch.int32)
    assert_same(run_op(lambda: pypto.arange(64), [], ref, tile=(64,)), ref)
    ref = torch.arange(2, 66, dtype=torch.int32)
    assert_same(run_op(lambda: pypto.arange(2, 66), [], ref, tile=(64,)), ref)
    ref = torch.arange(1.0, 9.0, 0.125, dtype=torch.float32)
    got = run_op(lambda: pypto.arange(1.0, 9.0, 0.125), [], ref, tile=(64,))
    assert_same(got, ref)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_getitem_setitem_move(dtype):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.dtypes.from_torch(dtype)),
               out: pypto.Tensor([8, 64], pypto.dtypes.from_torch(dtype)),
               row: pypto.Tensor([64], pypto.dtypes.from_torch(dtype)),
               copy: pypto.Tensor([8, 64], pypto.dtypes.from_torch(dtype))):
        pypto.set_vec_tile_shapes(8, 64)
        out[0:4, :] = pypto.exp(x[4:8, :])
        out[4:8, 0:32] = x[0:4, 32:64]
        out[4:8, 32:] = 2.5
        copy.move(pypto.abs(x[...]))
        pypto.set_vec_tile_shapes(64)
        row[:] = pypto.neg(x[3])

    x = rand(dtype, seed=50)
    out, row, copy = torch.zeros_like(x), torch.zeros(64, dtype=dtype), torch.zeros_like(x)
    kernel(x, out, row, copy)
    ref = torch.empty_like(x)
    ref[0:4] = torch.exp(x[4:8])
    ref[4:8, 0:32] = x[0:4, 32:]
    ref[4:8, 32:] = 2.5
    assert_same(out, ref)
    assert_same(row, -x[3])
    assert_same(copy, x.abs())
