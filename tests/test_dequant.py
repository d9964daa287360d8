"""Dequantisation (AT-06): the golden against fp64, per-channel and per-token scale_b,
every output dtype, the quant -> int8 matmul -> dequant round trip, torch.library
integration and input validation."""
import pytest
import torch

import ptogym.ops
from ptogym.ops.dequant.golden import dequant_golden
from ptogym.ops.dequant.op import dequant

TOL = {torch.bfloat16: 0.0078125, torch.float16: 1e-3, torch.float32: 1e-6}


def make(rows, cols, seed=0, per_token_b=False):
    g = torch.Generator().manual_seed(seed)
    acc = torch.randint(-2**20, 2**20, (rows, cols), generator=g, dtype=torch.int32)
    scale_a = torch.rand(rows, 1, generator=g) * 0.02 + 1e-3
    scale_b = torch.rand((rows, 1) if per_token_b else (1, cols), generator=g) * 0.02 + 1e-3
    return acc, scale_a, scale_b


def test_golden_matches_fp64():
    acc, a, b = make(64, 256)
    torch.testing.assert_close(dequant_golden(acc, a, b, torch.float32).double(),
                               dequant_golden(acc, a, b, torch.float64, torch.float64), rtol=3e-7, atol=0)


@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("rows, per_token_b", [(1, False), (77, True), (130, False)])
def test_matches_golden(out_dtype, rows, per_token_b):
    acc, a, b = make(rows, 512, rows, per_token_b)
    out = dequant(acc, a, b, out_dtype)
    assert out.dtype == out_dtype and out.shape == acc.shape
    torch.testing.assert_close(out, dequant_golden(acc, a, b, out_dtype), rtol=TOL[out_dtype], atol=1e-5)


def test_round_trip_of_an_int8_matmul():
    """per_token_quant -> exact int32 matmul -> dequant approximates x @ w^T."""
    g = torch.Generator().manual_seed(3)
    x, w = torch.randn(16, 256, generator=g), torch.randn(128, 256, generator=g)
    x_int8, x_scale = ptogym.ops.per_token_quant(x)
    w_int8, w_scale = ptogym.ops.per_token_quant(w)
    acc = x_int8.int() @ w_int8.int().t()
    y = dequant(acc, x_scale, w_scale.view(1, -1), torch.float32)
    assert (y - x @ w.t()).abs().max() < 0.05 * (x @ w.t()).abs().max()


def test_leading_dims_and_empty():
    acc, a, b = make(6, 256)
    out = ptogym.ops.dequant(acc.view(2, 3, 256), a.view(2, 3, 1), b)
    torch.testing.assert_close(out.view(6, 256), dequant_golden(acc, a, b), rtol=TOL[torch.bfloat16], atol=0)
    assert dequant(*make(0, 256)).shape == (0, 256)


def test_opcheck_and_compile():
    acc, a, b = make(4, 256)
    torch.library.opcheck(torch.ops.ptogym.dequant.default, (acc, a, b, torch.float32))
    torch._dynamo.reset()
    got = torch.compile(lambda t: dequant(t, a, b, torch.float32) + 1, fullgraph=True)(acc)
    torch.testing.assert_close(got, dequant_golden(acc, a, b, torch.float32) + 1, rtol=1e-6, atol=0)


BAD = [
    ("acc dtype", lambda acc, a, b: (acc.float(), a, b, torch.bfloat16), TypeError, "x_int32: dtype"),
    ("scale_a dtype", lambda acc, a, b: (acc, a.half(), b, torch.bfloat16), TypeError, "scale_a: dtype"),
    ("out dtype", lambda acc, a, b: (acc, a, b, torch.int8), TypeError, "out_dtype"),
    ("scale_a shape", lambda acc, a, b: (acc, a[:3], b, torch.bfloat16), ValueError, "scale_a: shape"),
    ("scale_b shape", lambda acc, a, b: (acc, a, b[:, :5], torch.bfloat16), ValueError, "scale_b: shape"),
    ("rank 1", lambda acc, a, b: (acc[0], a, b, torch.bfloat16), ValueError, "x_int32: needs at least 2 dims"),
    ("device", lambda acc, a, b: (acc, a.to("meta"), b, torch.bfloat16), ValueError, "scale_a: device"),
]


@pytest.mark.parametrize("label, corrupt, error, message", BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_rejected(label, corrupt, error, message):
    with pytest.raises(error, match=message):
        dequant(*corrupt(*make(4, 256)))
