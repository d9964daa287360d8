"""RMSNorm + Linear + Quant (AT-11): the golden against fp64 and against the chain of
its atom operators, the fused kernel against the golden, torch.library integration
and input validation."""
import pytest
import torch

import ptogym.ops
from ptogym.ops.rms_norm.golden import rms_norm_golden
from ptogym.ops.rms_norm_linear_quant.golden import rms_norm_linear_quant_golden
from ptogym.ops.rms_norm_linear_quant.op import rms_norm_linear_quant
from ptogym.verify import detailed_tensor_compare


def make(t, k, n, dtype=torch.bfloat16, seed=0):
    g = torch.Generator().manual_seed(seed)
    x, gamma = torch.randn(t, k, generator=g).to(dtype), torch.randn(k, generator=g).to(dtype)
    weight = torch.randint(-127, 128, (n, k), generator=g, dtype=torch.int8)
    return x, gamma, weight, torch.rand(n, generator=g) * 0.01 + 1e-3


def test_golden_is_within_the_rounding_bound_of_the_fp64_float_projection():
    """Round to nearest moves each activation by at most half a step (x_scale / 2), so
    |y - exact| <= x_scale / 2 * sum_k |w_int8 * w_scale| (plus fp32 noise)."""
    x, gamma, weight, w_scale = make(16, 512, 64, torch.float32)
    y = rms_norm_linear_quant_golden(x, gamma, weight, w_scale, 1e-6, torch.float32).double()
    normed, _ = rms_norm_golden(x.double(), gamma.double(), 1e-6)
    w = weight.double() * w_scale.double().view(-1, 1)
    exact = normed @ w.t()
    half_step = normed.abs().amax(-1, keepdim=True) / 127 / 2
    bound = half_step * w.abs().sum(-1).view(1, -1)
    assert ((y - exact).abs() <= bound * (1 + 1e-4) + 1e-5).all()
    assert (y - exact).abs().amax() > 0  # it is quantised


@pytest.mark.parametrize("t, k, n, dtype, out_dtype", [(1, 256, 64, torch.bfloat16, torch.bfloat16),
                                                       (37, 512, 128, torch.float16, torch.float32),
                                                       (130, 256, 32, torch.bfloat16, torch.float16)])
def test_fused_equals_golden_and_the_chain_of_atoms(t, k, n, dtype, out_dtype):
    x, gamma, weight, w_scale = make(t, k, n, dtype, t)
    y = rms_norm_linear_quant(x, gamma, weight, w_scale, 1e-6, out_dtype=out_dtype)
    assert y.dtype == out_dtype and y.shape == (t, n)
    result = detailed_tensor_compare(y, rms_norm_linear_quant_golden(x, gamma, weight, w_scale, 1e-6, out_dtype), "y",
                                     rtol=0.0078125, atol=1e-2, max_error_ratio=0.005)
    assert result["all_close"], result.report()
    # the chain: fp32 norm (fp32 in, so nothing is rounded between the atoms), quant, int8 linear
    normed = ptogym.ops.rms_norm(x.float(), gamma.float(), 1e-6)
    x_int8, x_scale = ptogym.ops.per_token_quant(normed)
    chain = ptogym.ops.linear(x_int8, weight, quant_mode="int8_w8a8", x_scale=x_scale, w_scale=w_scale,
                              out_dtype=out_dtype)
    assert torch.equal(y, chain)


def test_opcheck_and_compile():
    x, gamma, weight, w_scale = make(4, 64, 32)
    torch.library.opcheck(torch.ops.ptogym.rms_norm_linear_quant.default,
                          (x, gamma, weight, w_scale, 1e-6, torch.bfloat16))
    torch._dynamo.reset()
    got = torch.compile(lambda a: rms_norm_linear_quant(a, gamma, weight, w_scale) * 2, fullgraph=True)(x)
    assert torch.equal(got, rms_norm_linear_quant(x, gamma, weight, w_scale) * 2)


BAD = {
    "weight float": (lambda x, g, w, s: (x, g, w.to(x.dtype), s), TypeError, "weight_int8: dtype"),
    "w_scale dtype": (lambda x, g, w, s: (x, g, w, s.half()), TypeError, "w_scale: dtype"),
    "w_scale shape": (lambda x, g, w, s: (x, g, w, s[:4]), ValueError, "w_scale: shape"),
    "weight K": (lambda x, g, w, s: (x, g, w[:, :32].contiguous(), s), ValueError, "weight_int8: shape"),
    "x int8": (lambda x, g, w, s: (w, g, w, s), TypeError, "x: dtype"),
    "eps": (lambda x, g, w, s: (x, g, w, s, -1.0), ValueError, "eps"),
}


@pytest.mark.parametrize("label", list(BAD))
def test_bad_input_is_rejected(label):
    corrupt, error, message = BAD[label]
    with pytest.raises(error, match=message):
        rms_norm_linear_quant(*corrupt(*make(4, 64, 32)))


def test_bad_out_dtype():
    with pytest.raises(TypeError, match="out_dtype"):
        rms_norm_linear_quant(*make(4, 64, 32), out_dtype=torch.int8)


def test_prefill_calls_build_with_the_int8_prefill_pass_options(interp_builds):
    """From INT8_PREFILL_TOKENS tokens the operator builds its kernel with the int8 prefill
    pass options (scheduling only), below without; the numbers stay the golden's."""
    from ptogym.atoms.linear import INT8_PREFILL_PASS_OPTIONS, INT8_PREFILL_TOKENS
    from ptogym.ops.rms_norm_linear.op import launch

    interp, seen = interp_builds
    x, gamma, weight, w_scale = make(INT8_PREFILL_TOKENS, 256, 32)
    y, _ = launch(x, gamma, weight, 1e-6, w_scale=w_scale, backend=interp)
    launch(x[:-1], gamma, weight, 1e-6, w_scale=w_scale, backend=interp)
    assert [s.get("pass_options") for s in seen] == [INT8_PREFILL_PASS_OPTIONS, None]
    result = detailed_tensor_compare(y, rms_norm_linear_quant_golden(x, gamma, weight, w_scale, 1e-6), "y",
                                     rtol=0.0078125, atol=1e-2, max_error_ratio=0.005)
    assert result["all_close"], result.report()
