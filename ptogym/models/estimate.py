"""The per-layer device-time table of a model run: simulated µs per kernel against the
physical floor of the same layer and step.

Floor = max(bytes / DDR rate, FLOPs / cube peak), with the platform's nominal DDR
(1382 GB/s) and cube peak (353.9 TFLOPS) from pypto's platform file
(``ptogym.atoms.measure``).  Bytes: the layer's weights (for a MoE layer the router
and the experts the step routed to) plus the k/v the attention reads (prefill: every
token of the step once; decode: every sequence's cache); activations are left out.
FLOPs: 2 per multiply-add of every projection (a MoE token: its top-k experts) plus
attention's 4 · heads · head_dim per visible (query, key) pair.
"""
from __future__ import annotations

PHASES = ("prefill", "decode")


def step_figures(model, records, lengths: dict) -> dict:
    """``layer_figures`` of every phase the clock timed; ``lengths``: phase -> token lengths."""
    figures = {}
    for phase in PHASES:
        timed = [r for r in records if r.phase == phase]
        if timed:
            hit = next((r.extra["experts_hit"] for r in timed if "experts_hit" in r.extra), None)
            figures[phase] = layer_figures(model, timed[0].layer, phase, lengths[phase], hit)
    return figures


def layer_figures(model, layer: int, phase: str, token_lengths: list[tuple[int, int]], experts_hit=None) -> dict:
    """Bytes and FLOPs of ``layer`` in one ``phase`` step; ``token_lengths`` holds each
    sequence's (new tokens, keys it attends over); ``experts_hit``: the distinct experts
    a MoE layer routed to (None: all)."""
    config, w = model.config, model.layers[layer]
    element = w["w_qkv"].element_size()
    hidden = config.hidden_size
    tokens = sum(new for new, _ in token_lengths)
    kv_row = model.kv_heads * model.head_dim
    weight_elements = w["w_qkv"].numel() + w["w_o"].numel() + sum(w[g].numel() for g in (
        "input_gamma", "q_norm", "k_norm", "post_gamma"))
    macs = tokens * (w["w_qkv"].numel() + w["w_o"].numel())
    if "mlp" in w:
        weight_elements += sum(t.numel() for t in w["mlp"])
        macs += tokens * sum(t.numel() for t in w["mlp"])
    else:
        moe = w["moe"]
        per_expert = sum(t[0].numel() for t in moe["w"])
        hit = moe["experts"] if experts_hit is None else experts_hit
        weight_elements += moe["experts"] * hidden + hit * per_expert
        macs += tokens * (moe["experts"] * hidden + moe["top_k"] * per_expert)
    if phase == "prefill":  # causal: query i of a new sequence sees keys 0..i
        pairs = sum(new * (new + 1) // 2 for new, _ in token_lengths)
        kv_read = sum(keys for _, keys in token_lengths)
    else:
        pairs = sum(keys for _, keys in token_lengths)
        kv_read = pairs
    flops = 2 * macs + 4 * model.heads * model.head_dim * pairs
    kv_bytes = 2 * kv_read * kv_row * element
    return {"weight_bytes": weight_elements * element, "kv_bytes": kv_bytes, "flops": flops, "tokens": tokens}


def floor_us(figures: dict, platform: dict, cube_peak_tflops: float) -> dict:
    memory_us = (figures["weight_bytes"] + figures["kv_bytes"]) / (platform["platform_ddr_gbps"] * 1e3)
    compute_us = figures["flops"] / (cube_peak_tflops * 1e6)
    return {"memory_us": memory_us, "compute_us": compute_us, "floor_us": max(memory_us, compute_us),
            "bound": "memory" if memory_us >= compute_us else "compute"}


def table(records, figures_by_phase: dict, platform: dict, cube_peak_tflops: float) -> dict:
    """{phase: {"kernels": [...], "sum_us", "floor": ..., "sum_over_floor"}} from the clock's records."""
    result = {}
    for phase in PHASES:
        rows = [r for r in records if r.phase == phase]
        if not rows:
            continue
        total = sum(r.simulated_us for r in rows if r.simulated_us is not None)
        kernels = [{"kernel": r.kernel, "layer": r.layer, "simulated_us": r.simulated_us, "tasks": r.tasks,
                    "launches": r.launches, "error": r.error, **r.extra,
                    "share": (r.simulated_us / total if total and r.simulated_us is not None else None)} for r in rows]
        floor = floor_us(figures_by_phase[phase], platform, cube_peak_tflops)
        result[phase] = {"layer": rows[0].layer, "kernels": kernels, "sum_us": total,
                         "complete": all(r.simulated_us is not None for r in rows),
                         "figures": figures_by_phase[phase], "floor": floor,
                         "sum_over_floor": total / floor["floor_us"] if floor["floor_us"] else None}
    return result


def format_table(result: dict, platform: dict, cube_peak_tflops: float) -> str:
    lines = []
    for phase, entry in result.items():
        figures, floor = entry["figures"], entry["floor"]
        lines.append(f"layer {entry['layer']}, {phase} ({figures['tokens']} tokens): simulated device time per kernel "
                     "(pypto 0.2.0 cost model, DAV_2201)")
        for row in entry["kernels"]:
            if row["simulated_us"] is None:
                lines.append(f"  {row['kernel']:<24} {'not simulated':>12}  {row['error'] or 'no timing reported'}")
            else:
                lines.append(f"  {row['kernel']:<24} {row['simulated_us']:9.1f} us  {100 * row['share']:5.1f}%"
                             f"  ({row['launches']} launch{'es' if row['launches'] != 1 else ''}, "
                             f"{row['tasks']} tasks)")
        partial = "" if entry["complete"] else "  (kernels that were not simulated are missing from it)"
        lines.append(f"  {'sum':<24} {entry['sum_us']:9.1f} us{partial}")
        lines.append(f"  {'physical floor':<24} {floor['floor_us']:9.1f} us  ({floor['bound']}-bound: "
                     f"{(figures['weight_bytes'] + figures['kv_bytes']) / 1e6:.2f} MB of weights + KV / "
                     f"{platform['platform_ddr_gbps']:.0f} GB/s = {floor['memory_us']:.1f} us; "
                     f"{figures['flops'] / 1e9:.2f} GFLOP / {cube_peak_tflops:.1f} TFLOPS = {floor['compute_us']:.1f} us)")
        if entry["sum_over_floor"]:
            lines.append(f"  {'sum / floor':<24} {entry['sum_over_floor']:9.2f}x")
    return "\n".join(lines)
