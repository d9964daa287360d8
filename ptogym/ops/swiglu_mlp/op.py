"""Public API of the SwiGLU MLP (AT-07 / SK-06), torch.library and ``SPEC``.

``swiglu_mlp(x, w_gate, w_up, w_down)`` returns y = (silu(x W_gate^T) * (x W_up^T))
W_down^T for x [..., H] (any number of tokens, zero included), w_gate and w_up
[I, H], w_down [H, I] (nn.Linear's layout), all bf16 or all fp16.  fp32 accumulation
on the cube; gate, up, silu(gate), the product h and y are each rounded to x's dtype,
as the model's bf16/fp16 modules (Hugging Face ``Qwen3MLP``) round every op's result.

torch.library: ``ptogym::swiglu_mlp(Tensor x, Tensor w_gate, Tensor w_up, Tensor
w_down) -> Tensor``.
"""
from __future__ import annotations

import math

import torch

from ptogym.atoms import host, measure
from ptogym.backends.base import LaunchReport
from ptogym.ops import OpSpec
from ptogym.tune.table import tuned_params

from . import kernel
from .golden import swiglu_mlp_golden

PATTERNS = ("AT-07", "SK-06", "SK-14")
INPUT_NAMES = ("x", "w_gate", "w_up", "w_down")


def rule_violations(x, w_gate, w_up, w_down) -> list:
    """Every dtype and shape rule, as (exception type, message) pairs."""
    problems = host.dtype_rule("x", x, tuple(host.HALF_DTYPES))
    for name, t in (("w_gate", w_gate), ("w_up", w_up), ("w_down", w_down)):
        problems += host.same_dtype_rule(name, t, "x", x) if not problems else []
    if problems:
        return problems
    if len(x.shape) < 2 or x.shape[-1] == 0:
        return [(ValueError, f"x: needs at least 2 dims [..., H] with H >= 1, got shape {list(x.shape)}")]
    hidden = x.shape[-1]
    if len(w_gate.shape) != 2 or w_gate.shape[1] != hidden:
        return [(ValueError, f"w_gate: shape {list(w_gate.shape)} must be [I, H] with H = x's last dim {hidden}")]
    inter = w_gate.shape[0]
    problems += host.shape_rule("w_up", w_up, (inter, hidden), "w_gate's shape [I, H]")
    problems += host.shape_rule("w_down", w_down, (hidden, inter), "[H, I]")
    if inter == 0:
        problems.append((ValueError, "w_gate: I = 0"))
    return problems


def validate(x, w_gate, w_up, w_down) -> None:
    """Raise TypeError/ValueError naming the argument and the rule."""
    host.check_tensors("swiglu_mlp", "x", x=x, w_gate=w_gate, w_up=w_up, w_down=w_down)
    host.raise_first(rule_violations(x, w_gate, w_up, w_down))


def launch(x, w_gate, w_up, w_down, backend=None, variant=None) -> tuple[torch.Tensor, LaunchReport]:
    validate(x, w_gate, w_up, w_down)
    y = torch.empty_like(x)
    rows = host.as_rows(x)
    (inter, hidden), tokens = w_gate.shape, rows.shape[0]
    h, i = host.aligned(hidden), host.aligned(inter)  # cube tiles need 32-byte n extents: odd sizes are padded
    static = {"hidden": h, "inter": i, "dtype": host.HALF_DTYPES[x.dtype],
              **tuned_params(kernel, tokens=tokens, hidden=h, inter=i), **kernel.VARIANTS.get(variant, {})}
    y_rows = host.as_rows(y) if h == hidden else y.new_empty(tokens, h)
    report = host.launch(kernel.build, static, [host.zero_padded(rows, (tokens, h)), host.zero_padded(w_gate, (i, h)),
                                                host.zero_padded(w_up, (i, h)), host.zero_padded(w_down, (h, i)),
                                                y_rows], {}, backend, tokens)
    if h != hidden:
        host.as_rows(y).copy_(y_rows[:, :hidden])
    return y, report


@torch.library.custom_op("ptogym::swiglu_mlp", mutates_args=())
def _swiglu_mlp_op(x: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor, w_down: torch.Tensor) -> torch.Tensor:
    return launch(x, w_gate, w_up, w_down)[0]


@_swiglu_mlp_op.register_fake
def _(x, w_gate, w_up, w_down):
    return torch.empty_like(x)


def swiglu_mlp(x, w_gate, w_up, w_down, *, backend=None):
    """y = (silu(x W_gate^T) * (x W_up^T)) W_down^T; see the module docstring."""
    if not torch.compiler.is_compiling():
        validate(x, w_gate, w_up, w_down)
    if backend is None:
        return torch.ops.ptogym.swiglu_mlp(x, w_gate, w_up, w_down)
    return launch(x, w_gate, w_up, w_down, backend)[0]


# --- what the runner, tests and benchmarks need -------------------------------------------
def tuning_shape(case) -> dict:
    """The shape a level's call passes to the tuned table (``launch``: padded extents)."""
    x, w_gate = case.inputs["x"], case.inputs["w_gate"]
    return {"tokens": math.prod(x.shape[:-1]), "hidden": host.aligned(x.shape[-1]),
            "inter": host.aligned(w_gate.shape[0])}


def make_inputs(case, generator, device="cpu"):
    """x ~ N(0, 1); weights ~ N(0, 1/fan_in) (a trained layer's scale: every projection
    keeps O(1) outputs)."""
    tensors = host.make_inputs(case, generator, device)
    for name in ("w_gate", "w_up", "w_down"):
        fan_in = tensors[name].shape[-1]
        tensors[name] = (tensors[name].float() * fan_in ** -0.5).to(tensors[name].dtype)
    return tensors


def _golden(inputs, attrs):
    return {"y": swiglu_mlp_golden(*(inputs[n] for n in INPUT_NAMES))}


def _run(inputs, attrs, backend, variant=None):
    y, report = launch(*(inputs[n] for n in INPUT_NAMES), backend=backend, variant=variant)
    return {"y": y}, report


def _check_case(case) -> list[str]:
    return host.case_violations(case, INPUT_NAMES, rule_violations)


def hbm_bytes(case) -> int:
    x = case.inputs["x"]
    return host.moved_bytes(case, {"y": (x.shape, x.dtype)})


def flops(case) -> int:
    """2 * rows * H * I for each of the three projections."""
    x, w_gate = case.inputs["x"], case.inputs["w_gate"]
    return 3 * 2 * math.prod(x.shape[:-1]) * w_gate.shape[0] * w_gate.shape[1]


SPEC = OpSpec(
    name="swiglu_mlp",
    description="SwiGLU MLP (AT-07, SK-06): gate/up projections, silu(gate) * up, down projection in one kernel",
    make_inputs=make_inputs,
    golden=_golden,
    run=_run,
    check_case=_check_case,
    hbm_bytes=hbm_bytes,
    input_names=INPUT_NAMES,
    output_names=("y",),
    attr_names=(),
    required_levels=("level0", "level1", "level2", "level3"),
    extra={"patterns": PATTERNS, "variants": ("upstream",), "flops": flops, "tuning_shape": tuning_shape,
           "sim_summary": measure.summarizer(hbm_bytes, flops)},
)
