"""Per-token int8 quantisation (AT-05): the golden against fp64, the rounding chain at
its ties and saturation limits element by element (interpreter and real pypto), the
all-zero / NaN / inf rows, torch.library integration and input validation."""
import importlib.util

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import ptogym.ops
from ptogym.ops.per_token_quant.golden import AMAX_FLOOR, per_token_quant_golden
from ptogym.ops.per_token_quant.op import per_token_quant

HAVE_PYPTO = importlib.util.find_spec("pypto") is not None

# Rows whose amax is 127, so 127 / amax = 1 exactly and x_int8 = rint(x): every .5 tie
# (ties go to even), both saturation ends, and values one fp32 ulp off a tie.
TIES = [0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 125.5, -125.5, 126.5, -126.5, 127.0, -127.0,
        float(torch.nextafter(torch.tensor(2.5), torch.tensor(3.0))),
        float(torch.nextafter(torch.tensor(-2.5), torch.tensor(-3.0))), 0.0, -0.0]
TIES_EXPECTED = [0, 0, 2, -2, 2, -2, 126, -126, 126, -126, 127, -127, 3, -3, 0, 0]


def ties_rows(dtype=torch.float32, width=32):
    x = torch.zeros(2, width, dtype=dtype)
    x[0, :len(TIES)] = torch.tensor(TIES)
    x[1, :len(TIES)] = -torch.tensor(TIES)
    return x


def test_golden_matches_fp64():
    x = torch.randn(256, 1024, generator=torch.Generator().manual_seed(0)) * 3
    q32, s32 = per_token_quant_golden(x)
    q64, s64 = per_token_quant_golden(x, compute_dtype=torch.float64)
    torch.testing.assert_close(s32.double(), s64, rtol=1e-6, atol=0)
    diff = (q32.int() - q64.int()).abs()
    assert diff.max() <= 1 and (diff > 0).float().mean() < 1e-3  # only fp32-rounded products next to a .5 tie


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_ties_and_saturation_element_by_element(dtype):
    x = ties_rows(dtype)
    if dtype != torch.float32:  # the off-tie neighbours are not representable in 16 bits
        x[:, 12:14] = 0
    x_int8, scale = per_token_quant(x)
    expected = torch.tensor(TIES_EXPECTED + [0] * (32 - len(TIES)), dtype=torch.int8)
    if dtype != torch.float32:
        expected[12:14] = 0
    assert torch.equal(x_int8[0], expected) and torch.equal(x_int8[1], -expected)
    assert torch.equal(scale, torch.ones(2, 1))  # 127 / 127
    assert torch.equal(x_int8, per_token_quant_golden(x)[0])


def test_saturation_never_reaches_minus_128():
    x = torch.randn(64, 256, generator=torch.Generator().manual_seed(1)) * 1e3
    x_int8, _ = per_token_quant(x)
    assert x_int8.min() >= -127 and x_int8.max() <= 127
    assert (x_int8.abs().amax(-1) == 127).all()  # the amax element of every row maps to +-127


@pytest.mark.pypto
@pytest.mark.skipif(not HAVE_PYPTO, reason="the real pypto package is not installed")
def test_ties_under_real_pypto():
    """pypto's own interpreter runs the same RINT -> ROUND -> TRUNC-sat chain."""
    x = ties_rows()
    x_int8, scale = per_token_quant(x, backend="pypto-sim")
    assert torch.equal(x_int8[0, :len(TIES)], torch.tensor(TIES_EXPECTED, dtype=torch.int8))
    assert torch.equal(x_int8[1, :len(TIES)], -torch.tensor(TIES_EXPECTED, dtype=torch.int8))
    assert torch.equal(scale, torch.ones(2, 1))


def test_all_zero_row_gives_zeros_and_a_finite_scale():
    x = torch.randn(3, 256)
    x[1] = 0
    x_int8, scale = per_token_quant(x)
    assert torch.equal(x_int8[1], torch.zeros(256, dtype=torch.int8))
    assert torch.isfinite(scale).all() and scale[1].item() == pytest.approx(AMAX_FLOOR / 127)
    assert torch.equal(x_int8[1].float() * scale[1], torch.zeros(256))  # dequantises to exact zeros
    assert torch.equal(x_int8, per_token_quant_golden(x)[0])


def test_nan_and_inf_rows_as_documented():
    x = torch.randn(3, 256)
    x[0, 5] = float("nan")
    x[1, 7] = float("inf")
    x_int8, scale = per_token_quant(x)
    assert torch.isnan(scale[0]).all() and torch.isinf(scale[1]).all() and torch.isfinite(scale[2]).all()
    # NaN products convert to INT_MIN in int32 (as pypto converts) and saturate to -128
    assert (x_int8[0] == -128).all()
    assert x_int8[1, 7] == -128 and (x_int8[1, :7] == 0).all() and (x_int8[1, 8:] == 0).all()


@settings(max_examples=15, deadline=None)
@given(dtype=st.sampled_from([torch.bfloat16, torch.float16, torch.float32]), rows=st.integers(1, 140),
       width=st.integers(1, 24), magnitude=st.sampled_from([1e-3, 1.0, 300.0]), seed=st.integers(0, 2**16))
def test_matches_golden_and_round_trips(dtype, rows, width, magnitude, seed):
    x = (torch.randn(rows, width * 32, generator=torch.Generator().manual_seed(seed)) * magnitude).to(dtype)
    x_int8, scale = per_token_quant(x)
    q_ref, s_ref = per_token_quant_golden(x)
    assert torch.equal(x_int8, q_ref)
    torch.testing.assert_close(scale, s_ref, rtol=1e-6, atol=0)
    error = (x_int8.float() * scale - x.float()).abs()
    # round to nearest: at most half a step, plus the fp32 rounding of q * scale and of the
    # step itself (|q| <= 127 steps, each relative 2^-24: 127 * 2^-23 of a step at most)
    assert (error <= scale * (0.5 + 127 * 2.0 ** -23)).all()


def test_leading_dims_and_empty():
    x = torch.randn(2, 3, 64).bfloat16()
    x_int8, scale = ptogym.ops.per_token_quant(x)
    assert x_int8.shape == (2, 3, 64) and scale.shape == (2, 3, 1)
    x_int8, scale = per_token_quant(torch.zeros(0, 64))
    assert x_int8.shape == (0, 64) and scale.shape == (0, 1)


def test_opcheck_and_compile():
    x = torch.randn(5, 64)
    torch.library.opcheck(torch.ops.ptogym.per_token_quant.default, (x,))
    torch._dynamo.reset()
    got = torch.compile(lambda t: per_token_quant(t * 2), fullgraph=True)(x)
    want = per_token_quant_golden(x * 2)
    assert torch.equal(got[0], want[0]) and torch.allclose(got[1], want[1], rtol=1e-6)


@pytest.mark.parametrize("x, error, message", [
    (torch.zeros(4, 64, dtype=torch.int8), TypeError, "x: dtype"),
    (torch.zeros(64), ValueError, "x: needs at least 2 dims"),
    (torch.zeros(4, 48, dtype=torch.bfloat16), ValueError, "x: D=48 must be a multiple of 32"),
    (torch.zeros(4, 20), ValueError, "x: row of 20"),
    (torch.zeros(1, 16416), ValueError, "x: D=16416 > 16384"),
    (torch.zeros(64, 4).t(), ValueError, "x: must be contiguous"),
    ([[1.0] * 32], TypeError, "x: expected a torch.Tensor"),
], ids=["int8", "rank1", "int8 row unaligned", "row unaligned", "D too large", "non-contiguous", "list"])
def test_bad_input_is_rejected(x, error, message):
    with pytest.raises(error, match=message):
        per_token_quant(x)
