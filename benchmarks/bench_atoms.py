"""The atom operators under pypto 0.2.0's cost model (and the interpreter against its
golden), writing the figures the pattern cards and ``ptogym patterns show`` quote.

    python benchmarks/bench_atoms.py                       # default + upstream + chain, every op
    python benchmarks/bench_atoms.py --ops linear --levels level1 --sweep
    python benchmarks/bench_atoms.py --interp              # interpreter / golden, every operator (table)

For each operator and level: simulated µs of the default kernel and of every
variant it declares (``kernel.VARIANTS``, upstream's configuration), with
``--sweep`` of the candidate tile/loop configurations in ``SWEEPS``; for a fused
operator the chain of its atom operators run as separate kernels on the same
shapes (their µs summed; intermediates go through HBM) and the fused/chain ratio.
Matmul operators report TFLOPS against the cube peak, all report GB/s against the
nominal DDR rate and the per-core copy asymptote (``ptogym.atoms.measure``).
Every simulation runs in a pypto-sim worker process of its own (pypto frees compiled
kernels only at exit).  Run it under ``flock /tmp/ptogym-pypto.lock``: large shapes take
~30-60 s and GBs each.  Results merge into ``ptogym/patterns/measured.json``.
"""
import argparse
import ctypes
import json
import math
import sys
import time
import warnings
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ptogym.atoms import measure  # noqa: E402
from ptogym.backends import get_backend  # noqa: E402
from ptogym.ops import OP_NAMES, get_op  # noqa: E402
from ptogym.verify.cases import Case, TensorSpec, load_cases  # noqa: E402
from ptogym.verify.runner import make_case_inputs  # noqa: E402

MEASURED = ROOT / "ptogym" / "patterns" / "measured.json"
OPS = ("rms_norm", "per_token_quant", "dequant", "linear", "rms_norm_linear", "rms_norm_linear_quant")
DEFAULT_LEVELS = {
    "rms_norm": ("level0", "level1", "level3", "mla_kv_norm_t1024", "qwen3_input_norm_t128"),
    "per_token_quant": ("level0", "level1", "level3", "qwen3_t128"),
    "dequant": ("level0", "level1", "level3"),
    "linear": ("mla_q_a_t1", "level1", "mla_kv_t128", "level5", "qwen3_qkv_t16", "qwen3_qkv_t1024"),
    # the fused operators: every level (the target is "faster than the chain on every level")
    "rms_norm_linear": ("level0", "level1", "level2", "level3", "level4", "level5", "mla_kv_t128", "qwen3_t16",
                        "qwen3_t1024"),
    "rms_norm_linear_quant": ("level0", "level1", "level2", "level3", "level4", "level5", "mla_kv_t128",
                              "qwen3_t16", "qwen3_t1024"),
}
#: tuning candidates (kernel build kwargs) simulated with --sweep
SWEEPS = {
    "rms_norm": {"unroll_64_16_4": {"unroll": (64, 16, 4, 1)}, "unroll_16_4": {"unroll": (16, 4, 1)},
                 "unroll_8": {"unroll": (8, 1)}},
    "linear": {"n64": {"n_tile": 64}, "n256": {"n_tile": 256}, "k128": {"k_tile": 128},
               "unroll_16": {"unroll": (16, 1)}, "unroll_64_16": {"unroll": (64, 16, 4, 1)}},
    "rms_norm_linear": {"n64": {"n_tile": 64}, "unroll_16": {"unroll": (16, 1)},
                        "unroll_64_16": {"unroll": (64, 16, 4, 1)}},
}


def _simulate(op_name, case, kwargs):
    """Cost-model µs, tasks and cores of one launch (``kwargs``: build overrides)."""
    from ptogym.backends import get_backend

    spec = get_op(op_name)
    sim = get_backend("pypto-sim")
    sim.max_compute_elements = 0
    variant = None
    kernel = _kernel(op_name)
    if kwargs:
        kernel.VARIANTS["_bench"] = kwargs
        variant = "_bench"
    inputs = make_case_inputs(spec, case)
    try:
        with sim.cost_only():  # timings only: pypto's interpreter computes no outputs here
            _, report = spec.run(inputs, case.attrs, sim, variant=variant)
    finally:
        getattr(kernel, "VARIANTS", {}).pop("_bench", None)
    return {"us": report.simulated_us, "kernel_us": report.extra.get("kernel_us"), "tasks": report.tasks,
            "cores": report.cores}


def simulate(op_name, case, kwargs=None):
    from ptogym.backends._pypto_worker import stop_workers

    try:
        return _simulate(op_name, case, kwargs)
    finally:  # pypto frees compiled kernels only at exit: a fresh worker process per simulation
        stop_workers()


def _chain_cases(op_name, case):
    """The atom operators' cases a fused operator replaces, on the same shapes."""
    x, weight = case.inputs["x"], case.inputs["weight"]
    rows, k, n = math.prod(x.shape[:-1]), x.shape[-1], weight.shape[0]
    eps = case.attrs.get("eps", 1e-6)

    def make(op, inputs, attrs=None):
        specs = {name: TensorSpec(tuple(shape), dtype) for name, (shape, dtype) in inputs.items()}
        return op, Case(op=op, id=f"{case.id}-chain", description="chain", seed=case.seed, inputs=specs,
                        rtol=1, atol=1, attrs=attrs or {})

    norm = make("rms_norm", {"x": ((rows, k), x.dtype), "gamma": ((k,), x.dtype)}, {"eps": eps})
    if op_name == "rms_norm_linear":
        lin = {"x": ((rows, k), x.dtype), "weight": ((n, k), x.dtype)}
        if "bias" in case.inputs:
            lin["bias"] = ((n,), x.dtype)
        return [norm, make("linear", lin)]
    quant = make("per_token_quant", {"x": ((rows, k), x.dtype)})
    lin = make("linear", {"x": ((rows, k), torch.int8), "weight": ((n, k), torch.int8),
                          "x_scale": ((rows, 1), torch.float32), "w_scale": ((n,), torch.float32)},
               {"quant_mode": "int8_w8a8"})
    return [norm, quant, lin]


def bench_level(op_name, case, model, sweep=False, log=print, variants=True):
    spec = get_op(op_name)
    flops = spec.extra.get("flops")
    flop_count = flops(case) if flops else None

    def entry(result):
        return {**result, **measure.figures(model, result["us"], spec.hbm_bytes(case), flop_count)}

    row = {"shapes": case.shape_summary, "default": entry(simulate(op_name, case))}
    log(f"{op_name} {case.id} [{case.shape_summary}]\n  default   {row['default']['us']:9.1f} us  "
        f"tasks {row['default']['tasks']}  {measure.summary(row['default'])}")
    kernel = _kernel(op_name)
    configs = {name: None for name in getattr(kernel, "VARIANTS", {})} if variants else {}
    if sweep:
        configs.update(SWEEPS.get(op_name, {}))
    for name, kwargs in configs.items():
        result = entry(simulate(op_name, case, kwargs) if kwargs else _simulate_variant(op_name, case, name))
        result["default_speedup"] = result["us"] / row["default"]["us"]
        row[name] = result
        log(f"  {name:<9} {result['us']:9.1f} us  tasks {result['tasks']}  default is "
            f"{result['default_speedup']:.2f}x faster")
    if "chain" in spec.extra:
        chain = _chain_cases(op_name, case)
        parts = {op: simulate(op, chain_case) for op, chain_case in chain}
        row["chain"] = _chain_row(parts, row["default"])
        log(f"  chain     {row['chain']['us']:9.1f} us  ({' + '.join(f'{op} {us:.1f}' for op, us in row['chain']['parts'].items())})  "
            f"fused is {row['chain']['fused_speedup']:.2f}x faster; whole kernels {row['chain']['kernel_us']:.1f} "
            f"against {row['default']['kernel_us']:.1f} us: {row['chain']['fused_kernel_speedup']:.2f}x")
    return row


def _chain_row(parts, fused):
    """The chain's figures against the fused kernel's, both ways of timing a kernel:
    ``us`` first task start to last task end (pypto's "AICore End-to-End Time"; a chain
    summed so pays no start-up at all), ``kernel_us`` the cost model's whole kernel
    (its "Total Cycles": each kernel of the chain pays its own scheduler start-up)."""
    total, kernels = sum(p["us"] for p in parts.values()), sum(p["kernel_us"] for p in parts.values())
    return {"parts": {op: p["us"] for op, p in parts.items()}, "us": total, "fused_speedup": total / fused["us"],
            "kernel_parts": {op: p["kernel_us"] for op, p in parts.items()}, "kernel_us": kernels,
            "fused_kernel_speedup": kernels / fused["kernel_us"]}


def _kernel(op_name):
    return __import__(f"ptogym.ops.{op_name}.kernel", fromlist=["VARIANTS"])


def _simulate_variant(op_name, case, name):
    return simulate(op_name, case, dict(_kernel(op_name).VARIANTS[name]))


def interp_ratio(op_name, repeat=15, include_slow=False):
    """Interpreter / golden wall time at the largest non-slow level (most input elements;
    with *include_slow*, the largest level of all).

    Golden and interpreter alternate on fresh copies of the same inputs and each keeps
    its fastest run: on a shared machine the minimum is the figure least disturbed by
    other processes (a median moves with the load, and with whether the allocator
    hands the golden's large temporaries back to the system between runs)."""
    spec = get_op(op_name)
    cases = [c for c in load_cases(spec.cases_path, spec) if include_slow or not c.is_slow]
    case = max(cases, key=lambda c: sum(math.prod(t.shape) for t in c.inputs.values()))
    inputs = make_case_inputs(spec, case)
    interp = get_backend("interp")
    calls = {"golden": lambda x: spec.golden(x, case.attrs), "interp": lambda x: spec.run(x, case.attrs, interp)}
    best = dict.fromkeys(calls, math.inf)
    for _ in range(repeat + 1):  # the first round warms caches and the kernel cache up
        for name, call in calls.items():
            fresh = {k: v.clone() for k, v in inputs.items()}
            start = time.perf_counter()
            call(fresh)
            best[name] = min(best[name], time.perf_counter() - start) if _ else math.inf
    return case.id, best["interp"], best["golden"], best["interp"] / best["golden"]


def _keep_freed_memory():
    """glibc returns large freed blocks to the system and maps them again on the next
    allocation: the golden's whole-tensor temporaries then pay page faults on some runs
    and not on others (2 ms or 11 ms for the same call).  Keeping freed memory in the
    heap gives both sides their steady-state speed."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc: nothing to tune
        return
    mmap_threshold, trim_threshold = -3, -1  # mallopt's M_MMAP_THRESHOLD, M_TRIM_THRESHOLD
    libc.mallopt(mmap_threshold, 1 << 30)
    libc.mallopt(trim_threshold, 1 << 30)


def interp_table(op_names, threads, include_slow=False):
    """The interpreter / golden table of *op_names*; exit status 1 when one is above 2x."""
    torch.set_num_threads(threads)
    warnings.simplefilter("ignore")  # advice from the kernels is the lint's business, not the timing's
    _keep_freed_memory()
    print(f"{'operator':<22} {'level':<16} {'interp ms':>10} {'golden ms':>10} {'ratio':>7}")
    worst = 0.0
    for op_name in op_names:
        level, interp_s, golden_s, ratio = interp_ratio(op_name, 3 if include_slow else 15, include_slow)
        worst = max(worst, ratio)
        print(f"{op_name:<22} {level:<16} {interp_s * 1e3:10.2f} {golden_s * 1e3:10.2f} {ratio:6.2f}x"
              f"{'' if ratio <= 2 else '  ABOVE 2x'}", flush=True)
    print(f"[{'BENCH_OK' if worst <= 2 else 'BENCH_SLOW'}] worst interp/golden ratio {worst:.2f}x (target <= 2x)")
    return 0 if worst <= 2 else 1


def _chain_cell(total, parts, speedup) -> str:
    return f"{total:.1f} = {' + '.join(f'{op} {us:.1f}' for op, us in parts.items())} (**{speedup:.2f}x**)"


def markdown_table(op_name, rows, peak) -> str:
    """The measured-figures table of a fused operator's README and card, from its JSON rows."""
    lines = [f"| level | shapes | fused µs | tasks | TFLOPS (% of {peak:.1f} peak) | GB/s (% of DDR / of copy asymptote) "
             "| upstream config µs (fused speedup) | chain of atoms µs (fused speedup) "
             "| whole kernels: fused µs, chain µs (fused speedup) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for level, row in rows.items():
        fused = row["default"]
        upstream = f"{row['upstream']['us']:.1f} ({row['upstream']['us'] / fused['us']:.2f}x)" if "upstream" in row else "-"
        cells = [level, row["shapes"], f"{fused['us']:.1f}", str(fused["tasks"]),
                 f"{fused.get('tflops', 0):.1f} ({100 * fused.get('tflops', 0) / peak:.1f}%)",
                 f"{fused['gbps']:.0f} ({fused['percent_of_ddr']:.0f}% / {fused['percent_of_copy_asymptote']:.1f}%)",
                 upstream]
        chain = row["chain"]
        cells += [_chain_cell(chain["us"], chain["parts"], chain["fused_speedup"]),
                  f"{fused['kernel_us']:.1f}, " + _chain_cell(chain["kernel_us"], chain["kernel_parts"],
                                                              chain["fused_kernel_speedup"])]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", nargs="+", default=list(OPS))
    parser.add_argument("--levels", nargs="+", help="case ids (default: DEFAULT_LEVELS)")
    parser.add_argument("--sweep", action="store_true", help="also simulate the SWEEPS tuning candidates")
    parser.add_argument("--interp", action="store_true",
                        help="only the interpreter / golden ratios at each operator's largest non-slow level "
                             "(all registered operators unless --ops)")
    parser.add_argument("--include-slow", action="store_true",
                        help="with --interp: each operator's largest level including the slow ones (best of 3; "
                             "GBs of memory for the largest)")
    parser.add_argument("--no-variants", action="store_true",
                        help="skip kernel.VARIANTS (keeps their figures from the JSON file: use only when the "
                             "variants' kernels did not change)")
    parser.add_argument("--json", default=str(MEASURED), help="merge results into this file")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads for --interp (default 1: on a shared machine many small ops "
                             "otherwise wait on busy intra-op threads, which the few large golden ops do not)")
    parser.add_argument("--table", action="store_true",
                        help="print the fused operators' measured tables (Markdown) from the JSON file and exit")
    args = parser.parse_args(argv)
    if args.table:
        from ptogym.backends._pypto_runtime import platform_model

        measured = json.loads(Path(args.json).read_text())
        peak = measure.cube_peak_tflops(platform_model())
        for op_name in args.ops:
            rows = {level: measured[op_name][level] for level in DEFAULT_LEVELS[op_name]
                    if "chain" in measured.get(op_name, {}).get(level, {})}
            if rows:
                print(f"{op_name}\n{markdown_table(op_name, rows, peak)}\n")
        return 0
    if args.interp:
        return interp_table(args.ops if args.ops != list(OPS) else list(OP_NAMES), args.threads, args.include_slow)
    from ptogym.backends._pypto_runtime import platform_model

    model = platform_model()
    print(f"cube peak {measure.cube_peak_tflops(model):.1f} TFLOPS, nominal DDR {model['platform_ddr_gbps']:.0f} GB/s, "
          f"copy asymptote {model['hbm_gbps']:.0f} GB/s")
    path = Path(args.json)
    measured = json.loads(path.read_text()) if path.exists() else {}
    for op_name in args.ops:
        spec = get_op(op_name)
        wanted = args.levels or DEFAULT_LEVELS.get(op_name, ())
        for case in [c for c in load_cases(spec.cases_path, spec) if c.id in wanted]:
            row = bench_level(op_name, case, model, args.sweep, variants=not args.no_variants)
            if args.no_variants:
                old = measured.get(op_name, {}).get(case.id, {})
                for name in getattr(_kernel(op_name), "VARIANTS", {}):
                    if name in old:
                        row[name] = {**old[name], "default_speedup": old[name]["us"] / row["default"]["us"]}
            measured.setdefault(op_name, {})[case.id] = row
            path.write_text(json.dumps(measured, indent=1, sort_keys=True) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
