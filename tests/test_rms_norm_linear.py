"""RMSNorm + Linear (AT-10): the golden against fp64 and against the chain of its atom
operators, the fused kernel against the golden, torch.library integration and
input validation."""
import pytest
import torch

import ptogym.ops
from ptogym.ops.rms_norm.golden import rms_norm_golden
from ptogym.ops.rms_norm_linear.golden import rms_norm_linear_golden
from ptogym.ops.rms_norm_linear.op import rms_norm_linear
from ptogym.verify import detailed_tensor_compare


def make(t, k, n, dtype=torch.bfloat16, seed=0):
    g = torch.Generator().manual_seed(seed)
    x, gamma = torch.randn(t, k, generator=g).to(dtype), torch.randn(k, generator=g).to(dtype)
    weight = (torch.randn(n, k, generator=g) * k ** -0.5).to(dtype)
    return x, gamma, weight, torch.randn(n, generator=g).to(dtype)


def assert_close(actual, expected, tol=0.0078125):
    result = detailed_tensor_compare(actual, expected, "y", rtol=tol, atol=1e-3, max_error_ratio=0.005)
    assert result["all_close"], result.report()


def test_golden_matches_fp64():
    x, gamma, weight, bias = make(16, 512, 64, torch.float32)
    normed, _ = rms_norm_golden(x.double(), gamma.double(), 1e-6)
    exact = normed @ weight.double().t() + bias.double()
    torch.testing.assert_close(rms_norm_linear_golden(x, gamma, weight, 1e-6, bias).double(), exact,
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("t, k, n, dtype, with_bias", [(1, 256, 64, torch.bfloat16, False),
                                                        (37, 512, 128, torch.float16, True),
                                                        (130, 256, 32, torch.bfloat16, True)])
def test_fused_equals_golden_and_the_chain_of_atoms(t, k, n, dtype, with_bias):
    x, gamma, weight, bias = make(t, k, n, dtype, t)
    bias = bias if with_bias else None
    y = rms_norm_linear(x, gamma, weight, 1e-6, bias=bias)
    assert y.dtype == dtype and y.shape == (t, n)
    assert_close(y, rms_norm_linear_golden(x, gamma, weight, 1e-6, bias))
    chain = ptogym.ops.linear(ptogym.ops.rms_norm(x, gamma, 1e-6), weight, bias)
    assert torch.equal(y, chain)  # the fused kernel rounds exactly where the chain writes to HBM


def test_leading_dims_and_empty():
    x, gamma, weight, _ = make(6, 256, 32)
    y = ptogym.ops.rms_norm_linear(x.view(2, 3, 256), gamma, weight)
    assert y.shape == (2, 3, 32) and torch.equal(y.view(6, 32), rms_norm_linear(x, gamma, weight))
    assert rms_norm_linear(x[:0], gamma, weight).shape == (0, 32)


def test_opcheck_and_compile():
    x, gamma, weight, bias = make(4, 64, 32)
    torch.library.opcheck(torch.ops.ptogym.rms_norm_linear.default, (x, gamma, weight, 1e-6, bias))
    torch._dynamo.reset()
    got = torch.compile(lambda a: rms_norm_linear(a, gamma, weight) + 1, fullgraph=True)(x)
    assert torch.equal(got, rms_norm_linear(x, gamma, weight) + 1)


BAD = {
    "fp32 x": (lambda x, g, w, b: (x.float(), g.float(), w.float()), {}, TypeError, "x: dtype"),
    "gamma dtype": (lambda x, g, w, b: (x, g.half(), w), {}, TypeError, "gamma: dtype"),
    "gamma shape": (lambda x, g, w, b: (x, g[:8], w), {}, ValueError, "gamma: shape"),
    "weight K": (lambda x, g, w, b: (x, g, w[:, :32].contiguous()), {}, ValueError, "weight: shape"),
    "weight N": (lambda x, g, w, b: (x, g, w[:4].contiguous()), {}, ValueError, "weight: N=4"),
    "bias shape": (lambda x, g, w, b: (x, g, w), {"bias": "short"}, ValueError, "bias: shape"),
    "eps": (lambda x, g, w, b: (x, g, w, 0.0), {}, ValueError, "eps"),
    "not a tensor": (lambda x, g, w, b: (x, g.tolist(), w), {}, TypeError, "gamma: expected a torch.Tensor"),
}


@pytest.mark.parametrize("label", list(BAD))
def test_bad_input_is_rejected(label):
    corrupt, kwargs, error, message = BAD[label]
    x, gamma, weight, bias = make(4, 64, 32)
    kwargs = {"bias": bias[:8]} if kwargs else {}
    with pytest.raises(error, match=message):
        rms_norm_linear(*corrupt(x, gamma, weight, bias), **kwargs)
