"""``ptogym tune OP [LEVEL...]``: search an operator's ``TUNING`` space on its levels.

Verdicts: ``[TUNE_OK]`` 0 every level has a winner that passed on the verify backend;
``[TUNE_FAIL]`` 1 a level has none (every candidate rejected, or the fastest ones
failed the check); ``[TUNE_ERROR]`` 2 a level where no trial could run at all, bad
arguments, a report that could not be written.  A level the measure refuses outright
(linear's mxfp8 on pypto-sim) stops after its first trial and counts only when no
other level could be tuned.  Progress lines (one per trial) and
the summary go to stderr, the verdict last on stdout.
"""
from __future__ import annotations

import importlib.util
import json
import sys

from ptogym._io import save_figure, write_failure, write_text
from ptogym.cli import UsageError, check_writable

VERDICTS = {0: "[TUNE_OK]", 1: "[TUNE_FAIL]", 2: "[TUNE_ERROR]"}
DEFAULT_DB = "ptogym-tune.sqlite"


def _levels(op: str, levels: list) -> list:
    """The levels to tune (default: the quick ones, the CI levels); UsageError otherwise."""
    from ptogym.ops import get_op
    from ptogym.tune.trial import load_level
    from ptogym.verify.cases import load_cases

    try:
        spec = get_op(op)
        cases = load_cases(spec.cases_path, spec)
        chosen = levels or [case.id for case in cases if case.is_quick]
        for level in chosen:
            load_level(op, level)
    except (KeyError, ValueError) as error:
        raise UsageError(str(error.args[0] if isinstance(error, KeyError) else error)) from None
    return chosen


def _check_arguments(args) -> None:
    from ptogym.tune.engines import check_workers
    from ptogym.tune.trial import resolve_measure

    if importlib.util.find_spec("optuna") is None:
        raise UsageError("ptogym tune needs Optuna: pip install 'ptogym[tune]'")
    if args.trials < 1:
        raise UsageError(f"--trials: must be >= 1, got {args.trials}")
    if args.timeout <= 0:
        raise UsageError(f"--timeout: must be > 0 seconds, got {args.timeout}")
    if args.memory_gb <= 0:
        raise UsageError(f"--memory-gb: must be > 0, got {args.memory_gb}")
    if args.address and args.engine != "ray":
        raise UsageError("--address: only with --engine ray (the address of a running Ray cluster)")
    if not args.address and (problem := check_workers(args.workers, int(args.memory_gb * 2**30))):
        raise UsageError(problem)
    try:
        resolve_measure(args.measure)
    except ValueError as error:
        raise UsageError(str(error)) from None
    if args.engine == "ray":
        if importlib.util.find_spec("ray") is None:
            raise UsageError("--engine ray: Ray is not installed; pip install 'ptogym[cluster]'")
    for option, path in (("--json", args.json), ("--plot", args.plot)):
        if path:
            check_writable(path, option)


def exit_code(results) -> int:
    """The worst level's code; levels the measure cannot run at all (``refused_by_measure``)
    count only when no level could be tuned."""
    from ptogym.tune.sweep import refused_by_measure

    codes = []
    measurable = [result for result in results
                  if not (result.trials and all(refused_by_measure(row) for row in result.trials))]
    for result in measurable or results:
        statuses = {row["status"] for row in result.trials}
        if result.winner is not None:
            codes.append(0)
        elif statuses <= {"failed", "timeout", "memory"}:
            codes.append(2)
        else:
            codes.append(1)
    return max(codes, default=2)


def apply_winners(op: str, results, log=sys.stderr) -> list[dict]:
    """Write each level's winner into its band of the tuned table (when it beats the
    table's own configuration, or the table's was not measured, and slows no other
    level of the band it was measured at - swept, or a band mate: ``sweep.band_verdict``);
    one winner per band: the one that
    gains most.  Returns what was written."""
    from ptogym.tune.sweep import band_verdict
    from ptogym.tune.table import applied_table, table_path, table_text
    from ptogym.tune.trial import load_level

    by_band: dict = {}
    for result in results:
        if result.winner is None:
            continue
        if result.table_us is not None and result.winner["us"] >= result.table_us:
            print(f"[tune] {result.level}: the tuned table's configuration is already the fastest; band "
                  f"{result.band} left as it is", file=log)
            continue
        refused = band_verdict(result, results)
        if refused:
            print(f"[tune] {result.level}: winner not applied to band {result.band}: {refused}", file=log)
            continue
        gain = (result.table_us / result.winner["us"]) if result.table_us else 1.0
        if result.band not in by_band or gain > by_band[result.band][0]:
            by_band[result.band] = (gain, result)
    applied = []
    for band, (gain, result) in by_band.items():
        kernel = load_level(op, result.level)[2]
        write_text(table_path(kernel), table_text(applied_table(kernel, band, result.winner["config"])))
        applied.append({"level": result.level, "band": band, "config": result.winner["config"],
                        "us": result.winner["us"], "table_us": result.table_us, "path": str(table_path(kernel))})
        print(f"[tune] applied {result.level}'s winner ({result.winner['us']:.2f} us"
              + (f", table {result.table_us:.2f} us" if result.table_us else "") + f") to band {band} of "
              f"{table_path(kernel)}", file=log)
    return applied


def plot(results, path: str) -> None:
    """µs of every trial in order (log scale), the best so far, the table's figure;
    rejected and failed trials as crosses below the fastest."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(results), 1, figsize=(8, 3.2 * len(results)), squeeze=False)
    for ax, result in zip(axes[:, 0], results):
        ok = [(index, row["us"]) for index, row in enumerate(result.trials, 1) if row["status"] == "ok"]
        bad = [index for index, row in enumerate(result.trials, 1) if row["status"] != "ok"]
        floor = min((us for _, us in ok), default=1.0) * 0.7  # where the trials without a figure sit
        if ok:
            ax.scatter(*zip(*ok), s=14, label="trial (µs)")
            best, steps = float("inf"), []
            for index, us in ok:
                best = min(best, us)
                steps.append((index, best))
            ax.step(*zip(*steps), where="post", label="best so far")
            ax.set_yscale("log")
        if bad:
            ax.scatter(bad, [floor] * len(bad), marker="x", color="red", label="rejected / failed")
        if result.table_us:
            ax.axhline(result.table_us, color="gray", linestyle="--", label="tuned table")
        ax.set_title(f"{result.op} {result.level} ({result.band})", fontsize=9)
        ax.set_xlabel("trial")
        ax.set_ylabel("simulated µs (log)")
        ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, path)


def _summary(results, log) -> None:
    from ptogym.tune.sweep import refused_by_measure

    for result in results:
        ok = sum(row["status"] == "ok" for row in result.trials)
        rejected = sum(row["status"] == "rejected" for row in result.trials)
        failed = len(result.trials) - ok - rejected
        line = f"{result.op} {result.level} ({result.band}): {len(result.trials)} trials, {ok} ok, " \
               f"{rejected} rejected, {failed} failed/timeout/memory"
        if result.winner:
            line += f"; winner {result.winner['us']:.2f} us" + (
                f" (table {result.table_us:.2f} us, {result.table_us / result.winner['us']:.2f}x)"
                if result.table_us else "") + f", passed on {result.check['backend']}: {json.dumps(result.winner['config'])}"
        elif result.trials and all(refused_by_measure(row) for row in result.trials):
            line += f"; not measurable this way: {result.trials[0]['reason'][:300]}"
        else:
            line += "; no winner"
        print(line, file=log)


def _cli(args) -> int:
    _check_arguments(args)
    levels = _levels(args.op, args.levels)
    from ptogym.tune.sweep import run_sweep

    results = run_sweep(args.op, levels, trials=args.trials, workers=args.workers, engine=args.engine,
                        address=args.address, db_path=args.db, measure=args.measure, seed=args.seed,
                        timeout_s=args.timeout, memory_bytes=int(args.memory_gb * 2**30),
                        verify_backend=args.verify_backend,
                        band_check=args.band_check if args.apply else "swept")
    _summary(results, sys.stderr)
    code = exit_code(results)
    applied = []
    try:
        if args.apply:
            applied = apply_winners(args.op, results)
        if args.json:
            write_text(args.json, json.dumps({"op": args.op, "levels": [r.to_dict() for r in results],
                                              "applied": applied, "verdict": VERDICTS[code].strip("[]")},
                                             indent=2, default=str))
            print(f"wrote {args.json}", file=sys.stderr)
        if args.plot:
            plot(results, args.plot)
            print(f"wrote {args.plot}", file=sys.stderr)
    except OSError as error:
        print(f"error: {write_failure(error.filename or args.json or args.plot, error)}", file=sys.stderr)
        code = 2
    print(VERDICTS[code])
    return code


def add_cli(subparsers) -> None:
    from ptogym.tune.engines import ENGINES
    from ptogym.tune.sweep import BAND_CHECKS

    parser = subparsers.add_parser("tune", help="search an operator's build parameters on the cost model")
    parser.add_argument("op", help="an operator whose kernel declares TUNING (or its package directory)")
    parser.add_argument("levels", nargs="*", help="case ids (default: the quick levels)")
    parser.add_argument("--trials", type=int, default=40, help="trials per level, those in --db included")
    parser.add_argument("--workers", type=int, default=1, help="trials at once (local: at most the cores)")
    parser.add_argument("--engine", choices=ENGINES, default="local", help="local process pool or Ray tasks")
    parser.add_argument("--address", help="--engine ray: a running cluster's address (default: a local runtime)")
    parser.add_argument("--db", default=DEFAULT_DB, help=f"the SQLite database (default {DEFAULT_DB})")
    parser.add_argument("--apply", action="store_true", help="write the winners into the tuned table")
    parser.add_argument("--json", help="write the levels, trials and winners as JSON")
    parser.add_argument("--plot", help="write a PNG of µs over trials")
    parser.add_argument("--measure", default="pypto-sim",
                        help="pypto-sim (the cost model, default) or MODULE:FUNCTION f(spec, case) -> {'us': ...}")
    parser.add_argument("--seed", choices=("table", "plain"), default="table",
                        help="first trial: the tuned table's configuration or TUNING.plain")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds a trial may take (default 600)")
    parser.add_argument("--memory-gb", type=float, default=4.0, help="resident GB a trial may hold (default 4)")
    parser.add_argument("--band-check", choices=BAND_CHECKS, default="ci",
                        help="--apply: levels a winner is measured at before it goes into a band - the swept "
                             "ones, also the other CI levels of the band (default), or every level of it (slow "
                             "model shapes too)")
    parser.add_argument("--verify-backend", choices=("pypto-sim", "interp"), default="pypto-sim",
                        help="where the winner is checked against the golden (default: pypto's interpreter)")
    parser.set_defaults(func=_cli)
