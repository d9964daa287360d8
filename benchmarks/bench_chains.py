"""The fused model operators against the chain of separate operators on the same shapes,
under pypto 0.2.0's cost model (each kernel's simulated µs summed; intermediates go
through HBM), timed both ways: first task start to last task end (pypto's "AICore
End-to-End Time", the chain summed without any start-up) and whole kernels (the cost
model's "Total Cycles": every kernel of the chain pays its scheduler start-up, as a
device would).  Run under ``flock /tmp/ptogym-pypto.lock``.

* qwen3_pre_attn: inplace_add_rms_norm -> linear (QKV) -> rms_norm per head (q, k) ->
  rope (q, k) -> cache_scatter (k, v);
* swiglu_mlp: linear (gate) -> linear (up) -> linear (down): the chain without its SwiGLU
  step (ptogym has no stand-alone elementwise operator for it), so a lower bound on a
  real chain's time;
* mla_prolog: linear (q_a) -> rms_norm -> linear (q_b) -> rms_norm per head -> rope (q) ->
  linear (kv) -> rms_norm -> rope (kv).  The chain's linear takes [N, K] weights
  (b_trans) where the fused kernel reads upstream's K-major ones: same bytes and FLOPs.

    python benchmarks/bench_chains.py [--op qwen3_pre_attn|mla_prolog|swiglu_mlp] [--tokens 16]
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

H, HEADS, KV_HEADS, D, SLOTS = 2048, 16, 8, 128, 1024  # Qwen3-1.7B
V4_H, V4_Q, V4_HEADS, V4_D, V4_R = 4096, 1024, 64, 512, 64  # DeepSeek-V4
MLP_H, MLP_I = 4096, 12288  # Qwen3-8B
BF16 = torch.bfloat16


def simulate(sim, name, inputs, attrs=None):
    spec = get_op(name)
    specs = {k: TensorSpec(tuple(v), dtype) for k, (v, dtype) in inputs.items()}
    case = Case(op=name, id="chain", description="chain stage", seed=0, inputs=specs, rtol=0, atol=0,
                attrs=attrs or {})
    with sim.cost_only():  # timings only: big stages are past what pypto's interpreter computes
        _, report = spec.run(make_case_inputs(spec, case), case.attrs, sim)
    return report.simulated_us, report.extra["kernel_us"]


def qwen3_chain(t):
    qkv = (HEADS + 2 * KV_HEADS) * D
    cache = {"cache": ([SLOTS, KV_HEADS, D], BF16), "values": ([t, KV_HEADS, D], BF16),
             "slot_mapping": ([t], torch.int32)}
    stages = [
        ("inplace_add_rms_norm", {"x1": ([t, H], BF16), "x2": ([t, H], BF16), "gamma": ([H], BF16)}, {}),
        ("linear", {"x": ([t, H], BF16), "weight": ([qkv, H], BF16)}, {"quant_mode": "none"}),
        ("rms_norm", {"x": ([t * HEADS, D], BF16), "gamma": ([D], BF16)}, {"eps": 1e-6}),
        ("rms_norm", {"x": ([t * KV_HEADS, D], BF16), "gamma": ([D], BF16)}, {"eps": 1e-6}),
        ("rope", {"x": ([t, HEADS, D], BF16), "cos": ([t, D], BF16), "sin": ([t, D], BF16)}, {"layout": "half"}),
        ("rope", {"x": ([t, KV_HEADS, D], BF16), "cos": ([t, D], BF16), "sin": ([t, D], BF16)}, {"layout": "half"}),
        ("cache_scatter", cache, {}),
        ("cache_scatter", cache, {}),
    ]
    fused = {"hidden": ([t, H], BF16), "residual": ([t, H], BF16), "input_gamma": ([H], BF16),
             "w_qkv": ([qkv, H], BF16), "q_norm_gamma": ([D], BF16), "k_norm_gamma": ([D], BF16),
             "cos": ([t, D], BF16), "sin": ([t, D], BF16), "k_cache": ([SLOTS, KV_HEADS, D], BF16),
             "v_cache": ([SLOTS, KV_HEADS, D], BF16), "slot_mapping": ([t], torch.int32)}
    return stages, fused, {"eps": 1e-6}


def mla_chain(t):
    rope_inputs = {"cos": ([t, V4_R], BF16), "sin": ([t, V4_R], BF16)}
    stages = [
        ("linear", {"x": ([t, V4_H], BF16), "weight": ([V4_Q, V4_H], BF16)}, {"quant_mode": "none"}),
        ("rms_norm", {"x": ([t, V4_Q], BF16), "gamma": ([V4_Q], BF16)}, {"eps": 1e-6, "rsqrt_mode": "sqrt_div"}),
        *[("linear", {"x": ([t, V4_Q], BF16), "weight": ([V4_HEADS * V4_D // 2, V4_Q], BF16)}, {"quant_mode": "none"})
          ] * 2,  # the linear operator takes N <= 16384 (a fp32 row in its sum buffer): q_b as two halves
        ("rms_norm", {"x": ([t * V4_HEADS, V4_D], BF16), "gamma": ([V4_D], BF16)},
         {"eps": 1e-6, "rsqrt_mode": "sqrt_div"}),
        ("rope", {"x": ([t, V4_HEADS, V4_D], BF16), **rope_inputs}, {"layout": "interleave"}),
        ("linear", {"x": ([t, V4_H], BF16), "weight": ([V4_D, V4_H], BF16)}, {"quant_mode": "none"}),
        ("rms_norm", {"x": ([t, V4_D], BF16), "gamma": ([V4_D], BF16)}, {"eps": 1e-6, "rsqrt_mode": "sqrt_div"}),
        ("rope", {"x": ([t, V4_D], BF16), **rope_inputs}, {"layout": "interleave"}),
    ]
    fused = {"x": ([t, V4_H], BF16), "wq_a": ([V4_H, V4_Q], BF16), "wq_b": ([V4_Q, V4_HEADS * V4_D], BF16),
             "wkv": ([V4_H, V4_D], BF16), "gamma_cq": ([V4_Q], BF16), "gamma_ckv": ([V4_D], BF16), **rope_inputs}
    return stages, fused, {"eps": 1e-6}


def swiglu_chain(t, hidden=MLP_H, inter=MLP_I):
    project = {"quant_mode": "none"}
    stages = [("linear", {"x": ([t, hidden], BF16), "weight": ([inter, hidden], BF16)}, project)] * 2 + [
        ("linear", {"x": ([t, inter], BF16), "weight": ([hidden, inter], BF16)}, project)]
    fused = {"x": ([t, hidden], BF16), "w_gate": ([inter, hidden], BF16), "w_up": ([inter, hidden], BF16),
             "w_down": ([hidden, inter], BF16)}
    return stages, fused, {}


CHAINS = {"qwen3_pre_attn": qwen3_chain, "mla_prolog": mla_chain, "swiglu_mlp": swiglu_chain}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--op", choices=sorted(CHAINS), default="qwen3_pre_attn")
    parser.add_argument("--tokens", type=int, default=16)
    args = parser.parse_args(argv)
    sim = get_backend("pypto-sim")
    stages, fused_inputs, fused_attrs = CHAINS[args.op](args.tokens)
    total = kernels = 0.0
    for name, inputs, attrs in stages:
        us, kernel_us = simulate(sim, name, inputs, attrs)
        total, kernels = total + us, kernels + kernel_us
        print(f"{name:22s} {us:8.1f} us  whole kernel {kernel_us:8.1f} us", flush=True)
    fused, fused_kernel = simulate(sim, args.op, fused_inputs, fused_attrs)
    print(f"chain {total:.1f} us, fused {args.op} {fused:.1f} us: fused is {total / fused:.2f}x faster; "
          f"whole kernels: chain {kernels:.1f} us, fused {fused_kernel:.1f} us: {kernels / fused_kernel:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
