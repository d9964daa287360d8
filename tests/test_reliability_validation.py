"""Arguments are validated before any kernel runs, alike for every operator and backend:
the cube tiling limits of the projections (N, K) named by argument, meta tensors with
shape-only results, one rule for inputs that require grad, numeric attributes as
Python or numpy scalars, strided read-only inputs where documented.

References are plain torch (``golden.py``) or the rules' own numbers, never the kernel."""
from __future__ import annotations

import math

import numpy
import pytest
import torch

from ptogym import ops
from ptogym.atoms.linear import projection_violations
from ptogym.backends import get_backend
from ptogym.interp import ConstraintViolation
from ptogym.verify.cases import load_cases
from ptogym.verify.runner import make_case_inputs


def smallest_case(spec):
    cases = load_cases(spec.cases_path, spec)
    return min(cases, key=lambda case: sum(t.dtype.itemsize * max(1, math.prod(t.shape)) for t in case.inputs.values()))


@pytest.fixture
def no_kernel_runs(monkeypatch):
    """Every backend's launch fails the test: validation must refuse first."""
    from ptogym.backends.base import BackendBase

    def launch(*args, **kwargs):
        raise AssertionError("a kernel was launched although the arguments break a rule")

    monkeypatch.setattr(BackendBase, "launch", launch)


# ------------------------------------------------------------------ projections: N and K up front
def _int8(*shape):
    return torch.randint(-8, 8, shape, dtype=torch.int8)


def _projection_call(op, n, k, int8):
    x = _int8(4, k) if int8 else torch.randn(4, k).bfloat16()
    weight = _int8(n, k) if int8 else torch.randn(n, k).bfloat16()
    gamma = torch.ones(k).bfloat16()
    if op == "linear":
        extra = dict(quant_mode="int8_w8a8", x_scale=torch.rand(4, 1), w_scale=torch.rand(n)) if int8 else {}
        return lambda **kw: ops.linear(x, weight, **extra, **kw)
    if int8:
        return lambda **kw: ops.rms_norm_linear_quant(torch.randn(4, k).bfloat16(), gamma, weight, torch.rand(n), **kw)
    return lambda **kw: ops.rms_norm_linear(x, gamma, weight, **kw)


@pytest.mark.parametrize("op", ["linear", "rms_norm_linear"])
@pytest.mark.parametrize("n, k, int8", [(24, 256, False), (8, 256, False), (16, 256, True), (40, 256, True),
                                        (128, 65536, False)])
def test_projections_refuse_untileable_weights_naming_weight_before_any_kernel(op, n, k, int8, no_kernel_runs):
    if op == "rms_norm_linear" and k > 8192:
        k = 65536  # rms_norm_linear's own K limit (pypto.sum's buffer) refuses it first, also naming x
        with pytest.raises(ValueError, match=r"^x: K=65536"):
            _projection_call(op, n, k, int8)()
        return
    with pytest.raises(ValueError, match=r"^weight(_int8)?: ") as refused:
        _projection_call(op, n, k, int8)()
    assert f"N={n}" in str(refused.value) or f"K={k}" in str(refused.value)


@pytest.mark.parametrize("element_bytes, n", [(2, 24), (2, 16), (2, 48), (1, 40), (1, 32), (1, 96)])
def test_the_up_front_tile_rule_agrees_with_the_kernel(element_bytes, n):
    """Where the rule refuses, the kernel itself (launched past the operator's
    validation) fails with the interpreter's C-TILE-05; where it accepts, it runs."""
    from ptogym.ops.linear import kernel

    k = 256
    refused = projection_violations(k, n, element_bytes, kernel.block_sizes(k, n, element_bytes))
    int8 = element_bytes == 1
    x = _int8(4, k) if int8 else torch.randn(4, k).bfloat16()
    weight = _int8(n, k) if int8 else torch.randn(n, k).bfloat16()
    y = torch.empty(4, n, dtype=torch.bfloat16)
    static = {"k": k, "n": n, "dtype": "DT_INT8" if int8 else "DT_BF16", "out_dtype": "DT_BF16",
              "quant_mode": "int8_w8a8" if int8 else "none"}
    tensors, scalars = ([x, weight, torch.rand(4, 1), torch.rand(1, n), y], {}) if int8 else ([x, weight, y],
                                                                                             {"bias": None})
    if refused:
        with pytest.raises(ConstraintViolation, match="C-TILE-05"):
            get_backend("interp").launch(kernel.build, static, tensors, scalars)
    else:
        get_backend("interp").launch(kernel.build, static, tensors, scalars)
        if not int8:
            torch.testing.assert_close(y.float(), x.float() @ weight.float().T, rtol=1e-2, atol=0.5)


# ------------------------------------------------------------------ rope: strided read-only inputs
@pytest.mark.parametrize("backend", [None, "interp"])
def test_rope_takes_a_transposed_input_and_returns_it_with_its_strides(backend):
    from ptogym.ops.rope.golden import rope_golden

    x = torch.randn(3, 4, 128).bfloat16().transpose(0, 1)  # [4, 3, 128], not contiguous
    cos, sin = torch.randn(4, 64).bfloat16(), torch.randn(4, 64).bfloat16()
    y = ops.rope(x, cos, sin, layout="half", backend=backend)
    assert y.stride() == torch.empty_like(x).stride()
    torch.testing.assert_close(y.float(), rope_golden(x.contiguous(), cos, sin, "half").float(), rtol=1e-2, atol=1e-2)


# ------------------------------------------------------------------ every operator: meta, requires_grad, eps
@pytest.mark.parametrize("name", ops.OP_NAMES)
def test_meta_tensors_give_shape_only_results(name):
    spec = ops.get_op(name)
    case = smallest_case(spec)
    on_cpu = make_case_inputs(spec, case)
    expected, _ = spec.run({k: v.clone() for k, v in on_cpu.items()}, case.attrs, get_backend("interp"))
    outputs, _ = spec.run(make_case_inputs(spec, case, device="meta"), case.attrs, get_backend("interp"))
    assert {k: (tuple(v.shape), v.dtype, v.device.type) for k, v in outputs.items()} == \
        {k: (tuple(v.shape), v.dtype, "meta") for k, v in expected.items()}


def _first_float_input(inputs: dict) -> str:
    return next(n for n, t in inputs.items() if t.is_floating_point())


@pytest.mark.parametrize("name", ops.OP_NAMES)
def test_an_input_requiring_grad_is_refused_naming_it_and_runs_under_no_grad(name):
    spec = ops.get_op(name)
    case = smallest_case(spec)
    inputs = make_case_inputs(spec, case)
    target = _first_float_input({n: t for n, t in inputs.items() if n not in spec.writes} or inputs)
    inputs[target] = inputs[target].requires_grad_()
    before = {n: t.detach().clone() for n, t in inputs.items()}
    with pytest.raises(ValueError, match=rf"^{target}: requires grad, but {name} has no backward"):
        spec.run(inputs, case.attrs, get_backend("interp"))
    for n, t in inputs.items():
        assert torch.equal(t.detach(), before[n]), f"{n} changed by a refused call"
    with torch.no_grad():
        outputs, _ = spec.run(inputs, case.attrs, get_backend("interp"))
    assert not any(t.requires_grad for t in outputs.values())


@pytest.mark.parametrize("name", ["rms_norm", "inplace_add_rms_norm"])
@pytest.mark.parametrize("call", ["public", "torch.ops"])
def test_requires_grad_is_one_rule_on_every_path(name, call):
    """The same refusal with backend=None (torch.library) as with a named backend."""
    x = torch.randn(2, 256).requires_grad_()
    gamma = torch.ones(256)
    with pytest.raises(ValueError, match=r"^(x|x1): requires grad|^x1: a leaf Variable"):
        if name == "rms_norm":
            ops.rms_norm(x, gamma, backend=None if call == "torch.ops" else "interp")
        else:
            ops.inplace_add_rms_norm(x, torch.randn(2, 256), gamma, backend=None if call == "torch.ops" else "interp")


EPS_OPS = [name for name in ops.OP_NAMES if "eps" in (ops.get_op(name).attr_names or ())]


@pytest.mark.parametrize("name", EPS_OPS)
@pytest.mark.parametrize("eps", [numpy.float32(1e-6), numpy.float64(1e-5), 1, numpy.int64(1)])
def test_eps_takes_python_and_numpy_scalars(name, eps):
    spec = ops.get_op(name)
    case = smallest_case(spec)
    inputs = make_case_inputs(spec, case)
    expected = spec.golden({k: v.clone() for k, v in inputs.items()}, {**case.attrs, "eps": float(eps)})
    outputs, _ = spec.run(inputs, {**case.attrs, "eps": eps}, get_backend("interp"))
    assert set(outputs) == set(expected)


@pytest.mark.parametrize("name", EPS_OPS)
@pytest.mark.parametrize("eps, error, wording", [
    (10**400, ValueError, "overflows a float"), (float("nan"), ValueError, "finite number > 0"),
    (float("inf"), ValueError, "finite number > 0"), (-1e-6, ValueError, "finite number > 0"),
    (True, TypeError, "must be a real number"), (numpy.bool_(True), TypeError, "must be a real number"),
    ("1e-6", TypeError, "must be a real number")])
def test_eps_refuses_bools_non_finite_and_overflow_naming_eps(name, eps, error, wording, no_kernel_runs):
    spec = ops.get_op(name)
    case = smallest_case(spec)
    inputs = make_case_inputs(spec, case)
    before = {n: t.clone() for n, t in inputs.items()}
    with pytest.raises(error, match=rf"^eps: .*{wording}"):
        spec.run(inputs, {**case.attrs, "eps": eps}, get_backend("interp"))
    for n, t in inputs.items():
        assert torch.equal(t, before[n])
