"""``ptogym bench``: per operator x level, how fast the interpreter runs next to the
plain-torch golden, and how fast the kernel would run on a 910B according to real
pypto's cost model.

Columns: interpreter and golden wall time (median of --repeat runs, measured side by
side in one process) and their ratio; simulated device time (pypto-sim, µs); the
HBM bytes the kernel must move; the effective GB/s that implies; the modeled HBM
ceiling (``platform_model()``, see docs/pypto-sim.md) and the percent of it reached;
tasks and cores the cost model scheduled.  Kernel variants an operator declares
(``SPEC.extra["variants"]``, e.g. upstream's configuration) are simulated side by
side with the default.
"""
from __future__ import annotations

import json
import resource
import statistics
import sys
import time

from ptogym._io import save_figure, write_failure, write_text
from ptogym.backends import BackendUnavailable, add_cli_options, configure_from_cli, get_backend
from ptogym.cli import UsageError, check_writable, verdict
from ptogym.ops import OP_NAMES, get_op
from ptogym.verify.cases import load_cases
from ptogym.verify.runner import make_case_inputs


def _median_wall(fn, prepare, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        args = prepare()
        start = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _fresh(inputs):
    return lambda: ({k: v.clone() for k, v in inputs.items()},)


def bench_case(spec, case, *, repeat: int = 3, simulate: bool = True) -> dict:
    inputs = make_case_inputs(spec, case)
    interp = get_backend("interp")
    row = {"op": spec.name, "level": case.id, "shapes": {k: list(v.shape) for k, v in case.inputs.items()},
           "hbm_bytes": spec.hbm_bytes(case)}
    row["golden_s"] = _median_wall(lambda x: spec.golden(x, case.attrs), _fresh(inputs), repeat)
    row["interp_s"] = _median_wall(lambda x: spec.run(x, case.attrs, interp), _fresh(inputs), repeat)
    row["interp_over_golden"] = row["interp_s"] / row["golden_s"]
    if simulate:
        from ptogym.backends._pypto_worker import stop_workers

        try:
            row["sim"] = _simulate(spec, case, inputs)
        except NotImplementedError as refusal:  # a mode pypto-sim cannot run (linear's mxfp8): say so, go on
            row["sim_refused"] = str(refusal)
        finally:  # pypto keeps every compiled kernel's memory: a fresh worker for each case
            stop_workers()
    row["memory"] = _memory(row)
    return row


def _memory(row: dict) -> dict:
    """Peak resident bytes so far of this process and of the case's pypto worker (its g++
    included); the worker's is None when nothing ran there."""
    worker = [sim["worker_peak_rss_bytes"] for sim in row.get("sim", {}).values() if sim.get("worker_peak_rss_bytes")]
    return {"bench_peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,  # KiB on Linux
            "worker_peak_rss_bytes": max(worker, default=None)}


def _simulate(spec, case, inputs) -> dict:
    """Cost-model figures for the default kernel and every declared variant."""
    from ptogym.backends._pypto_runtime import platform_model

    ceiling_gbps = platform_model()["hbm_gbps"]
    hbm_bytes = spec.hbm_bytes(case)
    sim = get_backend("pypto-sim")
    results = {}
    for variant in (None, *spec.extra.get("variants", {})):
        with sim.cost_only():  # numbers are the runner's business
            _, report = spec.run({k: v.clone() for k, v in inputs.items()}, case.attrs, sim, variant=variant)
        us = report.simulated_us
        gbps = hbm_bytes / (us * 1e-6) / 1e9 if us else None
        results[variant or "default"] = {
            "simulated_us": us, "effective_gbps": gbps, "ceiling_gbps": ceiling_gbps,
            "percent_of_ceiling": 100 * gbps / ceiling_gbps if gbps else None,
            "ceiling_us": hbm_bytes / (ceiling_gbps * 1e9) * 1e6, "tasks": report.tasks, "cores": report.cores,
            "artifacts": report.artifacts, "build": report.extra.get("build"),
            "cache": report.extra.get("cache"), "worker_peak_rss_bytes": report.extra.get("worker_peak_rss_bytes"),
        }
        summary = spec.extra.get("sim_summary")  # operator-specific figures, e.g. TFLOPS against the cube peak
        if summary and us:
            results[variant or "default"]["summary"] = summary(case, us)
    default_us = results["default"]["simulated_us"]
    for variant in results.values():
        variant["default_speedup"] = variant["simulated_us"] / default_us if default_us else None
    return results


def _fmt_row(row: dict) -> str:
    text = (f"{row['op']:<22} {row['level']:<8} interp {row['interp_s'] * 1e3:8.1f} ms  golden "
            f"{row['golden_s'] * 1e3:8.1f} ms  ratio {row['interp_over_golden']:5.2f}x  "
            f"HBM {row['hbm_bytes'] / 1e6:8.2f} MB")
    for name, sim in row.get("sim", {}).items():
        text += (f"\n{'':31}{name:<10} sim {sim['simulated_us']:8.1f} us  {sim['effective_gbps']:7.1f} GB/s = "
                 f"{sim['percent_of_ceiling']:5.1f}% of {sim['ceiling_gbps']:.0f} GB/s  "
                 f"tasks {sim['tasks']}  cores {sim['cores']}  ({_provenance(sim)})"
                 + (f"  default is {sim['default_speedup']:.2f}x faster" if name != "default" else "")
                 + (f"\n{'':42}{sim['summary']}" if sim.get("summary") else "")
                 + (f"\n{'':31}artifacts kept in {sim['artifacts']}" if sim["artifacts"] else ""))
    if "sim_refused" in row:
        text += f"\n{'':31}not simulated: {row['sim_refused']}"
    memory = row["memory"]
    text += f"\n{'':31}memory: bench {memory['bench_peak_rss_bytes'] / 2**30:.2f} GB peak"
    if memory["worker_peak_rss_bytes"]:
        text += f", pypto worker {memory['worker_peak_rss_bytes'] / 2**30:.2f} GB peak"
    return text


def _provenance(sim: dict) -> str:
    """Which build the figures come from and whether they were simulated now or cached."""
    cached = "cached result" if sim.get("cache") == "hit" else "simulated now"
    return f"{sim.get('build') or 'full'} build, {cached}"


def select(ops, levels=None) -> list[tuple]:
    """(spec, case) pairs to bench; ValueError naming unknown operators or levels."""
    unknown = [name for name in ops if name not in OP_NAMES]
    if unknown:
        raise ValueError(f"unknown operator(s) {', '.join(unknown)}; known: {', '.join(OP_NAMES)}")
    pairs = []
    for name in ops:
        spec = get_op(name)
        pairs += [(spec, case) for case in load_cases(spec.cases_path, spec) if not levels or case.id in levels]
    found = {case.id for _, case in pairs}
    if missing := [level for level in levels or () if level not in found]:
        raise ValueError(f"unknown level(s) {', '.join(missing)} for {', '.join(ops)}")
    return pairs


def run_bench(ops, levels=None, *, repeat: int = 3, simulate: bool = True, log=print) -> list[dict]:
    rows = []
    pairs = select(ops, levels)
    start = time.perf_counter()
    for i, (spec, case) in enumerate(pairs, 1):
        log(f"[{i}/{len(pairs)}] {spec.name} {case.id} ... (elapsed {time.perf_counter() - start:.1f}s)")
        row = bench_case(spec, case, repeat=repeat, simulate=simulate)
        log(_fmt_row(row))
        rows.append(row)
    return rows


def plot(rows: list[dict], path: str) -> None:
    """Simulated time per level against the modeled ceiling and upstream's anchors."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in rows if "sim" in r]
    single_op = len({r["op"] for r in rows}) == 1
    labels = [r["level"] if single_op else f"{r['op']}\n{r['level']}" for r in rows]
    x = range(len(rows))
    fig, ax = plt.subplots(figsize=(max(6, 1.4 * len(rows)), 4.5))
    variants = list(rows[0]["sim"]) if rows else []
    width = 0.8 / max(1, len(variants) + 1)
    for j, variant in enumerate(variants):
        ax.bar([i + j * width for i in x], [r["sim"][variant]["simulated_us"] for r in rows], width, label=variant)
    ax.bar([i + len(variants) * width for i in x], [r["sim"]["default"]["ceiling_us"] for r in rows], width,
           label="HBM ceiling (bytes / modeled GB/s)", color="lightgray")
    # anchors sit on the upstream variant's bar when there is one
    offset = width * variants.index("upstream") if "upstream" in variants else 0
    anchors = [(i + offset, get_op(r["op"]).extra.get("anchors_us", {}).get(r["level"])) for i, r in zip(x, rows)]
    anchors = [(i, a) for i, a in anchors if a]
    if anchors:
        ax.scatter([i for i, _ in anchors], [a for _, a in anchors], marker="x", color="black", zorder=3,
                   label="upstream anchor (issue figures)")
    ax.set_xticks([i + width * len(variants) / 2 for i in x], labels, fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("simulated device time (µs, log scale)")
    ax.set_title(("{} - ".format(rows[0]["op"]) if single_op and rows else "") + "pypto 0.2.0 cost model, DAV_2201")
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path)


def _cli(args) -> int:
    ops = args.ops or list(OP_NAMES)
    if args.repeat < 1:
        raise UsageError(f"--repeat: must be >= 1, got {args.repeat}")
    for option, path in (("--json", args.json), ("--plot", args.plot)):
        if path:
            check_writable(path, option)
    try:
        select(ops, args.levels)  # every name checked before anything runs
    except ValueError as error:
        raise UsageError(str(error)) from None
    configure_from_cli(args)
    simulate = not args.no_sim
    if simulate:
        try:
            get_backend("pypto-sim").check_available()
        except BackendUnavailable as error:
            raise UsageError(f"{error}; use --no-sim for wall times only") from None
    rows = run_bench(ops, args.levels, repeat=args.repeat, simulate=simulate)
    for option, path, write in (("--json", args.json, lambda: write_text(args.json, json.dumps(rows, indent=2))),
                                ("--plot", args.plot, lambda: plot(rows, args.plot))):
        if not path:
            continue
        try:
            write()
        except OSError as error:
            print(f"error: {option}: {write_failure(path, error)}", file=sys.stderr)
            print(verdict(2))
            return 2
        print(f"wrote {path}")
    print(verdict(0, precision=False))
    return 0


def add_cli(subparsers) -> None:
    parser = subparsers.add_parser("bench", help="interpreter vs golden wall time, simulated device time, GB/s")
    parser.add_argument("ops", nargs="*", help="operators (default: all)")
    parser.add_argument("--levels", nargs="+", help="case ids (default: all levels)")
    parser.add_argument("--repeat", type=int, default=3, help="wall-time repetitions (median)")
    parser.add_argument("--no-sim", action="store_true", help="skip the pypto cost model")
    parser.add_argument("--json", help="write the table as JSON")
    parser.add_argument("--plot", help="write a PNG of simulated time per level")
    add_cli_options(parser)
    parser.set_defaults(func=_cli)
