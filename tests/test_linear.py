"""Linear projection (AT-09): the golden against fp64 / exact integer products, the
kernel against the golden in both modes on random shapes, torch.library integration
and input validation."""
import pytest
import torch
from hypothesis import given, settings
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
    torch._dynamo.reset()
    got = torch.compile(lambda a: linear(a, w, b) * 2, fullgraph=True)(x)
    assert torch.equal(got, linear_golden(x, w, b) * 2)


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
        "mode": ((x, w), {"quant_mode": "mxfp8"}, ValueError, "quant_mode"),
        "scale without quant": ((x, w), {"x_scale": xs}, ValueError, "x_scale: only with"),
        "int8 without scales": ((xi, wi), {"quant_mode": "int8_w8a8"}, ValueError, "x_scale: required"),
        "int8 x_scale shape": ((xi, wi), {"quant_mode": "int8_w8a8", "x_scale": xs[:2], "w_scale": ws}, ValueError,
                               "x_scale: shape"),
        "int8 bias": ((xi, wi, b), {"quant_mode": "int8_w8a8", "x_scale": xs, "w_scale": ws}, ValueError, "bias"),
        "int8 float x": ((x, w), {"quant_mode": "int8_w8a8", "x_scale": xs, "w_scale": ws}, TypeError, "x: dtype"),
        "out dtype": ((x, w), {"out_dtype": torch.int32}, TypeError, "out_dtype"),
    }[label]


@pytest.mark.parametrize("label", ["fp32 x", "weight dtype", "weight K", "weight 1-D", "N unaligned", "bias shape",
                                   "mode", "scale without quant", "int8 without scales", "int8 x_scale shape",
                                   "int8 bias", "int8 float x", "out dtype"])
def test_bad_input_is_rejected(label):
    args, kwargs, error, message = _bad(label)
    with pytest.raises(error, match=message):
        linear(*args, **kwargs)
