"""Public API of RMSNorm (AT-03), its torch.library registration and its ``SPEC``.

``rms_norm(x, gamma=None, eps=1e-6, *, bias=None, rsqrt_mode="rsqrt",
output_rstd=False)`` returns y (x's dtype), or (y, rstd) with rstd [..., 1] fp32.

torch.library: ``ptogym::rms_norm(Tensor x, Tensor? gamma, float eps, Tensor? bias,
str rsqrt_mode) -> (Tensor, Tensor)`` always returns both; the Python function drops
rstd unless asked.
"""
from __future__ import annotations

import math

import torch

from ptogym.atoms import host, measure
from ptogym.atoms.rms_norm import RSQRT_MODES
from ptogym.backends.base import LaunchReport
from ptogym.ops import OpSpec
from ptogym.tune.table import tuned_params

from . import kernel
from .golden import rms_norm_golden

PATTERNS = ("AT-03",)


def rule_violations(x, gamma, bias, eps, rsqrt_mode) -> list:
    """Dtype, shape, eps and mode rules for tensors or case specs (gamma/bias may be None)."""
    problems = host.dtype_rule("x", x, host.FLOAT_DTYPES)
    if problems:
        return problems
    problems += host.rows_rule("x", x)
    for name, t in (("gamma", gamma), ("bias", bias)):
        if t is not None:
            problems += host.same_dtype_rule(name, t, "x", x)
            problems += host.shape_rule(name, t, (x.shape[-1],), "[D]")
    if x.shape and x.shape[-1] > kernel.MAX_D:
        problems.append((ValueError, f"x: D={x.shape[-1]} > {kernel.MAX_D}: one fp32 row must fit "
                                     "pypto.sum's 64 KB reduction buffer"))
    return problems + host.eps_rule(eps) + host.choice_rule("rsqrt_mode", rsqrt_mode, RSQRT_MODES)


def validate(x, gamma, bias, eps, rsqrt_mode) -> None:
    """Raise TypeError/ValueError naming the argument and the rule."""
    host.check_tensors("rms_norm", "x", x=x, gamma=gamma, bias=bias)
    host.raise_first(rule_violations(x, gamma, bias, eps, rsqrt_mode))


def tuning_shape(case) -> dict:
    """The shape a level's calls pass to the tuned table (``launch``'s ``tuned_params``)."""
    x = case.inputs["x"]
    return {"rows": math.prod(x.shape[:-1]), "hidden": x.shape[-1], "dtype": host.FLOAT_DTYPES[x.dtype]}


def launch(x, gamma=None, eps=1e-6, bias=None, rsqrt_mode="rsqrt", backend=None,
           variant=None) -> tuple[torch.Tensor, torch.Tensor, LaunchReport]:
    """Validate and run the kernel; return (y, rstd, launch report)."""
    validate(x, gamma, bias, eps, rsqrt_mode)
    hidden = x.shape[-1]
    rows = host.as_rows(x)
    y = torch.empty_like(x)
    rstd = torch.empty(*x.shape[:-1], 1, dtype=torch.float32, device=x.device)
    if gamma is None and bias is not None:  # the kernel takes gamma before bias: ones multiply exactly
        gamma = torch.ones(hidden, dtype=x.dtype, device=x.device)
    weights = {name: t.view(1, hidden) for name, t in (("gamma", gamma), ("bias", bias)) if t is not None}
    dtype = host.FLOAT_DTYPES[x.dtype]
    tuned = host.with_row_blocks(tuned_params(kernel, rows=rows.shape[0], hidden=hidden, dtype=dtype), rows.shape[0])
    static = {"hidden": hidden, "dtype": dtype, "has_gamma": "gamma" in weights, "has_bias": "bias" in weights,
              "rsqrt_mode": rsqrt_mode, **tuned, **kernel.VARIANTS.get(variant, {})}
    absent = {name: None for name in ("gamma", "bias") if name not in weights}  # the kernel's None parameters
    report = host.launch(kernel.build, static, [rows, host.as_rows(y), rstd.view(-1, 1), *weights.values()],
                         {**absent, "eps": float(eps)}, backend, rows.shape[0])
    return y, rstd, report


@torch.library.custom_op("ptogym::rms_norm", mutates_args=())
def _rms_norm_op(x: torch.Tensor, gamma: torch.Tensor | None, eps: float, bias: torch.Tensor | None,
                 rsqrt_mode: str) -> tuple[torch.Tensor, torch.Tensor]:
    y, rstd, _ = launch(x, gamma, eps, bias, rsqrt_mode)
    return y, rstd


@_rms_norm_op.register_fake
def _(x, gamma, eps, bias, rsqrt_mode):
    return torch.empty_like(x), x.new_empty(*x.shape[:-1], 1, dtype=torch.float32)


def rms_norm(x, gamma=None, eps=1e-6, *, bias=None, rsqrt_mode="rsqrt", output_rstd=False, backend=None):
    """RMSNorm over the last dim: y = x / sqrt(mean(x^2) + eps) [* gamma] [+ bias].

    x [..., D] bf16/fp16/fp32, computed in fp32, y in x's dtype; gamma, bias [D] of
    x's dtype or None; rsqrt_mode "rsqrt" (one rsqrt) or "sqrt_div" (1 / sqrt).
    Returns y, or (y, rstd) with ``output_rstd`` (rstd [..., 1] fp32).
    """
    if not torch.compiler.is_compiling():  # traced calls see fake tensors; the kernel call validates
        validate(x, gamma, bias, eps, rsqrt_mode)
    if backend is None:
        y, rstd = torch.ops.ptogym.rms_norm(x, gamma, eps, bias, rsqrt_mode)
    else:
        y, rstd, _ = launch(x, gamma, eps, bias, rsqrt_mode, backend)
    return (y, rstd) if output_rstd else y


# --- what the runner, tests and benchmarks need -------------------------------------------
def _attrs(attrs):
    return attrs.get("eps", 1e-6), attrs.get("rsqrt_mode", "rsqrt")


def _golden(inputs, attrs):
    eps, mode = _attrs(attrs)
    y, rstd = rms_norm_golden(inputs["x"], inputs.get("gamma"), eps, inputs.get("bias"), mode)
    return {"y": y, "rstd": rstd}


def _run(inputs, attrs, backend, variant=None):
    eps, mode = _attrs(attrs)
    y, rstd, report = launch(inputs["x"], inputs.get("gamma"), eps, inputs.get("bias"), mode, backend, variant)
    return {"y": y, "rstd": rstd}, report


def _check_case(case) -> list[str]:
    names = set(case.inputs)
    if "x" not in names or not names <= {"x", "gamma", "bias"}:
        return [f"inputs must be x and optionally gamma, bias; got {sorted(names)}"]
    eps, mode = _attrs(case.attrs)
    return [m for _, m in rule_violations(case.inputs["x"], case.inputs.get("gamma"), case.inputs.get("bias"),
                                          eps, mode)]


def hbm_bytes(case) -> int:
    """Read x (+ gamma, bias); write y and rstd (fp32)."""
    x = case.inputs["x"]
    return host.moved_bytes(case, {"y": (x.shape, x.dtype), "rstd": ((*x.shape[:-1], 1), torch.float32)})


SPEC = OpSpec(
    name="rms_norm",
    description="RMSNorm (AT-03): rsqrt or sqrt+div, optional gamma/bias, fp32 inside, optional rstd",
    make_inputs=host.make_inputs,
    golden=_golden,
    run=_run,
    check_case=_check_case,
    hbm_bytes=hbm_bytes,
    output_names=("y", "rstd"),
    attr_names=("eps", "rsqrt_mode"),
    required_levels=("level0", "level1", "level2", "level3", "level4", "level5"),
    extra={"patterns": PATTERNS, "variants": ("upstream",), "sim_summary": measure.summarizer(hbm_bytes),
           "tuning_shape": tuning_shape},
)
