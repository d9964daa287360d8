"""Public API of RMSNorm + Linear (AT-10), torch.library and ``SPEC``; the argument
rules and launch are shared with RMSNorm + Linear + Quant (AT-11).

``rms_norm_linear(x, gamma, weight, eps=1e-6, *, bias=None)``: x [..., K] bf16/fp16,
gamma [K] and weight [N, K] of x's dtype, bias [N] or None; returns
``(rms_norm(x) * gamma).to(x.dtype) @ weight^T (+ bias)`` in x's dtype, [..., N].
"""
from __future__ import annotations

import math

import torch

from ptogym.atoms import host, measure
from ptogym.atoms.linear import int8_prefill_options, projection_violations
from ptogym.backends.base import LaunchReport
from ptogym.ops import OpSpec
from ptogym.ops.linear.op import flops
from ptogym.tune.table import tuned_params

from . import kernel
from .golden import rms_norm_linear_golden

PATTERNS = ("AT-10", "AT-03", "AT-09", "SK-03")


def rule_violations(x, gamma, weight, eps, *, bias=None, w_scale=None, quant=False, out_dtype=None) -> list:
    """The rules of both fused operators (``quant``: int8 weight with an fp32 w_scale)."""
    problems = host.dtype_rule("x", x, host.HALF_DTYPES) + host.same_dtype_rule("gamma", gamma, "x", x)
    problems += host.dtype_rule("weight", weight, (torch.int8,)) if quant else host.same_dtype_rule(
        "weight", weight, "x", x)
    if out_dtype is not None and out_dtype not in host.FLOAT_DTYPES:
        problems.append((TypeError, f"out_dtype: {out_dtype} unsupported; use one of {list(host.FLOAT_DTYPES)}"))
    if problems:
        return problems
    problems += host.rows_rule("x", x)
    k = x.shape[-1] if x.shape else 0
    problems += host.shape_rule("gamma", gamma, (k,), "[K]")
    if k > kernel.MAX_K:
        problems.append((ValueError, f"x: K={k} > {kernel.MAX_K}: one fp32 row must fit pypto.sum's 64 KB buffer"))
    if len(weight.shape) != 2 or weight.shape[-1] != k:
        return problems + [(ValueError, f"weight: shape {list(weight.shape)} must be [N, K] with K = {k}")]
    n = weight.shape[0]
    if n % 8:
        problems.append((ValueError, f"weight: N={n} must make 32-byte rows of the fp32 accumulator (N % 8 == 0)"))
    element_bytes = 1 if quant else 2
    tuned = tuned_build_params(math.prod(x.shape[:-1]), k, n, element_bytes)
    problems += [(ValueError, message) for message in projection_violations(
        k, n, element_bytes, kernel.block_sizes(k, n, element_bytes, tuned["unroll"]), cube=tuned["cube"],
        k_tile=tuned["k_tile"], n_tile=tuned["n_tile"])]
    if bias is not None:
        problems += host.same_dtype_rule("bias", bias, "x", x) + host.shape_rule("bias", bias, (n,), "[N]")
    if quant:
        problems += host.dtype_rule("w_scale", w_scale, (torch.float32,))
        if tuple(w_scale.shape) not in ((n,), (1, n)):
            problems.append((ValueError, f"w_scale: shape {list(w_scale.shape)} must be [N] or [1, N] with N = {n}"))
    return problems + host.eps_rule(eps)


def tuned_build_params(tokens: int, k: int, n: int, element_bytes: int) -> dict:
    """The tuned table's build parameters for a call (``kernel.TUNING``'s bands)."""
    return tuned_params(kernel, tokens=tokens, k=k, n=n, element_bytes=element_bytes)


def tuning_shape(case) -> dict:
    """The shape a level's calls pass to the tuned table (``tuned_build_params``)."""
    x, weight = case.inputs["x"], case.inputs["weight"]
    return {"tokens": math.prod(x.shape[:-1]), "k": x.shape[-1], "n": weight.shape[0],
            "element_bytes": 1 if weight.dtype == torch.int8 else 2}


def launch(x, gamma, weight, eps=1e-6, *, bias=None, w_scale=None, out_dtype=None, backend=None,
           variant=None) -> tuple[torch.Tensor, LaunchReport]:
    """Validate and run the fused kernel: AT-11 when ``w_scale`` is given, else AT-10."""
    quant = w_scale is not None
    host.check_tensors("rms_norm_linear_quant" if quant else "rms_norm_linear", "x", x=x, gamma=gamma, weight=weight,
                       bias=bias, w_scale=w_scale)
    host.raise_first(rule_violations(x, gamma, weight, eps, bias=bias, w_scale=w_scale, quant=quant,
                                     out_dtype=out_dtype))
    n, k = weight.shape
    out_dtype = out_dtype or x.dtype
    rows = host.as_rows(x)
    y = torch.empty(*x.shape[:-1], n, dtype=out_dtype, device=x.device)
    # the kernel's two signatures (kernel.build's docstring); an absent bias is a None parameter
    if quant:
        tensors, absent = [rows, gamma.view(1, k), weight, w_scale.reshape(1, n), host.as_rows(y)], {}
    elif bias is None:
        tensors, absent = [rows, gamma.view(1, k), weight, host.as_rows(y)], {"bias": None}
    else:
        tensors, absent = [rows, gamma.view(1, k), weight, host.as_rows(y), bias.view(1, n)], {}
    static = {"k": k, "n": n, "dtype": host.HALF_DTYPES[x.dtype], "quant": quant,
              "out_dtype": host.FLOAT_DTYPES[out_dtype], "has_bias": bias is not None,
              **tuned_build_params(rows.shape[0], k, n, 1 if quant else 2),
              **(kernel.VARIANTS[variant] if variant else int8_prefill_options(rows.shape[0]) if quant else {})}
    return y, host.launch(kernel.build, static, tensors, {**absent, "eps": float(eps)}, backend, rows.shape[0])


@torch.library.custom_op("ptogym::rms_norm_linear", mutates_args=())
def _rms_norm_linear_op(x: torch.Tensor, gamma: torch.Tensor, weight: torch.Tensor, eps: float,
                        bias: torch.Tensor | None) -> torch.Tensor:
    return launch(x, gamma, weight, eps, bias=bias)[0]


@_rms_norm_linear_op.register_fake
def _(x, gamma, weight, eps, bias):
    return x.new_empty(*x.shape[:-1], weight.shape[0])


def rms_norm_linear(x, gamma, weight, eps=1e-6, *, bias=None, backend=None):
    """Fused RMSNorm + projection (AT-10); see the module docstring."""
    if not torch.compiler.is_compiling():
        host.check_tensors("rms_norm_linear", "x", x=x, gamma=gamma, weight=weight, bias=bias)
        host.raise_first(rule_violations(x, gamma, weight, eps, bias=bias))
    if backend is None:
        return torch.ops.ptogym.rms_norm_linear(x, gamma, weight, eps, bias)
    return launch(x, gamma, weight, eps, bias=bias, backend=backend)[0]


def make_inputs(case, generator, device="cpu"):
    """host.make_inputs with a float weight scaled by 1/sqrt(K) (outputs O(1), as a trained layer's)."""
    tensors = host.make_inputs(case, generator, device)
    weight = tensors["weight"]
    if weight.is_floating_point():
        tensors["weight"] = (weight.float() * weight.shape[-1] ** -0.5).to(weight.dtype)
    return tensors


def _golden(inputs, attrs):
    return {"y": rms_norm_linear_golden(inputs["x"], inputs["gamma"], inputs["weight"], attrs.get("eps", 1e-6),
                                        inputs.get("bias"))}


def _run(inputs, attrs, backend, variant=None):
    y, report = launch(inputs["x"], inputs["gamma"], inputs["weight"], attrs.get("eps", 1e-6), bias=inputs.get("bias"),
                       backend=backend, variant=variant)
    return {"y": y}, report


def check_case(case, quant=False) -> list[str]:
    """The call rules on a case's inputs (AT-10, or AT-11 with ``quant``)."""
    inputs = case.inputs
    allowed = {"x", "gamma", "weight", "w_scale"} if quant else {"x", "gamma", "weight", "bias"}
    if not {"x", "gamma", "weight"} | ({"w_scale"} if quant else set()) <= set(inputs) <= allowed:
        return [f"inputs must be {sorted(allowed)} (bias optional); got {sorted(inputs)}"]
    out_dtype = getattr(torch, case.attrs["out_dtype"], None) if "out_dtype" in case.attrs else None
    return [m for _, m in rule_violations(inputs["x"], inputs["gamma"], inputs["weight"], case.attrs.get("eps", 1e-6),
                                          bias=inputs.get("bias"), w_scale=inputs.get("w_scale"), quant=quant,
                                          out_dtype=out_dtype)]


def hbm_bytes(case) -> int:
    x, weight = case.inputs["x"], case.inputs["weight"]
    out_dtype = getattr(torch, case.attrs.get("out_dtype", str(x.dtype).removeprefix("torch.")))
    return host.moved_bytes(case, {"y": ((*x.shape[:-1], weight.shape[0]), out_dtype)})


SPEC = OpSpec(
    name="rms_norm_linear",
    description="fused RMSNorm + Linear (AT-10, V->C): fp32 norm, cast, b_trans matmul, one kernel",
    make_inputs=make_inputs,
    golden=_golden,
    run=_run,
    check_case=check_case,
    hbm_bytes=hbm_bytes,
    output_names=("y",),
    attr_names=("eps", "out_dtype"),
    required_levels=("level0", "level1", "level2", "level3", "level4", "level5"),
    extra={"patterns": PATTERNS, "variants": ("upstream",), "flops": flops,
           "sim_summary": measure.summarizer(hbm_bytes, flops),
           "chain": ("rms_norm", "linear"), "tuning_shape": tuning_shape},
)
