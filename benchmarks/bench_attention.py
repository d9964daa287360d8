"""The attention operators on the interpreter against torch's scaled_dot_product_attention
(same dtype, same inputs), side by side, at each operator's largest CI level.

    python benchmarks/bench_attention.py [--repeat 5] [--threads 1] [--levels LEVEL ...]
    python benchmarks/bench_attention.py --sim [--ops OP ...] [--levels LEVEL ...] [--json F]

Prints one line per operator and level: interpreter ms, SDPA ms (best of ``--repeat``,
alternating) and their ratio; exit status 1 when a ratio is above the 3x target.  For
paged decode the torch side includes gathering each sequence's blocks (it has no
paged kernel).

``--sim`` (under ``flock /tmp/ptogym-pypto.lock``) instead simulates the default kernel
and every variant (``kernel.VARIANTS``: upstream's configuration among them) under
pypto 0.2.0's cost model, timings only, and prints µs, the speed-up over upstream and
TFLOPS against the cube peak (prefill) or GB/s against the 1382 GB/s DDR rate (decode).
"""
import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ptogym.backends import get_backend  # noqa: E402
from ptogym.ops import get_op  # noqa: E402
from ptogym.ops.paged_attention.golden import gather_sequence  # noqa: E402
from ptogym.verify.cases import load_cases  # noqa: E402
from ptogym.verify.runner import make_case_inputs  # noqa: E402

TARGET = 3.0
OPS = ("flash_attention", "paged_attention")


def sdpa_flash(inputs, attrs):
    q, k, v = (inputs[n].transpose(1, 2) for n in ("q", "k", "v"))
    causal = attrs.get("causal", False)
    mask = None
    if causal:  # SDPA's is_causal is top-left aligned; the operator's is bottom-right
        q_len, kv_len = q.shape[2], k.shape[2]
        mask = torch.ones(q_len, kv_len, dtype=torch.bool).tril(kv_len - q_len)
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)


def sdpa_paged(inputs, attrs):
    outs = []
    for b in range(inputs["q"].shape[0]):
        n = int(inputs["seq_lens"][b])
        k, v = (gather_sequence(inputs[c], inputs["block_table"][b], n)[0].transpose(0, 1)
                for c in ("k_cache", "v_cache"))
        outs.append(torch.nn.functional.scaled_dot_product_attention(inputs["q"][b][:, None], k, v,
                                                                     enable_gqa=True)[:, 0])
    return torch.stack(outs)


TORCH_SIDE = {"flash_attention": sdpa_flash, "paged_attention": sdpa_paged}


def largest_ci_level(spec):
    cases = [c for c in load_cases(spec.cases_path, spec) if not c.is_slow]
    return max(cases, key=lambda c: spec.hbm_bytes(c))


def wall(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def simulate(op_names, levels, json_path, variants=None) -> int:
    from ptogym.bench import _simulate

    rows = []
    for name in op_names:
        spec = get_op(name)
        for case in [c for c in load_cases(spec.cases_path, spec) if c.id in levels]:
            chosen = spec if variants is None else dataclasses.replace(
                spec, extra={**spec.extra, "variants": tuple(v for v in variants if v != "default")})
            results = _simulate(chosen, case, make_case_inputs(spec, case))
            upstream = results.get("upstream", {}).get("simulated_us")
            for variant, result in results.items():
                us = result["simulated_us"]
                speedup = f"{upstream / us:.2f}x vs upstream" if upstream and us else ""
                print(f"{name} {case.id} {variant}: {us:.1f} us, {result['tasks']} tasks; {speedup}; "
                      f"{result.get('summary', '')}", flush=True)
                rows.append({"op": name, "level": case.id, "variant": variant, "simulated_us": us,
                             "tasks": result["tasks"], "summary": result.get("summary"),
                             "upstream_over_this": upstream / us if upstream and us else None})
            from ptogym.backends._pypto_worker import stop_workers

            stop_workers()  # pypto frees compiled kernels only at exit
    if json_path:
        Path(json_path).write_text(json.dumps(rows, indent=1))
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sim", action="store_true", help="cost-model timings of every variant instead")
    parser.add_argument("--ops", nargs="+", default=list(OPS))
    parser.add_argument("--json", help="--sim: write the rows here")
    parser.add_argument("--variants", nargs="+", help="--sim: only these variants besides the default")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (the machine is shared)")
    parser.add_argument("--levels", nargs="+", help="case ids instead of each operator's largest CI level")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.sim:
        return simulate(args.ops, args.levels or (), args.json, args.variants)
    interp = get_backend("interp")
    worst = 0.0
    for name in args.ops:
        spec = get_op(name)
        cases = load_cases(spec.cases_path, spec)
        chosen = [c for c in cases if c.id in args.levels] if args.levels else [largest_ci_level(spec)]
        for case in chosen:
            inputs = make_case_inputs(spec, case)
            spec.run(inputs, case.attrs, interp)  # build the kernel once, outside the timing
            interp_s = sdpa_s = float("inf")
            for _ in range(args.repeat):  # alternating, so both see the same machine load
                interp_s = min(interp_s, wall(lambda: spec.run(inputs, case.attrs, interp)))
                sdpa_s = min(sdpa_s, wall(lambda: TORCH_SIDE[name](inputs, case.attrs)))
            ratio = interp_s / sdpa_s
            worst = max(worst, ratio)
            print(f"{name} {case.id}: interp {interp_s * 1e3:.1f} ms, torch SDPA {sdpa_s * 1e3:.1f} ms, "
                  f"ratio {ratio:.2f}x (target <= {TARGET:g}x)")
    return 0 if worst <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
