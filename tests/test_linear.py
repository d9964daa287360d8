"""Linear projection (AT-09): the golden against fp64 / exact integer products, the
kernel against the golden in both modes on random shapes, torch.library integration
and input validation."""
import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

import ptogym.ops
from ptogym.ops.linear.golden import linear_golden
from ptogym.ops.linear.op import linear
from ptogym.verify import detailed_tensor_compare


def floats(t, k, n, dtype=torch.bfloat16, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(shape, generator=g) * k ** -0.25).to(dtype) for shape in ((t, k), (n, k), (n,))]


def int8s(t, k, n, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(-128, 128, (t, k), generator=g, dtype=torch.int8)
    w = torch.randint(-128, 128, (n, k), generator=g, dtype=torch.int8)
    return x, w, torch.rand(t, 1, generator=g) * 0.01 + 1e-3, torch.rand(n, generator=g) * 0.01 + 1e-3


def mx8s(t, k, n, dtype=torch.float8_e4m3fn, seed=0):
    """fp8 x [t, k], weight [n, k] and their e8m0 block scales (powers of two 2^-3..2^3)."""
    g = torch.Generator().manual_seed(seed)
    x, w = ((torch.randn(shape, generator=g) / 2).to(dtype) for shape in ((t, k), (n, k)))
    xs, ws = ((2.0 ** torch.randint(-3, 4, (rows, k // 32), generator=g)).to(torch.float8_e8m0fnu)
              for rows in (t, n))
    return x, w, xs, ws


def assert_bf16_close(actual, expected):
    result = detailed_tensor_compare(actual, expected, "y", rtol=0.0078125, atol=1e-3, max_error_ratio=0.005)
    assert result["all_close"], result.report()


def test_golden_float_matches_fp64():
    x, w, b = floats(32, 512, 64, torch.float32)
    torch.testing.assert_close(linear_golden(x, w, b).double(), linear_golden(x, w, b, compute_dtype=torch.float64,
                                                                              out_dtype=torch.float64),
                               rtol=1e-5, atol=1e-5)


def test_golden_int8_is_exact():
    x, w, xs, ws = int8s(8, 4096, 64)
    exact = (x.long() @ w.long().t()).double() * xs.double() * ws.double()
    torch.testing.assert_close(linear_golden(x, w, None, xs, ws, torch.float64, torch.float64), exact, rtol=0, atol=0)


def test_golden_mxfp8_matches_blockwise_fp64():
    """Each 32-wide K block's exact dot product, scaled afterwards by its two scales
    (another order than the golden's dequantise-then-multiply)."""
    x, w, xs, ws = mx8s(5, 256, 24, seed=3)
    blocks = [(x[:, j * 32:(j + 1) * 32].double() @ w[:, j * 32:(j + 1) * 32].double().t())
              * xs[:, j:j + 1].double() * ws[:, j].double() for j in range(256 // 32)]
    expected = torch.stack(blocks).sum(0)
    torch.testing.assert_close(linear_golden(x, w, None, xs, ws, torch.float64, torch.float64), expected,
                               rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(linear_golden(x, w, None, xs, ws, torch.float32).double(), expected,
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float8_e5m2])
@pytest.mark.parametrize("t, out_dtype", [(1, torch.bfloat16), (37, torch.float32), (130, torch.float16)])
def test_mxfp8_matches_golden(dtype, t, out_dtype):
    x, w, xs, ws = mx8s(t, 512, 64, dtype, seed=t)
    y = linear(x, w, quant_mode="mxfp8", x_scale=xs, w_scale=ws, out_dtype=out_dtype)
    assert y.dtype == out_dtype and y.shape == (t, 64)
    expected = linear_golden(x, w, None, xs, ws, out_dtype)
    if out_dtype == torch.float32:
        torch.testing.assert_close(y, expected, rtol=1e-5, atol=1e-5)
    else:
        assert_bf16_close(y, expected)


def test_mxfp8_each_scale_reaches_only_its_block():
    """Doubling one scale of x (row 2, K block 5) or of weight (channel 7, block 1)
    changes exactly that row's / channel's output by that block's share."""
    x, w, xs, ws = mx8s(4, 256, 16, seed=5)
    base = linear(x, w, quant_mode="mxfp8", x_scale=xs, w_scale=ws, out_dtype=torch.float32)
    for which, (row, block) in (("x", (2, 5)), ("w", (7, 1))):
        scales = {"x": xs.clone(), "w": ws.clone()}
        scales[which][row, block] = (scales[which][row, block].float() * 2).to(torch.float8_e8m0fnu)
        y = linear(x, w, quant_mode="mxfp8", x_scale=scales["x"], w_scale=scales["w"], out_dtype=torch.float32)
        cols = slice(block * 32, (block + 1) * 32)
        share = (x[:, cols].float() * xs[:, block:block + 1].float()) @ (w[:, cols].float() * ws[:, block:block + 1]
                                                                           .float()).t()
        changed = torch.zeros_like(base, dtype=torch.bool)
        if which == "x":
            changed[row] = True
        else:
            changed[:, row] = True
        torch.testing.assert_close(y[changed], (base + share)[changed], rtol=1e-5, atol=1e-5)
        assert torch.equal(y[~changed], base[~changed])


def test_pypto_sim_refuses_mxfp8_in_one_line():
    x, w, xs, ws = mx8s(8, 256, 32)
    with pytest.raises(NotImplementedError, match=r"mxfp8' cannot run on pypto-sim: .*DAV_3510") as info:
        linear(x, w, quant_mode="mxfp8", x_scale=xs, w_scale=ws, backend="pypto-sim")
    assert "\n" not in str(info.value)


def test_real_pypto_rejects_fp8_scaled_mm_on_its_platform(monkeypatch):
    """Why pypto-sim refuses: real pypto 0.2.0 traces this kernel's scaled_mm only for
    DAV_3510, and the platform it ships and simulates is DAV_2201 (README)."""
    pytest.importorskip("pypto")
    from ptogym.backends._pypto_runtime import PyptoRunError
    from ptogym.ops.linear import op

    x, w, xs, ws = mx8s(8, 64, 32)
    monkeypatch.setattr(op, "backend_refusal", lambda quant_mode, backend_name: None)
    with pytest.raises(PyptoRunError, match=r"(?s)FC3000.*only DAV_3510 architecture is supported"):
        linear(x, w, quant_mode="mxfp8", x_scale=xs, w_scale=ws, backend="pypto-sim")


@settings(max_examples=12, deadline=None)
@given(t=st.integers(1, 140), k=st.sampled_from([32, 96, 512]), n=st.sampled_from([16, 64, 272]),
       dtype=st.sampled_from([torch.bfloat16, torch.float16]), with_bias=st.booleans(), seed=st.integers(0, 999))
def test_float_matches_golden(t, k, n, dtype, with_bias, seed):
    x, w, b = floats(t, k, n, dtype, seed)
    b = b if with_bias else None
    y = linear(x, w, b)
    assert y.dtype == dtype and y.shape == (t, n)
    assert_bf16_close(y, linear_golden(x, w, b))


@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_int8_w8a8_matches_golden(out_dtype):
    x, w, xs, ws = int8s(37, 1024, 128, 1)
    y = linear(x, w, quant_mode="int8_w8a8", x_scale=xs, w_scale=ws, out_dtype=out_dtype)
    assert y.dtype == out_dtype
    torch.testing.assert_close(y, linear_golden(x, w, None, xs, ws, out_dtype), rtol=1e-6, atol=0)


@pytest.mark.parametrize("out_dtype", [torch.float16, torch.float32])
def test_bias_on_the_cube_equals_the_vector_epilogue(monkeypatch, out_dtype):
    """The kernel adds a bias in the cube's fp32 accumulator (linear_cube_bias): bit for
    bit what the fp32 vector epilogue gives, on a ragged token count."""
    from ptogym.ops.linear import kernel, op

    x, w, b = floats(99, 512, 256, torch.float16, seed=3)
    monkeypatch.setitem(kernel.VARIANTS, "vector_bias", {"cube_bias": False})
    on_cube = op.launch(x, w, b, out_dtype=out_dtype, backend="interp")[0]
    on_vector = op.launch(x, w, b, out_dtype=out_dtype, backend="interp", variant="vector_bias")[0]
    assert torch.equal(on_cube, on_vector)
    assert_bf16_close(on_cube, linear_golden(x, w, b, out_dtype=out_dtype))


def test_leading_dims_out_dtype_and_empty():
    x, w, b = floats(6, 256, 32)
    y = ptogym.ops.linear(x.view(2, 3, 256), w, b, out_dtype=torch.float32)
    assert y.shape == (2, 3, 32) and y.dtype == torch.float32
    torch.testing.assert_close(y.view(6, 32), linear_golden(x, w, b, out_dtype=torch.float32), rtol=1e-5, atol=1e-5)
    assert linear(x[:0], w).shape == (0, 32)


def test_opcheck_and_compile():
    x, w, b = floats(4, 64, 32)
    torch.library.opcheck(torch.ops.ptogym.linear.default, (x, w, b, "none", None, None, None))
    xi, wi, xs, ws = int8s(4, 64, 32)
    torch.library.opcheck(torch.ops.ptogym.linear.default, (xi, wi, None, "int8_w8a8", xs, ws, torch.float32))
    x8, w8, xs8, ws8 = mx8s(4, 64, 32)
    # test_schema is left out for fp8: torch's SchemaCheckMode compares inputs with a
    # multiplication that has no fp8 kernel on CPU ("mul_cpu_reduced_float")
    torch.library.opcheck(torch.ops.ptogym.linear.default, (x8, w8, None, "mxfp8", xs8, ws8, None),
                          test_utils=("test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic"))
    torch._dynamo.reset()
    got = torch.compile(lambda a: linear(a, w, b) * 2, fullgraph=True)(x)
    assert torch.equal(got, linear_golden(x, w, b) * 2)
    got = torch.compile(lambda a: linear(a, w8, quant_mode="mxfp8", x_scale=xs8, w_scale=ws8).float() * 2,
                        fullgraph=True)(x8)
    torch.testing.assert_close(got, linear_golden(x8, w8, None, xs8, ws8, torch.bfloat16).float() * 2, rtol=0.0078125,
                               atol=1e-3)


def _bad(label):
    x, w, b = floats(4, 64, 32)
    xi, wi, xs, ws = int8s(4, 64, 32)
    return {
        "fp32 x": ((x.float(), w.float()), {}, TypeError, "x: dtype"),
        "weight dtype": ((x, w.half()), {}, TypeError, "weight: dtype"),
        "weight K": ((x, w[:, :32].contiguous()), {}, ValueError, "weight: shape"),
        "weight 1-D": ((x, w[0]), {}, ValueError, "weight: shape"),
        "N unaligned": ((x, w[:6].contiguous()), {}, ValueError, "weight: N=6"),
        "bias shape": ((x, w, b[:8]), {}, ValueError, "bias: shape"),
        "mode": ((x, w), {"quant_mode": "fp4"}, ValueError, "quant_mode"),
        "scale without quant": ((x, w), {"x_scale": xs}, ValueError, "x_scale: only with"),
        "int8 without scales": ((xi, wi), {"quant_mode": "int8_w8a8"}, ValueError, "x_scale: required"),
        "int8 x_scale shape": ((xi, wi), {"quant_mode": "int8_w8a8", "x_scale": xs[:2], "w_scale": ws}, ValueError,
                               "x_scale: shape"),
        "int8 bias": ((xi, wi, b), {"quant_mode": "int8_w8a8", "x_scale": xs, "w_scale": ws}, ValueError, "bias"),
        "int8 float x": ((x, w), {"quant_mode": "int8_w8a8", "x_scale": xs, "w_scale": ws}, TypeError, "x: dtype"),
        "out dtype": ((x, w), {"out_dtype": torch.int32}, TypeError, "out_dtype"),
        **_bad_mx(),
    }[label]


def _bad_mx():
    x, w, xs, ws = mx8s(4, 128, 32)
    mx = {"quant_mode": "mxfp8", "x_scale": xs, "w_scale": ws}
    x96, w96, xs96, ws96 = mx8s(4, 96, 32)
    return {
        "mx K % 64": ((x96, w96), {**mx, "x_scale": xs96, "w_scale": ws96}, ValueError, "x: K=96 must be a multiple of 64"),
        "mx bf16 x": ((x.bfloat16(), w.bfloat16()), mx, TypeError, "x: dtype torch.bfloat16 unsupported"),
        "mx mixed fp8": ((x, w.float().to(torch.float8_e5m2)), mx, TypeError, "weight: dtype"),
        "mx fp32 scale": ((x, w), {**mx, "x_scale": xs.float()}, TypeError, "x_scale: dtype"),
        "mx scale shape": ((x, w), {**mx, "w_scale": ws[:, :2].contiguous()}, ValueError, "w_scale: shape"),
        "mx per-token scale": ((x, w), {**mx, "x_scale": xs[:, :1].contiguous()}, ValueError, "x_scale: shape"),
        "mx no scales": ((x, w), {"quant_mode": "mxfp8"}, ValueError, "x_scale: required"),
        "mx bias": ((x, w, w[0].contiguous()), mx, ValueError, "bias: not supported"),
    }


@pytest.mark.parametrize("label", ["fp32 x", "weight dtype", "weight K", "weight 1-D", "N unaligned", "bias shape",
                                   "mode", "scale without quant", "int8 without scales", "int8 x_scale shape",
                                   "int8 bias", "int8 float x", "out dtype", *_bad_mx()])
def test_bad_input_is_rejected(label):
    args, kwargs, error, message = _bad(label)
    with pytest.raises(error, match=message):
        linear(*args, **kwargs)


@settings(max_examples=60, deadline=None)
@example(rows=128, k=128, n=512, element_bytes=2)  # the MLA prolog's small q_b: failed pypto's compile
@given(rows=st.integers(1, 4096), k=st.sampled_from([64, 128, 256, 512, 2048, 4096, 7168]),
       n=st.sampled_from([32, 128, 512, 1024, 4096]), element_bytes=st.sampled_from([1, 2]))
def test_kernel_cube_tiles_fit_the_buffers(rows, k, n, element_bytes):
    """The tiles linear's kernel sets for a block (block_tile_shapes) are valid [L0, L1]
    pairs (L1 a multiple of L0, neither above the dimension) within the 910B's
    L0A/L0B/L0C/L1 buffers, K = 7168 (DeepSeek's hidden size) included; a short K
    (128: the minimum-weight rule once asked for n 512 beside m 128) keeps the fp32
    accumulator within L0C, past which pypto fails to compile."""
    from ptogym.atoms import linear as atoms

    (m, m1), (k0, k1), (n0, n1) = atoms.block_tile_shapes(rows, k, n, element_bytes)
    assert m == m1 and n0 == n1 and k1 % k0 == 0 and k1 <= k and n0 <= n and m % 16 == 0 and m <= 128
    assert m * k0 * element_bytes <= atoms.L0A_BYTES and k0 * n0 * element_bytes <= atoms.L0B_BYTES
    assert (m + n0) * k1 * element_bytes <= atoms.L1_BYTES and m * n0 * 4 <= atoms.L0C_BYTES


def test_hidden_7168_at_64_tokens():
    """K = 7168 in a 64-token block: halving K for the L1 k tile would end at 224, below
    the L0 tile 256 (pypto refuses L1 % L0 != 0); the tile rule doubles k0 instead."""
    x, w, _ = floats(64, 7168, 1536)
    assert_bf16_close(linear(x, w, backend="interp"), linear_golden(x, w))


def test_cube_peak_and_rates_from_the_platform_file():
    pytest.importorskip("pypto")
    from ptogym.atoms import measure
    from ptogym.backends._pypto_runtime import platform_model

    model = platform_model()
    assert measure.cube_peak_tflops(model) == pytest.approx(24 * 16 * 16 * 16 * 2 * 1.8e9 / 1e12)
    fig = measure.figures(model, 100.0, 200_000_000, flops=10**10)  # 2 GB/ms, 100 TFLOPS
    assert fig["gbps"] == pytest.approx(2000) and fig["above_ddr"] and fig["tflops"] == pytest.approx(100)
    assert "cost-model artefact" in measure.summary(fig)


def test_bench_reports_the_mxfp8_refusal_instead_of_failing():
    pytest.importorskip("pypto")
    from ptogym.bench import _fmt_row, bench_case
    from ptogym.ops import get_op
    from ptogym.verify.cases import load_cases

    spec = get_op("linear")
    case = next(c for c in load_cases(spec.cases_path, spec) if c.id == "mxfp8_t8")
    row = bench_case(spec, case, repeat=1, simulate=True)
    assert "sim" not in row and "DAV_3510" in row["sim_refused"]
    assert "not simulated: linear: quant_mode='mxfp8' cannot run on pypto-sim" in _fmt_row(row)
