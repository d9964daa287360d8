"""Public API of the Qwen3 pre-attention, its torch.library registration and ``SPEC``.

``qwen3_pre_attn(hidden, residual, input_gamma, w_qkv, q_norm_gamma, k_norm_gamma,
cos, sin, k_cache, v_cache, slot_mapping, eps)`` returns q [T, heads, head_dim] and
updates three tensors in place: residual <- hidden + residual, and the k/v rows of
every token written into k_cache / v_cache at its slot.  Negative slots are padding,
as in ``cache_scatter``: q and residual are computed for those tokens, their k/v rows
are not written.

torch.library: ``ptogym::qwen3_pre_attn(Tensor hidden, Tensor(a!) residual, Tensor
input_gamma, Tensor w_qkv, Tensor q_norm_gamma, Tensor k_norm_gamma, Tensor cos,
Tensor sin, Tensor(b!) k_cache, Tensor(c!) v_cache, Tensor slot_mapping, float eps)
-> Tensor``.
"""
from __future__ import annotations

import math

import torch

from ptogym.atoms import host, measure
from ptogym.backends import get_backend
from ptogym.backends.base import LaunchReport
from ptogym.ops import OpSpec
from ptogym.ops.inplace import check_inplace_arguments
from ptogym.ops.cache_scatter.op import INDEX_DTYPES, make_slot_mapping, padding_attr_violations, slot_violations
from ptogym.ops.cache_scatter.op import launch as scatter_launch
from ptogym.tune.table import tuned_params

from . import kernel
from .golden import qwen3_pre_attn_golden

INPUT_NAMES = ("hidden", "residual", "input_gamma", "w_qkv", "q_norm_gamma", "k_norm_gamma", "cos", "sin",
               "k_cache", "v_cache", "slot_mapping")
WRITES = ("residual", "k_cache", "v_cache")  # overwritten in place
MAX_HIDDEN = kernel.SUM_BUFFER_BYTES // kernel.FP32_BYTES


def dims(hidden, w_qkv, q_norm_gamma, k_cache) -> dict:
    """heads, kv_heads, head_dim and H as the shapes imply them (no checks)."""
    head_dim = q_norm_gamma.shape[0] if len(q_norm_gamma.shape) == 1 else 0
    kv_heads = k_cache.shape[1] if len(k_cache.shape) == 3 else 0
    heads = w_qkv.shape[0] // head_dim - 2 * kv_heads if head_dim and len(w_qkv.shape) == 2 else 0
    return {"hidden": hidden.shape[-1], "heads": heads, "kv_heads": kv_heads, "head_dim": head_dim}


def shape_rule_violations(hidden, residual, input_gamma, w_qkv, q_norm_gamma, k_norm_gamma, cos, sin,
                          k_cache, v_cache, slot_mapping, eps) -> list[tuple[type, str]]:
    """Every dtype and dimension rule, as (exception type, message) pairs."""
    problems = host.dtype_rule("hidden", hidden, host.HALF_DTYPES)
    if problems:
        return problems
    named = dict(zip(INPUT_NAMES, (hidden, residual, input_gamma, w_qkv, q_norm_gamma, k_norm_gamma, cos, sin,
                                   k_cache, v_cache)))
    for name, t in named.items():
        if name != "hidden":
            problems += host.same_dtype_rule(name, t, "hidden", hidden)
    if slot_mapping.dtype not in INDEX_DTYPES:
        problems.append((TypeError, f"slot_mapping: dtype {slot_mapping.dtype} must be one of {list(INDEX_DTYPES)}"))
    if len(hidden.shape) != 2:
        return problems + [(ValueError, f"hidden: needs shape [T, H], got {list(hidden.shape)}")]
    if len(q_norm_gamma.shape) != 1:
        return problems + [(ValueError, f"q_norm_gamma: needs shape [head_dim], got {list(q_norm_gamma.shape)}")]
    if len(k_cache.shape) != 3:
        return problems + [(ValueError, f"k_cache: needs shape [slots, kv_heads, head_dim], got {list(k_cache.shape)}")]
    tokens, size = hidden.shape
    d = dims(hidden, w_qkv, q_norm_gamma, k_cache)
    head_dim, kv_heads, heads = d["head_dim"], d["kv_heads"], d["heads"]
    problems += host.shape_rule("residual", residual, (tokens, size), "hidden's shape [T, H]")
    problems += host.shape_rule("input_gamma", input_gamma, (size,), "[H]")
    problems += host.shape_rule("k_norm_gamma", k_norm_gamma, (head_dim,), "q_norm_gamma's [head_dim]")
    problems += host.shape_rule("cos", cos, (tokens, head_dim), "[T, head_dim]")
    problems += host.shape_rule("sin", sin, (tokens, head_dim), "[T, head_dim]")
    problems += host.shape_rule("k_cache", k_cache, (k_cache.shape[0], kv_heads, head_dim),
                                "[slots, kv_heads, head_dim (q_norm_gamma's)]")
    problems += host.shape_rule("v_cache", v_cache, tuple(k_cache.shape), "k_cache's shape")
    problems += host.shape_rule("slot_mapping", slot_mapping, (tokens,), "[T]")
    rows = w_qkv.shape[0] if len(w_qkv.shape) == 2 else 0
    if len(w_qkv.shape) != 2 or w_qkv.shape[1] != size or rows % max(head_dim, 1) or heads < 1:
        problems.append((ValueError, f"w_qkv: shape {list(w_qkv.shape)} must be [(heads + 2 * kv_heads) * head_dim, H] "
                                     f"with H = {size}, kv_heads = {kv_heads}, head_dim = {head_dim} and heads >= 1"))
    elif heads % kv_heads:
        problems.append((ValueError, f"w_qkv: {heads} query heads must be a multiple of the {kv_heads} kv heads "
                                     "(grouped-query attention)"))
    if size % 16 or head_dim % 16 or head_dim == 0:
        problems.append((ValueError, f"hidden: H = {size} and head_dim = {head_dim} must be non-zero multiples of 16 "
                                     "(32-byte tiles; head_dim/2 fp32 elements for RoPE's halves)"))
    if size > MAX_HIDDEN:
        problems.append((ValueError, f"hidden: H = {size} > {MAX_HIDDEN}: one fp32 row must fit pypto.sum's "
                                     f"{kernel.SUM_BUFFER_BYTES} B buffer"))
    if heads * head_dim * kernel.FP32_BYTES > kernel.SUM_BUFFER_BYTES:
        problems.append((ValueError, f"w_qkv: heads x head_dim = {heads * head_dim}: one token's fp32 q must fit "
                                     f"pypto.sum's {kernel.SUM_BUFFER_BYTES} B buffer"))
    if math.prod(k_cache.shape) > host.INT32_MAX:
        problems.append((ValueError, f"k_cache: {math.prod(k_cache.shape)} elements > {host.INT32_MAX}"))
    return problems + host.eps_rule(eps)


def validate(hidden, residual, input_gamma, w_qkv, q_norm_gamma, k_norm_gamma, cos, sin, k_cache, v_cache,
             slot_mapping, eps) -> None:
    """Raise TypeError/ValueError naming the argument and the rule; writes nothing."""
    tensors = dict(zip(INPUT_NAMES, (hidden, residual, input_gamma, w_qkv, q_norm_gamma, k_norm_gamma, cos, sin,
                                     k_cache, v_cache, slot_mapping)))
    for name, t in tensors.items():
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    host.raise_first(shape_rule_violations(*tensors.values(), eps))
    read = dict(tensors)
    written = {name: read.pop(name) for name in WRITES}
    check_inplace_arguments("qwen3_pre_attn", written=written, read=read)  # first: torch's wording for a leaf
    host.check_tensors("qwen3_pre_attn", "hidden", **tensors)
    host.raise_first([(ValueError, m) for m in slot_violations(slot_mapping, k_cache.shape[0])])


def tuned_build_params(tokens: int, hidden: int, q_width: int) -> dict:
    """The tuned table's build parameters for a call (``kernel.TUNING``'s bands)."""
    return tuned_params(kernel, tokens=tokens, hidden=hidden, q_width=q_width)


def tuning_shape(case) -> dict:
    """The shape a level's calls pass to the tuned table (``tuned_build_params``)."""
    d = dims(*(case.inputs[name] for name in ("hidden", "w_qkv", "q_norm_gamma", "k_cache")))
    return {"tokens": case.inputs["hidden"].shape[0], "hidden": d["hidden"], "q_width": d["heads"] * d["head_dim"]}


def launch(hidden, residual, input_gamma, w_qkv, q_norm_gamma, k_norm_gamma, cos, sin, k_cache, v_cache,
           slot_mapping, eps=1e-6, backend=None, variant=None) -> tuple[torch.Tensor, LaunchReport]:
    """Validate, then run the kernel (residual and the caches in place); return (q, report).

    With padding slots the kernel hands back every token's k/v rows instead and
    ``cache_scatter`` writes the kept ones (its own rule: negative slots skipped), so
    the report covers three launches."""
    validate(hidden, residual, input_gamma, w_qkv, q_norm_gamma, k_norm_gamma, cos, sin, k_cache, v_cache,
             slot_mapping, eps)
    d = dims(hidden, w_qkv, q_norm_gamma, k_cache)
    tokens = hidden.shape[0]
    q = torch.empty(tokens, d["heads"], d["head_dim"], dtype=hidden.dtype, device=hidden.device)
    backend = backend if not isinstance(backend, (str, type(None))) else get_backend(backend)
    if tokens == 0:
        return q, LaunchReport(backend=backend.name, wall_s=0.0)
    padded = not host.is_meta(slot_mapping) and bool((slot_mapping < 0).any())
    static = {**d, "dtype": host.HALF_DTYPES[hidden.dtype], "index_dtype": INDEX_DTYPES[slot_mapping.dtype],
              "kv_rows_out": padded,
              **(kernel.VARIANTS[variant] if variant else tuned_build_params(tokens, d["hidden"],
                                                                             d["heads"] * d["head_dim"]))}
    kv_width = d["kv_heads"] * d["head_dim"]
    per_head = [gamma.expand(heads, -1).contiguous().unsqueeze(0)  # pypto broadcasts one axis at a time
                for gamma, heads in ((q_norm_gamma, d["heads"]), (k_norm_gamma, d["kv_heads"]))]
    front = [hidden, residual, input_gamma.view(1, -1), w_qkv, *per_head, cos, sin]
    if not padded:
        tensors = [*front, k_cache.view(-1, kv_width), v_cache.view(-1, kv_width), residual, q,
                   slot_mapping.view(-1, 1)]
        return q, backend.launch(kernel.build, static, tensors, {"eps": float(eps)})
    kv_rows = [k_cache.new_empty(tokens, *k_cache.shape[1:]) for _ in range(2)]
    reports = [backend.launch(kernel.build, static, [*front, *(t.view(-1, kv_width) for t in kv_rows), residual, q],
                              {"index": None, "eps": float(eps)})]
    reports += [scatter_launch(cache, rows, slot_mapping, backend) for cache, rows in zip((k_cache, v_cache), kv_rows)]
    return q, host.launches_in_sequence(reports)


@torch.library.custom_op("ptogym::qwen3_pre_attn", mutates_args=("residual", "k_cache", "v_cache"))
def _qwen3_pre_attn_op(hidden: torch.Tensor, residual: torch.Tensor, input_gamma: torch.Tensor,
                       w_qkv: torch.Tensor, q_norm_gamma: torch.Tensor, k_norm_gamma: torch.Tensor,
                       cos: torch.Tensor, sin: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                       slot_mapping: torch.Tensor, eps: float) -> torch.Tensor:
    return launch(hidden, residual, input_gamma, w_qkv, q_norm_gamma, k_norm_gamma, cos, sin, k_cache, v_cache,
                  slot_mapping, eps)[0]


@_qwen3_pre_attn_op.register_fake
def _(hidden, residual, input_gamma, w_qkv, q_norm_gamma, k_norm_gamma, cos, sin, k_cache, v_cache, slot_mapping,
      eps):
    d = dims(hidden, w_qkv, q_norm_gamma, k_cache)
    return hidden.new_empty(hidden.shape[0], d["heads"], d["head_dim"])


def qwen3_pre_attn(hidden, residual, input_gamma, w_qkv, q_norm_gamma, k_norm_gamma, cos, sin, k_cache, v_cache,
                   slot_mapping, eps=1e-6, *, backend=None):
    """Qwen3's attention front end in one kernel; returns q [T, heads, head_dim].

    In place: residual <- hidden + residual (hidden is only read); k_cache[slot_mapping[t]]
    and v_cache[slot_mapping[t]] <- token t's k (per-head RMSNorm, RoPE) and v.
    hidden, residual [T, H]; input_gamma [H]; w_qkv [(heads + 2 kv_heads) head_dim, H];
    q/k_norm_gamma [head_dim]; cos, sin [T, head_dim] (Hugging Face's, half layout);
    k/v_cache [slots, kv_heads, head_dim]; slot_mapping [T] int32/int64, distinct slots
    below ``slots``; a negative slot is padding (``cache_scatter``'s rule): that token's
    q and residual are computed, its k/v rows are not written.  bf16 or fp16 throughout.
    """
    args = (hidden, residual, input_gamma, w_qkv, q_norm_gamma, k_norm_gamma, cos, sin, k_cache, v_cache,
            slot_mapping, eps)
    if not torch.compiler.is_compiling():
        validate(*args)
    if backend is None:
        return torch.ops.ptogym.qwen3_pre_attn(*args)
    return launch(*args, backend=backend)[0]


# --- what the runner, tests and benchmarks need -------------------------------------------
def _make_inputs(case, generator, device="cpu"):
    """Model-like inputs: activations ~ N(0, 1), weights ~ N(0, 0.02), gammas ~ 1 + N(0, 0.1),
    cos/sin of real RoPE angles (theta 1e6, as Qwen3), distinct random slots (-1 for the
    last ``attrs["padding"]`` tokens)."""
    specs = case.inputs
    tokens, head_dim = specs["cos"].shape
    dtype = specs["hidden"].dtype

    def normal(name, std=1.0, mean=0.0):
        return (torch.randn(specs[name].shape, generator=generator) * std + mean).to(dtype)

    position = torch.randint(0, 32768, (tokens, 1), generator=generator).float()
    angles = position * 1e6 ** (-torch.arange(0, head_dim, 2).float() / head_dim)
    angles = torch.cat((angles, angles), -1)
    tensors = {"hidden": normal("hidden"), "residual": normal("residual"), "input_gamma": normal("input_gamma", 0.1, 1),
               "w_qkv": normal("w_qkv", 0.02), "q_norm_gamma": normal("q_norm_gamma", 0.1, 1),
               "k_norm_gamma": normal("k_norm_gamma", 0.1, 1), "cos": angles.cos().to(dtype),
               "sin": angles.sin().to(dtype), "k_cache": normal("k_cache"), "v_cache": normal("v_cache"),
               "slot_mapping": make_slot_mapping(tokens, specs["k_cache"].shape[0], case.attrs.get("padding", 0),
                                                 specs["slot_mapping"].dtype, generator)}
    return {name: t.to(device) for name, t in tensors.items()}


OUTPUT_NAMES = ("q", "residual", "k_cache", "v_cache")


def _golden(inputs, attrs):
    args = [inputs[n] for n in INPUT_NAMES]
    return dict(zip(OUTPUT_NAMES, qwen3_pre_attn_golden(*args, attrs.get("eps", 1e-6))))


def _run(inputs, attrs, backend, variant=None):
    q, report = launch(*[inputs[n] for n in INPUT_NAMES], attrs.get("eps", 1e-6), backend, variant)
    return {"q": q, "residual": inputs["residual"], "k_cache": inputs["k_cache"], "v_cache": inputs["v_cache"]}, report


def _check_case(case) -> list[str]:
    if set(case.inputs) != set(INPUT_NAMES):
        return [f"inputs must be exactly {', '.join(INPUT_NAMES)}; got {sorted(case.inputs)}"]
    args = [case.inputs[n] for n in INPUT_NAMES]
    problems = [message for _, message in shape_rule_violations(*args, case.attrs.get("eps", 1e-6))]
    if problems:
        return problems
    return padding_attr_violations(case.attrs.get("padding", 0), case.inputs["hidden"].shape[0],
                                   case.inputs["k_cache"].shape[0])


def hbm_bytes(case) -> int:
    """Read every input once except the caches; write q, residual and the written
    tokens' k/v rows (padded batches also stage k/v once through HBM, not counted: the
    bytes the operator must move)."""
    specs = case.inputs
    tokens = specs["hidden"].shape[0]
    written = tokens - case.attrs.get("padding", 0)
    kv_row = math.prod(specs["k_cache"].shape[1:])
    read = sum(math.prod(specs[n].shape) * host.element_size(specs[n].dtype)
               for n in INPUT_NAMES if n not in ("k_cache", "v_cache"))
    element = host.element_size(specs["hidden"].dtype)
    q = tokens * (specs["w_qkv"].shape[0] - 2 * kv_row)
    return read + (q + tokens * specs["hidden"].shape[1] + 2 * written * kv_row) * element


def flops(case) -> int:
    """Multiply-adds of the QKV projection, x2."""
    tokens, size = case.inputs["hidden"].shape
    return 2 * tokens * size * case.inputs["w_qkv"].shape[0]


SPEC = OpSpec(
    name="qwen3_pre_attn",
    description="Qwen3 pre-attention: residual add + RMSNorm, QKV projection, per-head q/k RMSNorm, RoPE, "
                "k/v cache scatter, in one kernel",
    make_inputs=_make_inputs,
    golden=_golden,
    run=_run,
    check_case=_check_case,
    hbm_bytes=hbm_bytes,
    output_names=OUTPUT_NAMES,
    input_names=INPUT_NAMES,
    attr_names=("eps", "padding"),
    writes=WRITES,
    required_levels=("level0", "level1", "level2"),
    extra={"patterns": ("SK-03", "SK-05", "AT-04", "AT-16"), "variants": ("upstream",),
           "sim_summary": measure.summarizer(hbm_bytes, flops), "tuning_shape": tuning_shape},
)
