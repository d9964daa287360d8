"""Public API of the quantised DeepSeek-V4 MLA prolog, its torch.library registration and ``SPEC``.

``mla_prolog_quant(x, wq_a, wq_b, wkv, gamma_cq, gamma_ckv, cos, sin, wq_b_scale, eps)``
returns ``(q, kv, qr, qr_scale)``: q, kv in x's dtype, qr int8 and its per-token dequant
scale fp32 [T, 1].  wq_b is int8 with a per-channel scale wq_b_scale [heads * D, 1] fp32
(upstream's layout).  The kernel is the MLA prolog's, built with ``quant=True``.
"""
from __future__ import annotations

import math
from types import SimpleNamespace

import torch

from ptogym.atoms import host, measure
from ptogym.backends import get_backend
from ptogym.backends.base import LaunchReport
from ptogym.ops import OpSpec
from ptogym.ops.mla_prolog import kernel
from ptogym.ops.mla_prolog.op import case_hooks, dims, flops, tuned_build_params, tuning_shape
from ptogym.ops.mla_prolog.op import shape_rule_violations as prolog_rules
from ptogym.ops.rope.op import rotation_matrix

from .golden import mla_prolog_quant_golden, quantize

INPUT_NAMES = ("x", "wq_a", "wq_b", "wkv", "gamma_cq", "gamma_ckv", "cos", "sin", "wq_b_scale")
OUTPUT_NAMES = ("q", "kv", "qr", "qr_scale")
INT8_ALIGN = 32  # an int8 row of qr must fill whole 32-byte blocks


def shape_rule_violations(x, wq_a, wq_b, wkv, gamma_cq, gamma_ckv, cos, sin, wq_b_scale, eps):
    """The bf16 prolog's rules (wq_b's shape judged as if it were x's dtype) plus the int8 ones."""
    as_float = SimpleNamespace(shape=tuple(wq_b.shape), dtype=x.dtype)
    problems = prolog_rules(x, wq_a, as_float, wkv, gamma_cq, gamma_ckv, cos, sin, eps)
    if wq_b.dtype != torch.int8:
        problems.append((TypeError, f"wq_b: dtype {wq_b.dtype} must be torch.int8"))
    if wq_b_scale.dtype != torch.float32:
        problems.append((TypeError, f"wq_b_scale: dtype {wq_b_scale.dtype} must be torch.float32"))
    width = wq_b.shape[1] if len(wq_b.shape) == 2 else 0
    problems += host.shape_rule("wq_b_scale", wq_b_scale, (width, 1), "[heads * D, 1] (one scale per column of wq_b)")
    rank = wq_a.shape[-1] if len(wq_a.shape) else 0
    if rank % INT8_ALIGN:
        problems.append((ValueError, f"wq_a: q_lora_rank {rank} must be a multiple of {INT8_ALIGN} "
                                     "(qr's int8 rows fill 32-byte blocks)"))
    return problems


def validate(*args) -> None:
    """Raise TypeError/ValueError naming the argument and the rule."""
    *tensors, eps = args
    named = dict(zip(INPUT_NAMES, tensors))
    for name, t in named.items():
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    host.raise_first(shape_rule_violations(*tensors, eps))
    host.check_tensors("mla_prolog_quant", "x", **named)


def _outputs(x, d):
    tokens = x.shape[0]
    return (x.new_empty(tokens, d["heads"], d["head_dim"]), x.new_empty(tokens, d["head_dim"]),
            x.new_empty(tokens, d["q_lora_rank"], dtype=torch.int8), x.new_empty(tokens, 1, dtype=torch.float32))


def launch(x, wq_a, wq_b, wkv, gamma_cq, gamma_ckv, cos, sin, wq_b_scale, eps=1e-6, backend=None, variant=None):
    """Validate, then run the kernel; return ((q, kv, qr, qr_scale), launch report)."""
    validate(x, wq_a, wq_b, wkv, gamma_cq, gamma_ckv, cos, sin, wq_b_scale, eps)
    d = dims(x, wq_a, wq_b, gamma_ckv, cos)
    outputs = _outputs(x, d)
    backend = backend if not isinstance(backend, (str, type(None))) else get_backend(backend)
    if x.shape[0] == 0:
        return outputs, LaunchReport(backend=backend.name, wall_s=0.0)
    static = {**d, "dtype": host.HALF_DTYPES[x.dtype], "quant": True,
              **(kernel.QUANT_VARIANTS[variant] if variant else tuned_build_params(x.shape[0], quant=True))}
    tensors = [x, wq_a, wq_b, wkv, gamma_cq.view(1, -1), gamma_ckv.view(1, -1), cos, sin,
               rotation_matrix(d["rope_dim"], "interleave", x.dtype, x.device), wq_b_scale.view(1, -1), *outputs]
    return outputs, backend.launch(kernel.build, static, tensors, {"eps": float(eps)})


@torch.library.custom_op("ptogym::mla_prolog_quant", mutates_args=())
def _mla_prolog_quant_op(x: torch.Tensor, wq_a: torch.Tensor, wq_b: torch.Tensor, wkv: torch.Tensor,
                         gamma_cq: torch.Tensor, gamma_ckv: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                         wq_b_scale: torch.Tensor, eps: float
                         ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    return launch(x, wq_a, wq_b, wkv, gamma_cq, gamma_ckv, cos, sin, wq_b_scale, eps)[0]


@_mla_prolog_quant_op.register_fake
def _(x, wq_a, wq_b, wkv, gamma_cq, gamma_ckv, cos, sin, wq_b_scale, eps):
    return _outputs(x, dims(x, wq_a, wq_b, gamma_ckv, cos))


def mla_prolog_quant(x, wq_a, wq_b, wkv, gamma_cq, gamma_ckv, cos, sin, wq_b_scale, eps=1e-6, *, backend=None):
    """Quantised DeepSeek-V4 MLA prolog; returns (q, kv, qr int8, qr_scale fp32 [T, 1]).

    As ``ptogym.ops.mla_prolog`` except: wq_b is int8 [q_lora_rank, heads * D] with the
    per-channel dequant scale wq_b_scale [heads * D, 1] fp32; qr = RMSNorm(x @ wq_a) *
    gamma_cq is quantised per token (AT-05) and returned as int8 with its scale; q_b is
    the int8 x int8 product, dequantised (AT-06) in fp32 before the per-head norm; q_a
    and kv stay fp32 (not rounded) up to their norms.
    """
    args = (x, wq_a, wq_b, wkv, gamma_cq, gamma_ckv, cos, sin, wq_b_scale, eps)
    if not torch.compiler.is_compiling():
        validate(*args)
    if backend is None:
        return torch.ops.ptogym.mla_prolog_quant(*args)
    return launch(*args, backend=backend)[0]


# --- what the runner, tests and benchmarks need -------------------------------------------
def _make_inputs(case, generator, device="cpu"):
    """Upstream's test data: as the bf16 prolog's, with wq_b ~ U(-0.1, 0.1) quantised per column."""
    specs = case.inputs

    def uniform(name, bound, shape=None):
        return ((torch.rand(shape or specs[name].shape, generator=generator) * 2 - 1) * bound).to(specs["x"].dtype)

    tensors = {"x": uniform("x", 1.0), "wq_a": uniform("wq_a", 0.1), "wkv": uniform("wkv", 0.1),
               "gamma_cq": uniform("gamma_cq", 1.0), "gamma_ckv": uniform("gamma_ckv", 1.0),
               "cos": uniform("cos", 1.0), "sin": uniform("sin", 1.0)}
    wq_b, scale = quantize(uniform("x", 0.1, specs["wq_b"].shape), dim=-2)
    tensors.update(wq_b=wq_b, wq_b_scale=scale.reshape(-1, 1).contiguous())
    return {name: t.to(device) for name, t in tensors.items()}


_golden, _run, _check_case = case_hooks(INPUT_NAMES, OUTPUT_NAMES, mla_prolog_quant_golden, launch,
                                       shape_rule_violations)


def hbm_bytes(case) -> int:
    """Read every input once (the int8 wq_b dominates); write q, kv, qr, qr_scale."""
    specs = case.inputs
    d = dims(*(specs[n] for n in ("x", "wq_a", "wq_b", "gamma_ckv", "cos")))
    read = sum(math.prod(specs[n].shape) * host.element_size(specs[n].dtype) for n in INPUT_NAMES)
    tokens, element = specs["x"].shape[0], host.element_size(specs["x"].dtype)
    return read + tokens * ((d["heads"] + 1) * d["head_dim"] * element + d["q_lora_rank"] + 4)


SPEC = OpSpec(
    name="mla_prolog_quant",
    description="DeepSeek-V4 MLA prolog with int8 q_b (AT-11: norm -> per-token quant -> int8 matmul -> dequant)",
    make_inputs=_make_inputs,
    golden=_golden,
    run=_run,
    check_case=_check_case,
    hbm_bytes=hbm_bytes,
    output_names=OUTPUT_NAMES,
    input_names=INPUT_NAMES,
    attr_names=("eps",),
    required_levels=("level0", "level1"),
    extra={"patterns": ("SK-04", "AT-04"), "variants": tuple(kernel.QUANT_VARIANTS), "sim_summary": measure.summarizer(hbm_bytes, flops),
           "tuning_shape": tuning_shape},
)
