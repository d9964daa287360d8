"""RMSNorm (AT-03): the golden against fp64, the kernel against the golden on random
shapes and both rsqrt modes, torch.library integration and input validation."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import ptogym.ops
from ptogym.ops.rms_norm.golden import rms_norm_golden
from ptogym.ops.rms_norm.op import rms_norm
from ptogym.verify import detailed_tensor_compare

TOL = {torch.bfloat16: 0.0078125, torch.float16: 1e-3, torch.float32: 1e-5}
ALIGN = {torch.bfloat16: 16, torch.float16: 16, torch.float32: 8}


def make(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g).to(dtype)
    gamma = torch.randn(shape[-1], generator=g).to(dtype)
    bias = torch.randn(shape[-1], generator=g).to(dtype)
    return x, gamma, bias


def assert_close(name, actual, expected, tol):
    result = detailed_tensor_compare(actual, expected, name, rtol=tol, atol=tol / 8)
    assert result["all_close"], result.report()


@pytest.mark.parametrize("mode", ["rsqrt", "sqrt_div"])
def test_golden_matches_fp64(mode):
    x, gamma, bias = make((64, 1024), torch.float32)
    y, rstd = rms_norm_golden(x, gamma, 1e-6, bias, mode)
    y64, rstd64 = rms_norm_golden(x, gamma, 1e-6, bias, mode, compute_dtype=torch.float64)
    assert_close("rstd", rstd.double(), rstd64, 1e-6)
    assert_close("y", y.double(), y64.to(torch.float64), 1e-5)


def test_golden_zero_row_is_finite():
    y, rstd = rms_norm_golden(torch.zeros(2, 256), eps=1e-6)
    assert torch.equal(y, torch.zeros(2, 256))
    assert torch.allclose(rstd, torch.full((2, 1), 1e3), rtol=1e-6)


@settings(max_examples=20, deadline=None)
@given(dtype=st.sampled_from([torch.bfloat16, torch.float16, torch.float32]), rows=st.integers(1, 150),
       blocks=st.integers(1, 40), mode=st.sampled_from(["rsqrt", "sqrt_div"]), with_gamma=st.booleans(),
       with_bias=st.booleans(), seed=st.integers(0, 2**16))
def test_matches_golden_on_random_shapes(dtype, rows, blocks, mode, with_gamma, with_bias, seed):
    x, gamma, bias = make((rows, blocks * ALIGN[dtype]), dtype, seed)
    gamma, bias = (gamma if with_gamma else None), (bias if with_bias else None)
    y, rstd = rms_norm(x, gamma, 1e-5, bias=bias, rsqrt_mode=mode, output_rstd=True)
    y_ref, rstd_ref = rms_norm_golden(x, gamma, 1e-5, bias, mode)
    assert y.dtype == dtype and rstd.dtype == torch.float32 and rstd.shape == (rows, 1)
    assert_close("y", y, y_ref, TOL[dtype])
    assert_close("rstd", rstd, rstd_ref, 1e-5)


def test_modes_differ_only_in_rounding():
    x, gamma, _ = make((8, 512), torch.float32)
    _, a = rms_norm(x, gamma, rsqrt_mode="rsqrt", output_rstd=True)
    _, b = rms_norm(x, gamma, rsqrt_mode="sqrt_div", output_rstd=True)
    assert torch.allclose(a, b, rtol=1e-6)


def test_leading_dims_and_default_return():
    x, gamma, _ = make((2, 3, 5, 256), torch.bfloat16)
    y = ptogym.ops.rms_norm(x, gamma)
    assert isinstance(y, torch.Tensor) and y.shape == x.shape
    assert_close("y", y, rms_norm_golden(x, gamma)[0], TOL[torch.bfloat16])


def test_empty_rows():
    y, rstd = rms_norm(torch.zeros(0, 256, dtype=torch.bfloat16), output_rstd=True)
    assert y.shape == (0, 256) and rstd.shape == (0, 1)


def test_opcheck():
    x, gamma, bias = make((6, 256), torch.float32)
    torch.library.opcheck(torch.ops.ptogym.rms_norm.default, (x, gamma, 1e-6, bias, "sqrt_div"))
    torch.library.opcheck(torch.ops.ptogym.rms_norm.default, (x, None, 1e-6, None, "rsqrt"))


def test_torch_compile_fullgraph():
    def step(x, gamma):
        y, rstd = ptogym.ops.rms_norm(x, gamma, 1e-6, output_rstd=True)
        return y * 2, rstd

    torch._dynamo.reset()
    x, gamma, _ = make((4, 256), torch.float32)
    for got, want in zip(torch.compile(step, fullgraph=True)(x, gamma), step(x, gamma)):
        assert torch.allclose(got, want, rtol=1e-6, atol=1e-6)


BAD_INPUTS = [
    ("int dtype", lambda x, g, b: (x.int(), None, 1e-6, None, "rsqrt"), TypeError, "x: dtype"),
    ("gamma dtype", lambda x, g, b: (x, g.float(), 1e-6, None, "rsqrt"), TypeError, "gamma: dtype"),
    ("bias shape", lambda x, g, b: (x, g, 1e-6, b[:128], "rsqrt"), ValueError, "bias: shape"),
    ("gamma 2-D", lambda x, g, b: (x, g.view(1, -1), 1e-6, None, "rsqrt"), ValueError, "gamma: shape"),
    ("rank 1", lambda x, g, b: (x[0], g, 1e-6, None, "rsqrt"), ValueError, "x: needs at least 2 dims"),
    ("unaligned D", lambda x, g, b: (x[:, :200].contiguous(), g[:200], 1e-6, None, "rsqrt"), ValueError, "32 B"),
    ("D too large", lambda x, g, b: (torch.zeros(1, 16400), None, 1e-6, None, "rsqrt"), ValueError, "x: D=16400"),
    ("non-contiguous", lambda x, g, b: (x.t().contiguous().t(), g, 1e-6, None, "rsqrt"), ValueError,
     "x: must be contiguous"),
    ("eps zero", lambda x, g, b: (x, g, 0.0, None, "rsqrt"), ValueError, "eps"),
    ("eps nan", lambda x, g, b: (x, g, float("nan"), None, "rsqrt"), ValueError, "eps"),
    ("mode", lambda x, g, b: (x, g, 1e-6, None, "fast"), ValueError, "rsqrt_mode"),
    ("not a tensor", lambda x, g, b: (x, g.tolist(), 1e-6, None, "rsqrt"), TypeError, "gamma: expected a torch"),
]


@pytest.mark.parametrize("label, corrupt, error, message", BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_is_rejected_untouched(label, corrupt, error, message):
    x, gamma, bias = make((4, 256), torch.bfloat16)
    x_, g_, eps, b_, mode = corrupt(x, gamma, bias)
    before = [t.clone() for t in (x_, g_, b_) if isinstance(t, torch.Tensor)]
    with pytest.raises(error, match=message):
        rms_norm(x_, g_, eps, bias=b_, rsqrt_mode=mode)
    assert all(torch.equal(a, b) for a, b in zip(before, [t for t in (x_, g_, b_) if isinstance(t, torch.Tensor)]))


def test_case_files_use_the_call_rules():
    import dataclasses

    from ptogym.ops import get_op
    from ptogym.verify.cases import TensorSpec, load_cases

    spec = get_op("rms_norm")
    case = load_cases(spec.cases_path, spec)[0]
    bad = dataclasses.replace(case, attrs={"eps": -1, "rsqrt_mode": "x"}, inputs={
        "x": TensorSpec((2, 256), torch.bfloat16), "gamma": TensorSpec((255,), torch.float16)})
    assert spec.check_case(bad) == [
        "gamma: dtype torch.float16 must equal x's dtype torch.bfloat16", "gamma: shape [255] must be [D] = [256]",
        "eps: must be a finite number > 0, got -1", "rsqrt_mode: 'x' is not one of ['rsqrt', 'sqrt_div']"]
