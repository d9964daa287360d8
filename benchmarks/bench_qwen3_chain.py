"""Fused ``qwen3_pre_attn`` against the chain of separate operators on the same shapes,
under pypto 0.2.0's cost model (each kernel's simulated µs summed; intermediates go
through HBM): inplace_add_rms_norm -> linear (QKV) -> rms_norm per head (q, k) -> rope
(q, k) -> cache_scatter (k, v).  Run under ``flock /tmp/ptogym-pypto.lock``.

    python benchmarks/bench_qwen3_chain.py [--tokens 16]
"""
import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ptogym.backends import get_backend  # noqa: E402
from ptogym.ops import get_op  # noqa: E402
from ptogym.verify.cases import Case, TensorSpec  # noqa: E402
from ptogym.verify.runner import make_case_inputs  # noqa: E402

H, HEADS, KV_HEADS, D, SLOTS = 2048, 16, 8, 128, 1024


def simulate(sim, name, inputs, attrs=None):
    spec = get_op(name)
    specs = {k: TensorSpec(tuple(v), dtype) for k, (v, dtype) in inputs.items()}
    case = Case(op=name, id="chain", description="chain stage", seed=0, inputs=specs, rtol=0, atol=0,
                attrs=attrs or {})
    _, report = spec.run(make_case_inputs(spec, case), case.attrs, sim)
    return report.simulated_us


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=16)
    t = parser.parse_args(argv).tokens
    bf16, sim = torch.bfloat16, get_backend("pypto-sim")
    qkv = (HEADS + 2 * KV_HEADS) * D
    stages = [
        ("inplace_add_rms_norm", {"x1": ([t, H], bf16), "x2": ([t, H], bf16), "gamma": ([H], bf16)}, {}),
        ("linear", {"x": ([t, H], bf16), "weight": ([qkv, H], bf16)}, {"quant_mode": "none"}),
        ("rms_norm", {"x": ([t * HEADS, D], bf16), "gamma": ([D], bf16)}, {"eps": 1e-6}),
        ("rms_norm", {"x": ([t * KV_HEADS, D], bf16), "gamma": ([D], bf16)}, {"eps": 1e-6}),
        ("rope", {"x": ([t, HEADS, D], bf16), "cos": ([t, D], bf16), "sin": ([t, D], bf16)}, {"layout": "half"}),
        ("rope", {"x": ([t, KV_HEADS, D], bf16), "cos": ([t, D], bf16), "sin": ([t, D], bf16)}, {"layout": "half"}),
        ("cache_scatter", {"cache": ([SLOTS, KV_HEADS, D], bf16), "values": ([t, KV_HEADS, D], bf16),
                           "slot_mapping": ([t], torch.int32)}, {}),
        ("cache_scatter", {"cache": ([SLOTS, KV_HEADS, D], bf16), "values": ([t, KV_HEADS, D], bf16),
                           "slot_mapping": ([t], torch.int32)}, {}),
    ]
    total = 0.0
    for name, inputs, attrs in stages:
        us = simulate(sim, name, inputs, attrs)
        total += us
        print(f"{name:22s} {us:8.1f} us", flush=True)
    fused = simulate(sim, "qwen3_pre_attn", {
        "hidden": ([t, H], bf16), "residual": ([t, H], bf16), "input_gamma": ([H], bf16),
        "w_qkv": ([qkv, H], bf16), "q_norm_gamma": ([D], bf16), "k_norm_gamma": ([D], bf16),
        "cos": ([t, D], bf16), "sin": ([t, D], bf16), "k_cache": ([SLOTS, KV_HEADS, D], bf16),
        "v_cache": ([SLOTS, KV_HEADS, D], bf16), "slot_mapping": ([t], torch.int32)}, {"eps": 1e-6})
    print(f"chain {total:.1f} us, fused qwen3_pre_attn {fused:.1f} us: fused is {total / fused:.2f}x faster")
    return 0


if __name__ == "__main__":
    sys.exit(main())
