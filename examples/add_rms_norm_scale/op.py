"""Public API of add_rms_norm_scale (the worked example of docs/workflow.md) and its ``SPEC``.

``add_rms_norm_scale(x1, x2, gamma, smooth_scale, eps)`` returns ``(y, x_add)``:
x_add = x1 + x2, y = x_add * rstd * gamma * smooth_scale with rstd the reciprocal RMS
of each row of x_add.  x1, x2: [..., hidden]; gamma, smooth_scale: [hidden]; one dtype
(bf16, fp16, fp32); hidden * element size a multiple of 32 bytes.
"""
from __future__ import annotations

import math
from pathlib import Path

import torch

from ptogym.backends import get_backend
from ptogym.ops import OpSpec

from . import kernel
from .golden import add_rms_norm_scale_golden

SUPPORTED_DTYPES = {torch.bfloat16: "DT_BF16", torch.float16: "DT_FP16", torch.float32: "DT_FP32"}
ALIGN_BYTES = 32
MAX_HIDDEN = 2048  # three fp32 (8, hidden) tiles of the widest op within 192 KB of UB (DESIGN.md)


def rule_violations(x1, x2, gamma, smooth_scale, eps) -> list[str]:
    """dtype/shape/eps rules for anything with .shape and .dtype (tensors or case inputs)."""
    if x1.dtype not in SUPPORTED_DTYPES:
        return [f"x1: dtype {x1.dtype} unsupported; use one of {list(SUPPORTED_DTYPES)}"]
    if len(x1.shape) < 2:
        return [f"x1: needs at least 2 dims [..., hidden], got shape {list(x1.shape)}"]
    hidden = x1.shape[-1]
    problems = [f"{name}: dtype {t.dtype} must equal x1's dtype {x1.dtype}"
                for name, t in (("x2", x2), ("gamma", gamma), ("smooth_scale", smooth_scale)) if t.dtype != x1.dtype]
    if tuple(x2.shape) != tuple(x1.shape):
        problems.append(f"x2: shape {list(x2.shape)} must equal x1's shape {list(x1.shape)}")
    problems += [f"{name}: shape {list(t.shape)} must be [hidden] = [{hidden}]"
                 for name, t in (("gamma", gamma), ("smooth_scale", smooth_scale)) if tuple(t.shape) != (hidden,)]
    element = torch.empty((), dtype=x1.dtype).element_size()
    if hidden * element % ALIGN_BYTES or hidden > MAX_HIDDEN:
        problems.append(f"x1: hidden={hidden}: a row must be a multiple of {ALIGN_BYTES} B and hidden <= {MAX_HIDDEN}")
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not math.isfinite(eps) or eps <= 0:
        problems.append(f"eps: must be a finite number > 0, got {eps!r}")
    return problems


def launch(x1, x2, gamma, smooth_scale, eps=1e-6, backend=None):
    """Validate, run the kernel; return ((y, x_add), launch report)."""
    for name, t in (("x1", x1), ("x2", x2), ("gamma", gamma), ("smooth_scale", smooth_scale)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    for problem in rule_violations(x1, x2, gamma, smooth_scale, eps):
        raise ValueError(problem)
    backend = get_backend(backend) if backend is None or isinstance(backend, str) else backend
    hidden = x1.shape[-1]
    y, x_add = torch.empty_like(x1), torch.empty_like(x1)
    report = backend.launch(
        kernel.build, {"hidden": hidden, "dtype": SUPPORTED_DTYPES[x1.dtype]},
        [x1.contiguous().view(-1, hidden), x2.contiguous().view(-1, hidden), gamma.view(1, hidden),
         smooth_scale.view(1, hidden), y.view(-1, hidden), x_add.view(-1, hidden)], {"eps": float(eps)})
    return (y, x_add), report


def add_rms_norm_scale(x1, x2, gamma, smooth_scale, eps=1e-6, *, backend=None):
    """Residual add + RMSNorm + per-channel smooth scale; returns (y, x_add)."""
    return launch(x1, x2, gamma, smooth_scale, eps, backend)[0]


# --- what the runner, tests and workflow tools need -------------------------------------
def _make_inputs(case, generator, device="cpu"):
    return {name: torch.randn(spec.shape, generator=generator).to(dtype=spec.dtype, device=device)
            for name, spec in case.inputs.items()}


def _golden(inputs, attrs):
    y, x_add = add_rms_norm_scale_golden(inputs["x1"], inputs["x2"], inputs["gamma"], inputs["smooth_scale"],
                                         attrs.get("eps", 1e-6))
    return {"y": y, "x_add": x_add}


def _run(inputs, attrs, backend):
    (y, x_add), report = launch(inputs["x1"], inputs["x2"], inputs["gamma"], inputs["smooth_scale"],
                                attrs.get("eps", 1e-6), backend)
    return {"y": y, "x_add": x_add}, report


def _check_case(case) -> list[str]:
    names = ("x1", "x2", "gamma", "smooth_scale")
    if set(case.inputs) != set(names):
        return [f"inputs must be exactly {', '.join(names)}; got {sorted(case.inputs)}"]
    return rule_violations(*(case.inputs[n] for n in names), case.attrs.get("eps", 1e-6))


def _hbm_bytes(case) -> int:
    x1 = case.inputs["x1"]
    element = torch.empty((), dtype=x1.dtype).element_size()
    return (4 * math.prod(x1.shape) + 2 * x1.shape[-1]) * element


SPEC = OpSpec(
    name="add_rms_norm_scale",
    description="residual add + RMSNorm + per-channel smooth scale (workflow example)",
    make_inputs=_make_inputs,
    golden=_golden,
    run=_run,
    check_case=_check_case,
    hbm_bytes=_hbm_bytes,
    input_names=("x1", "x2", "gamma", "smooth_scale"),
    required_levels=("level0", "level1"),
    cases_file=Path(__file__).with_name("cases.json"),
)
