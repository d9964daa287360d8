"""Public API of dequantisation (AT-06), torch.library and ``SPEC``.

``dequant(x_int32, scale_a, scale_b, out_dtype=torch.bfloat16)``: x_int32 [..., N]
int32 (an int8 matmul's accumulator); scale_a [..., 1] fp32 (per token); scale_b
[1, N] fp32 (per channel) or [..., 1] (per token); returns
``out_dtype(float32(x_int32) * scale_a * scale_b)``.
"""
from __future__ import annotations

import math

import torch

from ptogym.atoms import host, measure
from ptogym.backends.base import LaunchReport
from ptogym.ops import OpSpec
from ptogym.tune.table import tuned_params

from . import kernel
from .golden import dequant_golden

PATTERNS = ("AT-06",)


def rule_violations(x_int32, scale_a, scale_b, out_dtype) -> list:
    problems = host.dtype_rule("x_int32", x_int32, (torch.int32,))
    problems += host.dtype_rule("scale_a", scale_a, (torch.float32,))
    problems += host.dtype_rule("scale_b", scale_b, (torch.float32,))
    if out_dtype not in host.FLOAT_DTYPES:
        problems.append((TypeError, f"out_dtype: {out_dtype} unsupported; use one of {list(host.FLOAT_DTYPES)}"))
    problems += host.rows_rule("x_int32", x_int32)
    if problems:
        return problems
    per_token = (*x_int32.shape[:-1], 1)
    problems += host.shape_rule("scale_a", scale_a, per_token, "[..., 1]")
    if tuple(scale_b.shape) not in (per_token, (1, x_int32.shape[-1])):
        problems.append((ValueError, f"scale_b: shape {list(scale_b.shape)} must be [1, N] = "
                                     f"{[1, x_int32.shape[-1]]} or [..., 1] = {list(per_token)}"))
    if x_int32.shape[-1] > kernel.MAX_N:
        problems.append((ValueError, f"x_int32: N={x_int32.shape[-1]} > {kernel.MAX_N} (one fp32 row per tile)"))
    return problems


def validate(x_int32, scale_a, scale_b, out_dtype) -> None:
    host.check_tensors("dequant", "x_int32", x_int32=x_int32, scale_a=scale_a, scale_b=scale_b)
    host.raise_first(rule_violations(x_int32, scale_a, scale_b, out_dtype))


def tuning_shape(case) -> dict:
    """The shape a level's calls pass to the tuned table (``launch``'s ``tuned_params``)."""
    acc, cols = case.inputs["x_int32"], case.inputs["x_int32"].shape[-1]
    return {"rows": math.prod(acc.shape[:-1]), "cols": cols, "out_dtype": host.FLOAT_DTYPES[_out_dtype(case.attrs)],
            "per_token_b": tuple(case.inputs["scale_b"].shape) != (1, cols)}


def launch(x_int32, scale_a, scale_b, out_dtype=torch.bfloat16, backend=None) -> tuple[torch.Tensor, LaunchReport]:
    validate(x_int32, scale_a, scale_b, out_dtype)
    cols = x_int32.shape[-1]
    rows = host.as_rows(x_int32)
    per_token_b = tuple(scale_b.shape) != (1, cols)
    out = torch.empty(x_int32.shape, dtype=out_dtype, device=x_int32.device)
    static = {"cols": cols, "out_dtype": host.FLOAT_DTYPES[out_dtype], "per_token_b": per_token_b}
    static.update(host.with_row_blocks(tuned_params(kernel, rows=rows.shape[0], **static), rows.shape[0]))
    scale_b_rows = scale_b.reshape(-1, 1) if per_token_b else scale_b
    report = host.launch(kernel.build, static, [rows, scale_a.reshape(-1, 1), scale_b_rows, host.as_rows(out)], {},
                         backend, rows.shape[0])
    return out, report


@torch.library.custom_op("ptogym::dequant", mutates_args=())
def _dequant_op(x_int32: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor,
                out_dtype: torch.dtype) -> torch.Tensor:
    return launch(x_int32, scale_a, scale_b, out_dtype)[0]


@_dequant_op.register_fake
def _(x_int32, scale_a, scale_b, out_dtype):
    return torch.empty_like(x_int32, dtype=out_dtype)


def dequant(x_int32, scale_a, scale_b, out_dtype=torch.bfloat16, *, backend=None):
    """out_dtype(float32(x_int32) * scale_a * scale_b); see the module docstring for shapes."""
    if not torch.compiler.is_compiling():
        validate(x_int32, scale_a, scale_b, out_dtype)
    if backend is None:
        return torch.ops.ptogym.dequant(x_int32, scale_a, scale_b, out_dtype)
    return launch(x_int32, scale_a, scale_b, out_dtype, backend)[0]


def _out_dtype(attrs):
    return getattr(torch, attrs.get("out_dtype", "bfloat16"))


def _golden(inputs, attrs):
    return {"out": dequant_golden(inputs["x_int32"], inputs["scale_a"], inputs["scale_b"], _out_dtype(attrs))}


def _run(inputs, attrs, backend, variant=None):
    out, report = launch(inputs["x_int32"], inputs["scale_a"], inputs["scale_b"], _out_dtype(attrs), backend)
    return {"out": out}, report


def _check_case(case) -> list[str]:
    out_dtype = getattr(torch, str(case.attrs.get("out_dtype", "bfloat16")), None)
    return [m for _, m in rule_violations(case.inputs["x_int32"], case.inputs["scale_a"], case.inputs["scale_b"],
                                          out_dtype)]


def hbm_bytes(case) -> int:
    acc = case.inputs["x_int32"]
    return host.moved_bytes(case, {"out": (acc.shape, _out_dtype(case.attrs))})


SPEC = OpSpec(
    name="dequant",
    description="dequantisation (AT-06) of an int32 matmul accumulator with per-token and per-channel scales",
    make_inputs=host.make_inputs,
    golden=_golden,
    run=_run,
    check_case=_check_case,
    hbm_bytes=hbm_bytes,
    output_names=("out",),
    input_names=("x_int32", "scale_a", "scale_b"),
    attr_names=("out_dtype",),
    required_levels=("level0", "level1", "level2", "level3", "level4", "level5"),
    extra={"patterns": PATTERNS, "sim_summary": measure.summarizer(hbm_bytes), "tuning_shape": tuning_shape},
)
