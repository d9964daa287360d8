"""Quantised DeepSeek-V4 MLA prolog: the golden's quantisation against its definition,
the kernel (the MLA prolog's, quant=True) against the golden, torch.library, validation."""
import importlib.util

import pytest
import torch

import ptogym.ops
from ptogym.backends._pypto_worker import stop_workers
from ptogym.ops import get_op
from ptogym.ops.mla_prolog_quant.golden import mla_prolog_quant_golden, quantize
from ptogym.ops.mla_prolog_quant.op import INPUT_NAMES, OUTPUT_NAMES, launch, mla_prolog_quant
from ptogym.verify import detailed_tensor_compare
from ptogym.verify.cases import load_cases
from ptogym.verify.runner import make_case_inputs


def case_inputs(level="level1"):
    spec = get_op("mla_prolog_quant")
    case = next(c for c in load_cases(spec.cases_path, spec) if c.id == level)
    return make_case_inputs(spec, case)


def test_golden_quantize_rounds_half_to_even_and_dequantizes():
    x = torch.tensor([[127.0, 0.5, 1.5, -2.5, -127.0, 63.49]])
    values, scale = quantize(x)
    assert values.tolist() == [[127, 0, 2, -2, -127, 63]] and scale.item() == 1.0
    weights = torch.randn(64, 32)
    q, s = quantize(weights, dim=-2)
    assert s.shape == (1, 32) and (q.float() * s - weights).abs().max() <= s.max() / 2 + 1e-6


def test_golden_q_b_is_the_exact_integer_product():
    inputs = case_inputs("level0")
    q, kv, qr, qr_scale = mla_prolog_quant_golden(*[inputs[n] for n in INPUT_NAMES])
    assert qr.dtype == torch.int8 and qr_scale.shape == (1, 1) and qr.abs().max() == 127
    dequantized = qr.double() * qr_scale.double()
    # qr is the per-token int8 image of RMSNorm(x @ wq_a) * gamma_cq: within half a step
    x64 = {k: v.double() for k, v in inputs.items() if v.is_floating_point()}
    qa = x64["x"] @ x64["wq_a"]
    reference = qa / torch.sqrt(qa.pow(2).mean(-1, keepdim=True) + 1e-6) * x64["gamma_cq"]
    assert (dequantized - reference).abs().max() <= qr_scale.double().max() * 0.5 + 1e-4


def _variant_params():
    # upstream's configuration sets a 3-entry k tile ([128, 1024, 512]), which real pypto
    # 0.2.0 accepts (its CubeTile takes 2 or 3 k entries) and so does the interpreter; it
    # also runs under pypto-sim, i.e. pypto's own interpreter
    live = pytest.mark.skipif(importlib.util.find_spec("pypto") is None, reason="real pypto is not installed")
    return [pytest.param(None, "interp"), pytest.param("upstream", "interp"),
            pytest.param("upstream", "pypto-sim", marks=[pytest.mark.pypto, live])]


@pytest.mark.parametrize("variant, backend", _variant_params())
def test_kernel_and_upstream_variant_match_golden_and_leave_inputs_alone(variant, backend):
    inputs = case_inputs("level3")
    before = {k: v.clone() for k, v in inputs.items()}
    try:
        outputs, report = launch(*[inputs[n] for n in INPUT_NAMES], backend=backend, variant=variant)
    finally:
        stop_workers()
    assert report.outputs_valid
    expected = mla_prolog_quant_golden(*[before[n] for n in INPUT_NAMES])
    for name, got, want in zip(OUTPUT_NAMES, outputs, expected):
        result = detailed_tensor_compare(got, want, name, rtol=0.0078125, atol=1e-4, max_error_ratio=0.005,
                                         int_tolerance=1)
        assert result.all_close, result.report()
    assert [t.dtype for t in outputs] == [torch.bfloat16, torch.bfloat16, torch.int8, torch.float32]
    assert all(torch.equal(inputs[k], v) for k, v in before.items())


def test_opcheck():
    inputs = case_inputs("level0")
    torch.library.opcheck(torch.ops.ptogym.mla_prolog_quant.default,
                          tuple(inputs[n] for n in INPUT_NAMES) + (1e-6,))


def test_torch_compile_fullgraph():
    def step(*args):
        q, kv, qr, scale = ptogym.ops.mla_prolog_quant(*args)
        return q.float().sum() + kv.float().sum() + qr.float().sum() + scale.sum()

    torch._dynamo.reset()
    inputs = [case_inputs("level1")[n] for n in INPUT_NAMES]
    assert torch.equal(torch.compile(step, fullgraph=True)(*inputs), step(*inputs))


def _with(name, make):
    return lambda t: {**t, name: make(t)}


BAD_INPUTS = [
    ("float wq_b", _with("wq_b", lambda t: t["wq_b"].bfloat16()), TypeError, "wq_b: dtype"),
    ("scale dtype", _with("wq_b_scale", lambda t: t["wq_b_scale"].half()), TypeError, "wq_b_scale: dtype"),
    ("scale shape", _with("wq_b_scale", lambda t: t["wq_b_scale"].reshape(1, -1)), ValueError, "wq_b_scale: shape"),
    ("wq_b rows", _with("wq_b", lambda t: t["wq_b"][:64]), ValueError, "wq_b: shape"),
    ("x dtype", _with("x", lambda t: t["x"].float()), TypeError, "x: dtype"),
    ("sin", _with("sin", lambda t: t["sin"][:, :32]), ValueError, "sin: shape"),
]


@pytest.mark.parametrize("label, corrupt, error, message", BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_is_rejected(label, corrupt, error, message):
    inputs = {k: v.contiguous() for k, v in corrupt(case_inputs("level1")).items()}
    with pytest.raises(error, match=message):
        mla_prolog_quant(*[inputs[n] for n in INPUT_NAMES])


def test_q_lora_rank_must_fill_int8_blocks():
    inputs = case_inputs("level1")
    inputs = {**inputs, "wq_a": inputs["wq_a"][:, :112].contiguous(), "gamma_cq": inputs["gamma_cq"][:112],
              "wq_b": inputs["wq_b"][:112].contiguous()}
    with pytest.raises(ValueError, match="multiple of 32"):
        mla_prolog_quant(*[inputs[n] for n in INPUT_NAMES])


def _thresholds():
    """(operator, token count) where the tuned table's pass options change."""
    from ptogym.ops.mla_prolog import kernel
    from ptogym.ops.mla_prolog.op import tuned_build_params
    return [(op_name, start) for op_name, quant in (("mla_prolog", False), ("mla_prolog_quant", True))
            for start in kernel.BAND_STARTS
            if tuned_build_params(start, quant)["pass_options"] != tuned_build_params(start - 1, quant)["pass_options"]]


@pytest.mark.parametrize("op_name,tokens", _thresholds())
def test_pass_options_follow_the_token_count_and_leave_the_numbers_alone(op_name, tokens, interp_builds):
    """The operators build the kernel with the tuned table's pass options for T (scheduling
    only: measured per token count), on both sides of each threshold, and compute the
    golden's numbers at the threshold."""
    from ptogym.ops.mla_prolog.op import tuned_build_params

    spec = get_op(op_name)
    quant = op_name == "mla_prolog_quant"
    inputs = make_case_inputs(spec, next(c for c in load_cases(spec.cases_path, spec) if c.id == "level1"))
    for name in ("x", "cos", "sin"):  # small dims, tokens repeated up to the threshold
        inputs[name] = inputs[name].repeat(-(-tokens // inputs[name].shape[0]), 1)[:tokens].contiguous()
    interp, seen = interp_builds
    outputs, _ = spec.run(inputs, {"eps": 1e-6}, interp)
    spec.run({n: t[:tokens - 1] if n in ("x", "cos", "sin") else t for n, t in inputs.items()}, {"eps": 1e-6}, interp)
    options = [s["pass_options"] for s in seen]
    assert options == [tuned_build_params(tokens, quant)["pass_options"],
                       tuned_build_params(tokens - 1, quant)["pass_options"]]
    assert options[0] != options[1]
    expected = spec.golden(inputs, {"eps": 1e-6})
    for name in spec.output_names:
        result = detailed_tensor_compare(outputs[name], expected[name], name, rtol=0.0078125, atol=1e-4,
                                         max_error_ratio=0.005, int_tolerance=1)
        assert result.all_close, result.report()
