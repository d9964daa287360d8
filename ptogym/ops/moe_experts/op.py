"""Public API of the routed-expert FFN (SK-07), torch.library and ``SPEC``.

``moe_experts(x, topk_weights, topk_ids, w_gate, w_up, w_down)`` returns y [T, H]:

    y[t] = sum_k topk_weights[t, k] * SwiGLU-MLP_{topk_ids[t, k]}(x[t])

x [T, H] bf16/fp16 (any T, zero included); topk_weights [T, k] fp32 (or x's dtype,
used in fp32); topk_ids [T, k] int32/int64 in [0, E); w_gate, w_up [E, I, H] and
w_down [E, H, I] of x's dtype (Hugging Face's ``gate_up_proj`` [E, 2I, H] is w_gate
and w_up stacked along I, gate first).  Each expert's MLP rounds as ``swiglu_mlp``
does (gate, up, silu, h and its output to x's dtype, the model's bf16 roundings); the
weighted sum over k is fp32, k in order, rounded once to x's dtype (Hugging Face
weights and sums in bf16, expert by expert).

The tokens are grouped per expert by the route kernel (sort and histogram in PyPTO;
``kernel.py``), and each expert multiplies only the tokens routed to it: an expert
with no token costs one empty loop and reads none of its weights.  Calls with more
than ``kernel.MAX_ASSIGNMENTS`` (T * k) assignments run in token chunks of that size.

torch.library: ``ptogym::moe_experts(Tensor x, Tensor topk_weights, Tensor topk_ids,
Tensor w_gate, Tensor w_up, Tensor w_down) -> Tensor``.
"""
from __future__ import annotations

import math

import torch

from ptogym.atoms import host, measure
from ptogym.backends import get_backend
from ptogym.backends.base import LaunchReport
from ptogym.ops import OpSpec
from ptogym.tune.table import tuned_params

from . import combine, kernel, route
from .golden import moe_experts_golden

PATTERNS = ("SK-07", "AT-07", "SK-14")
INPUT_NAMES = ("x", "topk_weights", "topk_ids", "w_gate", "w_up", "w_down")
ID_DTYPES = (torch.int32, torch.int64)


def rule_violations(x, topk_weights, topk_ids, w_gate, w_up, w_down) -> list:
    """Every dtype and shape rule, as (exception type, message) pairs."""
    problems = host.dtype_rule("x", x, tuple(host.HALF_DTYPES))
    if problems:
        return problems
    for name, t in (("w_gate", w_gate), ("w_up", w_up), ("w_down", w_down)):
        problems += host.same_dtype_rule(name, t, "x", x)
    if topk_weights.dtype not in (torch.float32, x.dtype):
        problems.append((TypeError, f"topk_weights: dtype {topk_weights.dtype} must be torch.float32 or x's {x.dtype}"))
    problems += host.dtype_rule("topk_ids", topk_ids, ID_DTYPES)
    if problems:
        return problems
    if len(x.shape) != 2:
        return [(ValueError, f"x: needs shape [T, H], got {list(x.shape)}")]
    tokens, hidden = x.shape
    if len(topk_ids.shape) != 2 or topk_ids.shape[0] != tokens or topk_ids.shape[1] == 0:
        return [(ValueError, f"topk_ids: shape {list(topk_ids.shape)} must be [T, k] with T = {tokens}, k >= 1")]
    problems += host.shape_rule("topk_weights", topk_weights, tuple(topk_ids.shape), "topk_ids' shape [T, k]")
    if len(w_gate.shape) != 3 or w_gate.shape[2] != hidden:
        return problems + [(ValueError, f"w_gate: shape {list(w_gate.shape)} must be [E, I, H] with H = {hidden}")]
    experts, inter, _ = w_gate.shape
    problems += host.shape_rule("w_up", w_up, (experts, inter, hidden), "w_gate's shape [E, I, H]")
    problems += host.shape_rule("w_down", w_down, (experts, hidden, inter), "[E, H, I]")
    for name, label, size in (("x", "H", hidden), ("w_gate", "I", inter)):
        if size == 0:
            problems.append((ValueError, f"{name}: {label} = 0"))
    if experts == 0:
        problems.append((ValueError, "w_gate: E = 0 experts"))
    if experts > kernel.MAX_EXPERTS:
        problems.append((ValueError, f"w_gate: E = {experts} experts > {kernel.MAX_EXPERTS} (the route kernel holds "
                                     "one padded row of N + 16 E fp32 values in a vector tile)"))
    top_k = topk_ids.shape[1]
    if top_k > kernel.MAX_ASSIGNMENTS:
        problems.append((ValueError, f"topk_ids: k = {top_k} > {kernel.MAX_ASSIGNMENTS}"))
    for name, t in (("w_gate", w_gate), ("w_down", w_down), ("x", x)):
        if math.prod(t.shape) > host.INT32_MAX:
            problems.append((ValueError, f"{name}: {math.prod(t.shape)} elements > {host.INT32_MAX}"))
    return problems


def id_violations(topk_ids, experts: int) -> list[str]:
    """Expert ids outside [0, E) (read on the host: on a device they would index
    outside the weights)."""
    if topk_ids.numel() == 0 or topk_ids.device.type == "meta":
        return []
    low, high = int(topk_ids.min()), int(topk_ids.max())
    if low < 0 or high >= experts:
        return [f"topk_ids: values must lie in [0, E = {experts}); found {low if low < 0 else high}"]
    return []


def validate(x, topk_weights, topk_ids, w_gate, w_up, w_down) -> None:
    """Raise TypeError/ValueError naming the argument and the rule."""
    host.check_tensors("moe_experts", "x", x=x, topk_weights=topk_weights, topk_ids=topk_ids, w_gate=w_gate, w_up=w_up,
                       w_down=w_down)
    host.raise_first(rule_violations(x, topk_weights, topk_ids, w_gate, w_up, w_down))
    host.raise_first([(ValueError, m) for m in id_violations(topk_ids, w_gate.shape[0])])


def padded_assignments(count: int) -> int:
    """The route kernel's static N: the power of two >= count, at least 64 (one kernel per size)."""
    return max(64, 1 << (count - 1).bit_length())


def chunk_tokens(top_k: int) -> int:
    """Tokens per route / experts / combine sequence: at most MAX_ASSIGNMENTS assignments."""
    return max(1, kernel.MAX_ASSIGNMENTS // top_k)


def route_on_host(flat_ids, flat_weights, experts: int, top_k: int) -> tuple:
    """What the route kernel writes, computed with torch: (tokens [M], order [M], weights
    [M, 1], offsets [E + 1, 1]) for ids / weights [1, N] (``route.build_route``'s layout).
    A cost-only launch computes nothing, and the experts kernel's loop bounds and row
    indices are these values, which pypto's cost model reads."""
    n = flat_ids.shape[1]
    rows = route.padded_rows(n, experts)
    ids = flat_ids[0].long()
    order = torch.argsort(ids, stable=True)  # expert by expert, assignment order within one
    counts = torch.bincount(ids, minlength=experts + 1)[:experts]
    zero = counts.new_zeros(1)
    below = torch.cat([zero, counts.cumsum(0)])  # assignments of the experts below e
    starts = torch.cat([zero, ((counts + kernel.ROW_GROUP - 1) // kernel.ROW_GROUP * kernel.ROW_GROUP).cumsum(0)])
    slot = torch.arange(n, device=ids.device) + (starts - below)[ids[order]]
    tokens = torch.zeros(rows, dtype=torch.int32, device=ids.device)
    tokens[slot] = (order // top_k).to(torch.int32)
    padded_order = torch.arange(n, n + rows, dtype=torch.int32, device=ids.device)
    padded_order[slot] = order.to(torch.int32)
    weights = torch.zeros(rows, 1, dtype=torch.float32, device=ids.device)
    weights[slot, 0] = flat_weights[0, order]
    return tokens, padded_order, weights, starts.to(torch.int32)[:, None]


def _launch_chunk(backend, x, weights, ids, w_gate, w_up, w_down) -> tuple[torch.Tensor, list]:
    """One route / experts / combine sequence; x [T, H] and the weights already padded
    to 32-byte extents."""
    tokens, top_k = ids.shape
    experts, inter, hidden = w_gate.shape
    count = tokens * top_k
    n = padded_assignments(count)
    device = x.device
    flat_ids = torch.full((1, n), experts, dtype=torch.int32, device=device)
    flat_ids[0, :count] = ids.reshape(-1)
    flat_weights = torch.zeros(1, n, dtype=torch.float32, device=device)
    flat_weights[0, :count] = weights.reshape(-1)
    rows = route.padded_rows(n, experts)
    sorted_tokens, order = (torch.empty(rows, dtype=torch.int32, device=device) for _ in range(2))
    sorted_weights = torch.empty(rows, 1, dtype=torch.float32, device=device)
    offsets = torch.empty(experts + 1, 1, dtype=torch.int32, device=device)
    reports = [backend.launch(route.build_route, {"assignments": n, "experts": experts, "top_k": top_k},
                              [flat_ids, flat_weights, sorted_tokens, order, sorted_weights, offsets], {})]
    if not reports[0].outputs_valid:  # cost model alone: the experts' loops must still see the real routing
        for out, value in zip((sorted_tokens, order, sorted_weights, offsets),
                              route_on_host(flat_ids, flat_weights, experts, top_k)):
            out.copy_(value)
        reports[0].extra["outputs"] = "computed on the host"
    buffer = torch.empty(n + rows, hidden, dtype=torch.float32, device=device)  # assignments, then spare rows
    tuned = tuned_params(kernel, tokens=tokens, top_k=top_k, hidden=hidden, inter=inter)
    static = {"hidden": hidden, "inter": inter, "experts": experts, "dtype": host.HALF_DTYPES[x.dtype],
              "unroll": kernel.expert_blocks(count, tuned["unroll"]), "row_loops": tuned["row_loops"]}
    reports.append(backend.launch(kernel.build_experts, static,
                                  [x, sorted_tokens, order, sorted_weights, offsets, w_gate.view(-1, hidden),
                                   w_up.view(-1, hidden), w_down.view(-1, inter), buffer], {}))
    y = torch.empty_like(x)
    reports.append(backend.launch(combine.build_combine, {"hidden": hidden, "top_k": top_k,
                                                         "dtype": host.HALF_DTYPES[x.dtype],
                                                         "unroll": tuned["combine_unroll"]},
                                  [buffer[:count].view(tokens, top_k * hidden), y], {}))
    return y, reports


def launch(x, topk_weights, topk_ids, w_gate, w_up, w_down, backend=None) -> tuple[torch.Tensor, LaunchReport]:
    validate(x, topk_weights, topk_ids, w_gate, w_up, w_down)
    backend = backend if not isinstance(backend, (str, type(None))) else get_backend(backend)
    tokens, top_k = topk_ids.shape
    if tokens == 0 or x.device.type == "meta":
        return torch.empty_like(x), LaunchReport(backend=backend.name, wall_s=0.0)
    experts, inter, hidden = w_gate.shape
    h, i = host.aligned(hidden), host.aligned(inter)  # cube tiles need 32-byte n extents: odd sizes are padded
    w_gate, w_up = (host.zero_padded(w, (experts, i, h)) for w in (w_gate, w_up))
    w_down = host.zero_padded(w_down, (experts, h, i))
    chunk = chunk_tokens(top_k)
    outputs, reports = [], []
    for start in range(0, tokens, chunk):
        rows = slice(start, start + chunk)
        y, chunk_reports = _launch_chunk(backend, host.zero_padded(x[rows], (x[rows].shape[0], h)), topk_weights[rows],
                                         topk_ids[rows].to(torch.int32), w_gate, w_up, w_down)
        outputs.append(y[:, :hidden])
        reports += chunk_reports
    y = outputs[0] if len(outputs) == 1 else torch.cat(outputs)
    return (y if h == hidden else y.contiguous()), host.launches_in_sequence(reports)


@torch.library.custom_op("ptogym::moe_experts", mutates_args=())
def _moe_experts_op(x: torch.Tensor, topk_weights: torch.Tensor, topk_ids: torch.Tensor, w_gate: torch.Tensor,
                    w_up: torch.Tensor, w_down: torch.Tensor) -> torch.Tensor:
    return launch(x, topk_weights, topk_ids, w_gate, w_up, w_down)[0]


@_moe_experts_op.register_fake
def _(x, topk_weights, topk_ids, w_gate, w_up, w_down):
    return torch.empty_like(x)


def moe_experts(x, topk_weights, topk_ids, w_gate, w_up, w_down, *, backend=None):
    """y[t] = sum_k topk_weights[t, k] * SwiGLU-MLP_{topk_ids[t, k]}(x[t]); see the module docstring."""
    args = (x, topk_weights, topk_ids, w_gate, w_up, w_down)
    if not torch.compiler.is_compiling():
        validate(*args)
    if backend is None:
        return torch.ops.ptogym.moe_experts(*args)
    return launch(*args, backend=backend)[0]


# --- what the runner, tests and benchmarks need -------------------------------------------
def make_inputs(case, generator, device="cpu"):
    """x ~ N(0, 1); expert weights ~ N(0, 1/fan_in); routing from random router logits
    (distinct experts per token, as a top-k router gives; ``attrs["skew"]`` > 0 draws
    the logits with a per-expert popularity so some experts get many tokens and some
    none); weights the renormalised softmax of the chosen logits."""
    specs = case.inputs
    tokens, top_k = specs["topk_ids"].shape
    experts = specs["w_gate"].shape[0]
    dtype = specs["x"].dtype
    tensors = {"x": torch.randn(specs["x"].shape, generator=generator).to(dtype)}
    for name in ("w_gate", "w_up", "w_down"):
        shape = specs[name].shape
        tensors[name] = (torch.randn(shape, generator=generator) * shape[-1] ** -0.5).to(dtype)
    logits = torch.randn(tokens, experts, generator=generator)
    logits = logits + case.attrs.get("skew", 0.0) * torch.randn(1, experts, generator=generator)
    chosen, ids = torch.topk(logits, top_k, dim=-1)
    tensors["topk_ids"] = ids.to(specs["topk_ids"].dtype)
    tensors["topk_weights"] = torch.softmax(chosen, dim=-1).to(specs["topk_weights"].dtype)
    return {name: t.to(device) for name, t in tensors.items()}


def _golden(inputs, attrs):
    return {"y": moe_experts_golden(*(inputs[n] for n in INPUT_NAMES))}


def _run(inputs, attrs, backend, variant=None):
    if variant is not None:  # no other configuration: upstream has no routed-expert operator
        raise ValueError(f"moe_experts: unknown variant {variant!r}")
    y, report = launch(*(inputs[n] for n in INPUT_NAMES), backend=backend)
    return {"y": y}, report


def _check_case(case) -> list[str]:
    return host.case_violations(case, INPUT_NAMES, rule_violations)


def tuning_shape(case) -> dict:
    """The shape the first launch of a level's call passes to the tuned table
    (``_launch_chunk``: a chunk's tokens, padded extents)."""
    tokens, top_k = case.inputs["topk_ids"].shape
    _, inter, hidden = case.inputs["w_gate"].shape
    return {"tokens": min(tokens, chunk_tokens(top_k)), "top_k": top_k,
            "hidden": host.aligned(hidden), "inter": host.aligned(inter)}


def _routed_experts(case) -> int:
    """Experts with at least one token: at most E, at most T * k (the weights moved)."""
    tokens, top_k = case.inputs["topk_ids"].shape
    return min(case.inputs["w_gate"].shape[0], tokens * top_k)


def hbm_bytes(case) -> int:
    """x, the routing and y, plus the weights of at most min(E, T * k) experts (the
    ones a call can touch; fewer when tokens share experts)."""
    specs = case.inputs
    element = host.element_size(specs["x"].dtype)
    experts, inter, hidden = specs["w_gate"].shape
    routing = sum(math.prod(specs[n].shape) * host.element_size(specs[n].dtype)
                  for n in ("x", "topk_weights", "topk_ids"))
    return routing + math.prod(specs["x"].shape) * element + _routed_experts(case) * 3 * inter * hidden * element


def flops(case) -> int:
    """Only the routed work: 2 * H * I for each of three projections per assignment."""
    tokens, top_k = case.inputs["topk_ids"].shape
    _, inter, hidden = case.inputs["w_gate"].shape
    return 3 * 2 * tokens * top_k * inter * hidden


SPEC = OpSpec(
    name="moe_experts",
    description="routed-expert FFN (SK-07): tokens grouped per expert in-kernel, each expert's SwiGLU MLP on its "
                "tokens only, weighted sum over the top-k",
    make_inputs=make_inputs,
    golden=_golden,
    run=_run,
    check_case=_check_case,
    hbm_bytes=hbm_bytes,
    input_names=INPUT_NAMES,
    output_names=("y",),
    attr_names=("skew",),
    required_levels=("level0", "level1", "level2", "level3"),
    extra={"patterns": PATTERNS, "flops": flops, "tuning_shape": tuning_shape,
           "sim_summary": measure.summarizer(hbm_bytes, flops)},
)
