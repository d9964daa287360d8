"""Public API of flash attention (prefill, SK-01), its torch.library registration and ``SPEC``.

``flash_attention(q, k, v, *, causal=False, scale=None, return_lse=False)`` returns
out [B, Sq, Hq, D] (q's dtype), or (out, lse) with lse [B, Hq, Sq] fp32.

torch.library: ``ptogym::flash_attention(Tensor q, Tensor k, Tensor v, bool causal,
float scale) -> (Tensor, Tensor)`` always returns both; the Python function drops lse
unless asked.
"""
from __future__ import annotations

import math
import numbers

import numpy as np
import torch

from ptogym.atoms import host, measure
from ptogym.atoms.attention import MASKED
from ptogym.backends.base import LaunchReport
from ptogym.ops import OpSpec
from ptogym.tune.table import tuned_params

from . import kernel
from .golden import causal_mask, flash_attention_golden

HEAD_DIMS = (64, 128, 256)
INPUT_NAMES = ("q", "k", "v")


def rule_violations(q, k, v, causal, scale) -> list:
    """Dtype, shape and attribute rules for tensors or case specs, as (exception, message) pairs."""
    problems = host.dtype_rule("q", q, host.HALF_DTYPES)
    if problems:
        return problems
    problems += host.same_dtype_rule("k", k, "q", q) + host.same_dtype_rule("v", v, "q", q)
    for name, t in (("q", q), ("k", k), ("v", v)):
        if len(t.shape) != 4:
            problems.append((ValueError, f"{name}: needs shape [B, S, H, D], got {list(t.shape)}"))
    if problems:
        return problems
    (batch, _, heads, head_dim), (_, kv_len, kv_heads, _) = q.shape, k.shape
    problems += host.shape_rule("k", k, (batch, kv_len, kv_heads, head_dim), "[B, Skv, Hkv, D] with q's B and D")
    problems += host.shape_rule("v", v, tuple(k.shape), "k's shape [B, Skv, Hkv, D]")
    if head_dim not in HEAD_DIMS:
        problems.append((ValueError, f"q: head dim D = {head_dim} is not one of {list(HEAD_DIMS)}"))
    if kv_heads == 0 or heads % kv_heads:
        problems.append((ValueError, f"k: Hq = {heads} query heads must be a non-zero multiple of Hkv = {kv_heads} "
                                     "kv heads (grouped-query attention)"))
    if kv_len == 0 and batch * q.shape[1] * heads:
        problems.append((ValueError, "k: Skv = 0: attention needs at least one key"))
    for name, t in (("q", q), ("k", k)):
        if math.prod(t.shape) > host.INT32_MAX:
            problems.append((ValueError, f"{name}: {math.prod(t.shape)} elements > {host.INT32_MAX}; "
                                         "PyPTO shapes are int32-sized"))
    return problems + host.flag_rule("causal", causal) + scale_rule(scale)


def scale_rule(scale) -> list:
    """``scale``: None or a finite real number (numpy scalars included; an int too large for
    a float is refused, not an OverflowError), as (exception, message) pairs."""
    finite = False
    if scale is not None and isinstance(scale, numbers.Real) and not isinstance(scale, (bool, np.bool_)):
        try:
            finite = math.isfinite(float(scale))
        except OverflowError:
            finite = False
    if scale is None or finite:
        return []
    shown = repr(scale) if len(repr(scale)) <= 40 else f"{repr(scale)[:37]}..."
    return [(ValueError, f"scale: must be a finite number or None, got {shown}")]


def validate(q, k, v, causal, scale) -> None:
    """Raise TypeError/ValueError naming the argument and the rule."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    host.raise_first(rule_violations(q, k, v, causal, scale))
    for name, t in (("k", k), ("v", v)):
        if t.device != q.device:
            raise ValueError(f"{name}: device {t.device} must equal q's device {q.device}")
    host.raise_first(host.autograd_rule("flash_attention", {"q": q, "k": k, "v": v}))


def default_scale(head_dim: int, scale) -> float:
    return head_dim ** -0.5 if scale is None else float(scale)


def causal_bias(block: int, device) -> torch.Tensor:
    """The diagonal block's additive mask: 0 on and below the diagonal, MASKED above."""
    return torch.triu(torch.full((block, block), MASKED, device=device), diagonal=1)


def tuned_build_params(q_len: int, kv_len: int, causal: bool) -> dict:
    """The tuned table's build parameters for a call (``kernel.TUNING``'s bands; "auto"
    left for ``kernel.schedule``)."""
    return tuned_params(kernel, q_len=q_len, kv_len=kv_len, causal=causal)


def tuning_shape(case) -> dict:
    """The shape a level's calls pass to the tuned table (``tuned_build_params``)."""
    return {"q_len": case.inputs["q"].shape[1], "kv_len": case.inputs["k"].shape[1],
            "causal": _attrs(case.attrs)[0]}


def launch(q, k, v, causal=False, scale=None, backend=None, variant=None
           ) -> tuple[torch.Tensor, torch.Tensor, LaunchReport]:
    """Validate and run the kernel; return (out, lse, launch report).  q, k, v may be
    strided (they are read only: a strided one is made contiguous first)."""
    validate(q, k, v, causal, scale)
    batch, q_len, heads, head_dim = q.shape
    kv_len, kv_heads = k.shape[1], k.shape[2]
    out = torch.empty_like(q, memory_format=torch.contiguous_format)
    lse = torch.empty(batch, heads, q_len, dtype=torch.float32, device=q.device)
    static = {"batch": batch, "q_len": q_len, "kv_len": kv_len, "heads": heads, "kv_heads": kv_heads,
              "head_dim": head_dim, "dtype": host.HALF_DTYPES[q.dtype], "causal": causal,
              **kernel.schedule(q_len, kv_len, causal, tuned_build_params(q_len, kv_len, causal)),
              **kernel.VARIANTS.get(variant, {})}
    flat = [t.contiguous().view(t.shape[0] * t.shape[1], t.shape[2] * t.shape[3]) for t in (q, k, v)]
    tensors, scalars = [*flat, out.view(batch * q_len, heads * head_dim), lse.view(-1, 1)], {}
    if kernel.reads_mask(q_len, heads, kv_heads, causal):  # else the kernel takes None for it
        tensors.append(causal_bias(static.get("q_block", kernel.Q_BLOCK), q.device))
    else:
        scalars["mask"] = None
    scalars["scale"] = default_scale(head_dim, scale)
    report = host.launch(kernel.build, static, tensors, scalars, backend, batch * q_len * heads)
    return out, lse, report


@torch.library.custom_op("ptogym::flash_attention", mutates_args=())
def _flash_attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
                        scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    out, lse, _ = launch(q, k, v, causal, scale)
    return out, lse


@_flash_attention_op.register_fake
def _(q, k, v, causal, scale):
    return torch.empty_like(q, memory_format=torch.contiguous_format), \
        q.new_empty(q.shape[0], q.shape[2], q.shape[1], dtype=torch.float32)


def flash_attention(q, k, v, *, causal=False, scale=None, return_lse=False, backend=None):
    """softmax(q k^T * scale [+ causal mask]) v per query head, fp32 softmax state.

    q [B, Sq, Hq, D]; k, v [B, Skv, Hkv, D] with Hq % Hkv == 0 (GQA; Hkv = 1 is MQA),
    bf16 or fp16, D in 64 / 128 / 256; any Sq, Skv >= 1.  ``causal`` aligns the mask
    bottom-right as flash-attn does: query row i sees keys j <= i + Skv - Sq; a row
    that sees no key (Sq > Skv) returns out = 0 and lse = -inf.  ``scale`` defaults
    to D^-0.5.  Returns out [B, Sq, Hq, D] in q's dtype, or (out, lse) with
    ``return_lse`` (lse [B, Hq, Sq] fp32, natural log of the softmax denominator of
    the scaled scores).
    """
    if not torch.compiler.is_compiling():  # traced calls see fake tensors; the kernel call validates
        validate(q, k, v, causal, scale)
    causal, scale = bool(causal), default_scale(q.shape[-1], scale)
    if backend is None:
        out, lse = torch.ops.ptogym.flash_attention(q, k, v, causal, scale)
    else:
        out, lse, _ = launch(q, k, v, causal, scale, backend)
    return (out, lse) if return_lse else out


# --- what the runner, tests and benchmarks need -------------------------------------------
def _attrs(attrs):
    return attrs.get("causal", False), attrs.get("scale")


def _golden(inputs, attrs):
    out, lse = flash_attention_golden(inputs["q"], inputs["k"], inputs["v"], *_attrs(attrs))
    return {"out": out, "lse": lse}


def _run(inputs, attrs, backend, variant=None):
    out, lse, report = launch(inputs["q"], inputs["k"], inputs["v"], *_attrs(attrs), backend, variant)
    return {"out": out, "lse": lse}, report


def _check_case(case) -> list[str]:
    if set(case.inputs) != set(INPUT_NAMES):
        return [f"inputs must be exactly q, k, v; got {sorted(case.inputs)}"]
    return [m for _, m in rule_violations(*(case.inputs[n] for n in INPUT_NAMES), *_attrs(case.attrs))]


def hbm_bytes(case) -> int:
    """Read q, k, v once, write out and lse (the floor; the kernel reads k/v once per q block)."""
    q = case.inputs["q"]
    return host.moved_bytes(case, {"out": (q.shape, q.dtype), "lse": ((q.shape[0], q.shape[2], q.shape[1]),
                                                                      torch.float32)})


def visible_pairs(q_len: int, kv_len: int, causal: bool) -> int:
    """(query, key) pairs that are computed: all, or those the causal mask keeps."""
    if not causal:
        return q_len * kv_len
    return int((~causal_mask(q_len, kv_len)).sum())


def flops(case) -> int:
    """2 x 2 multiply-adds (QK^T and PV) per visible (query, key) pair, head and D."""
    batch, q_len, heads, head_dim = case.inputs["q"].shape
    return 4 * batch * heads * head_dim * visible_pairs(q_len, case.inputs["k"].shape[1], _attrs(case.attrs)[0])


SPEC = OpSpec(
    name="flash_attention",
    description="flash attention, prefill (SK-01): online softmax over key blocks, GQA/MQA, causal "
                "bottom-right, fp32 state, optional lse",
    make_inputs=host.make_inputs,
    golden=_golden,
    run=_run,
    check_case=_check_case,
    hbm_bytes=hbm_bytes,
    input_names=INPUT_NAMES,
    output_names=("out", "lse"),
    attr_names=("causal", "scale"),
    required_levels=("level0", "level1", "level2", "level3", "level4"),
    extra={"patterns": ("SK-01", "SK-02", "AT-01", "AT-02", "AT-12", "AT-13", "AT-20", "AT-21"), "variants": tuple(kernel.VARIANTS),
           "sim_summary": measure.summarizer(hbm_bytes, flops), "tuning_shape": tuning_shape},
)
