"""Public API of RMSNorm + Linear + Quant (AT-11), torch.library and ``SPEC``.

``rms_norm_linear_quant(x, gamma, weight_int8, w_scale, eps=1e-6, *,
out_dtype=torch.bfloat16)``: x [..., K] bf16/fp16, gamma [K] of x's dtype,
weight_int8 [N, K] int8, w_scale [N] (or [1, N]) fp32 per-channel weight scale;
returns [..., N] in out_dtype:

    normed = rms_norm(x) * gamma            fp32
    x_int8, x_scale = per_token_quant(normed)
    y = (x_int8 @ weight_int8^T) * x_scale * w_scale

Rules and launch are shared with ``rms_norm_linear`` (one kernel builder, ``quant``).
"""
from __future__ import annotations

import torch

from ptogym.atoms import host, measure
from ptogym.ops import OpSpec
from ptogym.ops.linear.op import flops
from ptogym.ops.rms_norm_linear import op as norm_linear

from .golden import rms_norm_linear_quant_golden

PATTERNS = ("AT-11", "AT-03", "AT-05", "AT-06", "AT-09", "SK-03")


def _validate(x, gamma, weight_int8, w_scale, eps, out_dtype):
    host.check_tensors("rms_norm_linear_quant", "x", x=x, gamma=gamma, weight_int8=weight_int8, w_scale=w_scale)
    problems = norm_linear.rule_violations(x, gamma, weight_int8, eps, w_scale=w_scale, quant=True,
                                           out_dtype=out_dtype)
    host.raise_first([(e, m.replace("weight:", "weight_int8:", 1)) for e, m in problems])


@torch.library.custom_op("ptogym::rms_norm_linear_quant", mutates_args=())
def _rms_norm_linear_quant_op(x: torch.Tensor, gamma: torch.Tensor, weight_int8: torch.Tensor,
                              w_scale: torch.Tensor, eps: float, out_dtype: torch.dtype) -> torch.Tensor:
    return norm_linear.launch(x, gamma, weight_int8, eps, w_scale=w_scale, out_dtype=out_dtype)[0]


@_rms_norm_linear_quant_op.register_fake
def _(x, gamma, weight_int8, w_scale, eps, out_dtype):
    return x.new_empty(*x.shape[:-1], weight_int8.shape[0], dtype=out_dtype)


def rms_norm_linear_quant(x, gamma, weight_int8, w_scale, eps=1e-6, *, out_dtype=torch.bfloat16, backend=None):
    """Fused RMSNorm + per-token int8 quant + int8 projection + dequant (AT-11)."""
    if not torch.compiler.is_compiling():
        _validate(x, gamma, weight_int8, w_scale, eps, out_dtype)
    if backend is None:
        return torch.ops.ptogym.rms_norm_linear_quant(x, gamma, weight_int8, w_scale, eps, out_dtype)
    return norm_linear.launch(x, gamma, weight_int8, eps, w_scale=w_scale, out_dtype=out_dtype, backend=backend)[0]


def _out_dtype(attrs):
    return getattr(torch, attrs.get("out_dtype", "bfloat16"))


def _golden(inputs, attrs):
    return {"y": rms_norm_linear_quant_golden(inputs["x"], inputs["gamma"], inputs["weight"], inputs["w_scale"],
                                              attrs.get("eps", 1e-6), _out_dtype(attrs))}


def _run(inputs, attrs, backend, variant=None):
    y, report = norm_linear.launch(inputs["x"], inputs["gamma"], inputs["weight"], attrs.get("eps", 1e-6),
                                   w_scale=inputs["w_scale"], out_dtype=_out_dtype(attrs), backend=backend,
                                   variant=variant)
    return {"y": y}, report


def hbm_bytes(case) -> int:
    x, weight = case.inputs["x"], case.inputs["weight"]
    return host.moved_bytes(case, {"y": ((*x.shape[:-1], weight.shape[0]), _out_dtype(case.attrs))})


SPEC = OpSpec(
    name="rms_norm_linear_quant",
    description="fused RMSNorm + per-token int8 quant + int8 Linear + dequant (AT-11, V->C->V), one kernel",
    make_inputs=host.make_inputs,
    golden=_golden,
    run=_run,
    check_case=lambda case: norm_linear.check_case(case, quant=True),
    hbm_bytes=hbm_bytes,
    output_names=("y",),
    attr_names=("eps", "out_dtype"),
    required_levels=("level0", "level1", "level2", "level3", "level4", "level5"),
    extra={"patterns": PATTERNS, "variants": ("upstream",), "flops": flops, "tuning_shape": norm_linear.tuning_shape,
           "sim_summary": measure.summarizer(hbm_bytes, flops),
           "chain": ("rms_norm", "per_token_quant", "linear")},
)
