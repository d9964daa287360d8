"""``ptogym tune`` measured on pypto-sim's cost model.

    python benchmarks/bench_tune.py search [--trials 40] [--workers 2] [--targets OP:LEVEL ...] [--db F]
    python benchmarks/bench_tune.py throughput [--trials 6] [--engines local ray] [--targets OP:LEVEL]

``search``: per target, the tuned table's (hand-tuned) configuration is measured, then
a sweep starts from the deliberately plain configuration (``TUNING.plain``: upstream's
settings) without the table as a seed; printed side by side: plain µs, hand-tuned µs,
the best found, and the trial at which the sweep first came within 3% of the
hand-tuned figure.  ``throughput``: the same trials (the first ``--trials`` distinct
configurations of the target's space, result cache off) with 1 and with 2 workers on
each engine: trials an hour and their ratio, and the peak resident memory of a trial
against its cap.  Real pypto: at most 2 trials at once, each capped (--memory-gb).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

from ptogym.tune.db import Database
from ptogym.tune.engines import open_engine
from ptogym.tune.sweep import Exhaustive, Space, trials_to_target, tune_level
from ptogym.tune.table import table_params
from ptogym.tune.trial import TrialRequest, execute, load_level

DEFAULT_TARGETS = ("inplace_add_rms_norm:level1", "rms_norm_linear:level1")


def _level(target: str):
    op, _, level = target.partition(":")
    spec, case, kernel, tuning = load_level(op, level)
    shape = spec.extra["tuning_shape"](case)
    return op, level, tuning, shape, table_params(kernel, shape)


def search(args) -> list[dict]:
    rows = []
    for target in args.targets:
        op, level, tuning, shape, base = _level(target)
        hand = execute(TrialRequest(op, level, {}, timeout_s=args.timeout, memory_bytes=args.memory_bytes))
        if hand["status"] != "ok":
            print(f"{target}: the tuned table's configuration did not measure: {hand.get('reason')}", file=sys.stderr)
            continue
        db = Database(f"{args.db}.{op}.{level}.{int(time.time())}.sqlite")  # a fresh sweep each run
        engine = open_engine("local", args.workers, args.memory_bytes)
        start = time.perf_counter()
        try:
            result = tune_level(op, level, trials=args.trials, workers=args.workers, engine=engine, db=db,
                                measure="pypto-sim", seed="plain", timeout_s=args.timeout,
                                memory_bytes=args.memory_bytes, verify_backend="pypto-sim")
        finally:
            engine.close()
        elapsed = time.perf_counter() - start
        plain = next((row for row in result.trials if row["origin"] == "plain"), None)
        row = {"target": target, "hand_us": hand["us"], "plain_us": plain and plain["us"],
               "best_us": result.best_us, "best_config": result.winner and result.winner["config"],
               "check": result.check, "trials": len(result.trials),
               "trials_to_3pct": trials_to_target(result.trials, hand["us"]), "elapsed_s": elapsed,
               "peak_rss_bytes": max((r["peak_rss_bytes"] or 0 for r in result.trials), default=0)}
        rows.append(row)
        print(f"{target:<32} plain {row['plain_us'] or float('nan'):8.2f} us  hand-tuned {row['hand_us']:8.2f} us  "
              f"best {row['best_us'] or float('nan'):8.2f} us  within 3% of hand-tuned at trial "
              f"{row['trials_to_3pct']} of {row['trials']}  ({elapsed:.0f} s, peak trial "
              f"{row['peak_rss_bytes'] / 2**30:.2f} GB)", flush=True)
    return rows


def throughput(args) -> list[dict]:
    os.environ["PTOGYM_NO_CACHE"] = "1"  # every trial compiles: the same work for every run
    op, level, tuning, shape, base = _level(args.targets[0])
    space = Space(tuning, shape, base, [base])
    chooser, configs = Exhaustive(space, [base]), []
    while len(configs) < args.trials and (proposal := chooser.ask()) is not None:
        if not tuning.violations({**base, **proposal[1]}, shape):
            configs.append(proposal[1])
    rows = []
    for engine_name in args.engines:
        rates = {}
        for workers in (1, 2):
            engine = open_engine(engine_name, workers, args.memory_bytes)
            start = time.perf_counter()
            try:
                futures = [engine.submit(TrialRequest(op, level, config, timeout_s=args.timeout,
                                                      memory_bytes=args.memory_bytes)) for config in configs]
                records = [future.result() for future in futures]
            finally:
                engine.close()
            elapsed = time.perf_counter() - start
            rates[workers] = 3600 * len(records) / elapsed
            peak = max(record.get("peak_rss_bytes") or 0 for record in records)
            cpu_s = sum(record.get("cpu_s") or 0.0 for record in records)
            statuses = sorted({record["status"] for record in records})
            rows.append({"engine": engine_name, "workers": workers, "trials": len(records), "elapsed_s": elapsed,
                         "trials_per_hour": rates[workers], "peak_rss_bytes": peak, "statuses": statuses,
                         "cpu_s": cpu_s,
                         "us": [record.get("us") for record in records]})
            print(f"{engine_name:<6} workers {workers}: {len(records)} trials in {elapsed:6.1f} s = "
                  f"{rates[workers]:6.0f} trials/h; peak trial {peak / 2**30:.2f} GB (cap "
                  f"{args.memory_bytes / 2**30:.1f} GB); {cpu_s / len(records):.1f} CPU s a trial, "
                  f"{cpu_s / elapsed:.2f} cores busy; {statuses}", flush=True)
        print(f"{engine_name:<6} 2 workers / 1 worker: {rates[2] / rates[1]:.2f}x", flush=True)
        same = rows[-1]["us"] == rows[-2]["us"]
        print(f"{engine_name:<6} same µs per trial with 1 and 2 workers: {same}", flush=True)
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("search", "throughput"))
    parser.add_argument("--targets", nargs="+", default=list(DEFAULT_TARGETS), help="OP:LEVEL")
    parser.add_argument("--trials", type=int, default=None)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--engines", nargs="+", default=["local", "ray"])
    parser.add_argument("--timeout", type=float, default=400.0)
    parser.add_argument("--memory-gb", type=float, default=4.0)
    parser.add_argument("--db", default=os.path.join(tempfile.gettempdir(), "bench-tune"))
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    args.memory_bytes = int(args.memory_gb * 2**30)
    args.trials = args.trials or (40 if args.what == "search" else 6)
    rows = search(args) if args.what == "search" else throughput(args)
    if args.json:
        from ptogym._io import write_text

        write_text(args.json, json.dumps(rows, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
