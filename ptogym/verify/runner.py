"""Run an operator's case levels through a backend and judge them against the golden.

For every case: inputs from the case seed, the golden on copies of them (operators
may write their inputs in place), the kernel through the backend, then
``detailed_tensor_compare`` per output with that output's own tolerance
(``Case.tolerance``: the cases.json entry, or the level's default).  Each case's
report names, per output, the bounds that applied, where the file states them and why.

The verdict follows the three-state protocol, printed as the last line and
returned as the exit code:

=================== ==== ==============================================================
``[PRECISION_PASS]`` 0   every selected case ran and every output is within tolerance
``[PRECISION_FAIL]`` 1   a case ran and an output is out of tolerance
``[RUN_ERROR]``      2   something could not run (operator, case file, level, backend,
                         kernel exception, invalid inputs); dominates a FAIL
``[PRECISION_PASS_LENIENT]`` 3  every case within tolerance, but judged in lenient mode
                         (``PTOGYM_LENIENT=1``, ``lenient()``, ``ptogym interp --lenient``):
                         constraint violations only warned, so it is no plain pass
=================== ==== ==============================================================

``run_case`` is the single per-case code path, shared with the pytest collection;
``run_cases`` is the Python API behind ``ptogym run``.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Callable, TextIO

from ptogym import backends, ops
from ptogym._io import write_failure, write_text
from ptogym.backends.base import LaunchReport
from ptogym.cli import MARKERS, UsageError, check_writable, add_sanitize_option, lenient_exit, sanitizing, verdict, worst_exit

from .cases import Case, Tolerance, load_cases

if TYPE_CHECKING:  # torch and the comparison load only when a case runs (fast --help, list)
    from ptogym.interp.checks import Leniency

    from .compare import Result

PASS, FAIL, ERROR = "PASS", "FAIL", "ERROR"
_EXIT_CODES = {PASS: 0, FAIL: 1, ERROR: 2}


@dataclass
class CaseResult:
    """What happened to one case: status, per-output comparisons or the reason it could not run."""

    op: str
    case: Case
    status: str = ERROR
    outputs: dict[str, Result] = field(default_factory=dict)
    tolerances: dict[str, Tolerance] = field(default_factory=dict)
    reason: str | None = None
    traceback: str | None = None
    timings: dict[str, float] = field(default_factory=dict)
    launch: LaunchReport | None = None

    def summary_line(self) -> str:
        """id, inputs, status, details, wall seconds and, when the backend simulated it, device µs."""
        details = self.reason if self.status == ERROR else " | ".join(r.brief() for r in self.outputs.values())
        seconds = sum(self.timings.values())
        simulated = self.launch.simulated_us if self.launch is not None else None
        build = self.launch.extra.get("build") if self.launch is not None else None
        measured = f"  sim {simulated:.1f} us" + (f" ({build} build)" if build else "") if simulated is not None else ""
        return f"{self.case.id}  {self.case.shape_summary}  {self.status}  {details}  {seconds:.2f}s{measured}"

    def report(self, verbose: bool = False) -> str:
        """The summary line, then why it did not pass: failing outputs' reports or the error."""
        lines = [self.summary_line()]
        if self.launch is not None and self.launch.artifacts:
            lines.append(f"  artifacts kept in {self.launch.artifacts}")
        for name, tolerance in self.tolerances.items():
            result = self.outputs.get(name)
            verdict = "" if result is None else "within " if result.all_close else "OUT OF "
            lines.append(f"  {name}: {verdict}{tolerance.describe()}")
        lines += [result.report() for result in self.outputs.values() if not result.all_close]
        if verbose and self.traceback:
            lines.append(self.traceback.rstrip())
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.case.id,
            "status": self.status,
            "inputs": self.case.shape_summary,
            "tolerances": {name: tolerance.to_dict() for name, tolerance in self.tolerances.items()},
            "reason": self.reason,
            "traceback": self.traceback,
            "timings_s": dict(self.timings),
            "launch": asdict(self.launch) if self.launch is not None else None,
            "outputs": {name: result.to_dict() for name, result in self.outputs.items()},
        }


@dataclass
class RunResult:
    """All selected cases of one operator; ``error`` says why none could run."""

    op: str
    backend: str | None = None
    cases: list[CaseResult] = field(default_factory=list)
    error: str | None = None
    leniency: Leniency | None = None  # set when the cases ran

    @property
    def exit_code(self) -> int:
        if self.error is not None:
            return 2
        return lenient_exit(max((_EXIT_CODES[case.status] for case in self.cases), default=0), self.leniency)

    @property
    def marker(self) -> str:
        return MARKERS[self.exit_code]

    def summary(self) -> str:
        if self.error is not None:
            return f"{self.op}: {self.error}"
        counts = {status: sum(case.status == status for case in self.cases) for status in (PASS, FAIL, ERROR)}
        failed = [case.case.id for case in self.cases if case.status != PASS]
        lenient = f"; {self.leniency.describe()}" if self.leniency is not None and self.leniency.lenient else ""
        return (f"{self.op} [{self.backend}]: {counts[PASS]} passed, {counts[FAIL]} failed, "
                f"{counts[ERROR]} errors" + (f" ({', '.join(failed)})" if failed else "") + lenient)

    def to_dict(self) -> dict[str, Any]:
        lenient = self.leniency is not None and self.leniency.lenient
        return {"op": self.op, "backend": self.backend, "verdict": self.marker.strip("[]"),
                "exit_code": self.exit_code, "error": self.error, "lenient": lenient,
                "downgraded_violations": self.leniency.downgraded if lenient else 0,
                "cases": [case.to_dict() for case in self.cases]}


# ------------------------------------------------------------------ one case
class _StageFailed(Exception):
    """A stage of a case raised; the CaseResult already holds the reason."""


def _timed_stage(result: CaseResult, stage: str, call: Callable[[], Any]) -> Any:
    """Run one stage of a case, recording its time, and its exception as the case's reason."""
    start = time.perf_counter()
    try:
        return call()
    except Exception as error:
        result.reason = f"{stage} raised {type(error).__name__}: {error}"
        result.traceback = traceback.format_exc()
        raise _StageFailed from error
    finally:
        result.timings[stage] = time.perf_counter() - start


def _checked_run_return(value: Any) -> tuple[dict, LaunchReport]:
    if not (isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], dict)
            and isinstance(value[1], LaunchReport)):
        raise TypeError(f"OpSpec.run must return (dict of outputs, LaunchReport), got {type(value).__name__}")
    return value


def make_case_inputs(spec, case: Case, device="cpu") -> dict:
    """The case's inputs, deterministic from its seed (the runner, bench and tests share them)."""
    import torch

    return spec.make_inputs(case, torch.Generator().manual_seed(case.seed), device)


def run_case(spec, case: Case, backend) -> CaseResult:
    """Run one case end to end; never raises - failures become the result's status."""
    result = CaseResult(op=spec.name, case=case)
    try:
        inputs = _timed_stage(result, "make_inputs", lambda: make_case_inputs(spec, case, backend.device))
        expected = _timed_stage(result, "golden",
                                lambda: spec.golden({k: v.clone() for k, v in inputs.items()}, case.attrs))
        result.tolerances = _timed_stage(result, "tolerances", lambda: output_tolerances(case, expected))
        actual, result.launch = _timed_stage(
            result, "run", lambda: _checked_run_return(spec.run(inputs, case.attrs, backend)))
        if not result.launch.outputs_valid:
            result.reason = (f"backend {result.launch.backend!r} ran the kernel but computed no numbers "
                             "(outputs_valid=False); nothing to compare")
            return result
        if set(actual) != set(expected):
            result.reason = f"run returned outputs {sorted(actual)}, the golden {sorted(expected)}"
            return result
        result.outputs = _timed_stage(result, "compare",
                                      lambda: compare_outputs(actual, expected, result.tolerances))
    except _StageFailed:
        return result
    result.status = PASS if all(r.all_close for r in result.outputs.values()) else FAIL
    return result


def output_tolerances(case: Case, expected: dict) -> dict[str, Tolerance]:
    """Each output's tolerance.  Raises ValueError for an output without one, and for an
    entry naming an output the golden does not produce (the case file's check when the
    operator does not declare ``output_names``)."""
    unknown = [name for name in case.tolerances if name not in expected]
    if unknown:
        raise ValueError(f"{case.path or case.op}: case {case.id!r}: field 'tolerances': no output named "
                         f"{', '.join(map(repr, unknown))}; the golden returns {', '.join(expected)}")
    try:
        return {name: case.tolerance(name) for name in expected}
    except KeyError as error:
        raise ValueError(error.args[0]) from None


def compare_outputs(actual: dict, expected: dict, tolerances: dict[str, Tolerance]) -> dict[str, Result]:
    from .compare import detailed_tensor_compare

    return {name: detailed_tensor_compare(actual[name], expected[name], name, **tolerances[name].bounds())
            for name in expected}


# ---------------------------------------------------------------- many cases
def open_backend(backend=None):
    """A ready backend: an instance is used as is, a name (or None: $PTOGYM_BACKEND,
    else interp) is looked up.  Raises BackendUnavailable, ValueError (unknown name)
    or ImportError when it cannot run here."""
    if backend is None or isinstance(backend, str):
        backend = backends.get_backend(backend)
    backend.check_available()
    return backend


def _describe(error: Exception) -> str:
    message = error.args[0] if isinstance(error, KeyError) and error.args else error
    return f"{type(error).__name__}: {message}"


def select_cases(cases: list[Case], levels: list[str] | None, quick: bool) -> list[Case]:
    """Cases named by *levels* (in that order; all when None), quick-tagged ones only
    with *quick*.  Raises ValueError naming unknown levels or an empty selection."""
    by_id = {case.id: case for case in cases}
    unknown = [level for level in levels or () if level not in by_id]
    if unknown:
        raise ValueError(f"unknown level(s) {', '.join(unknown)}; known: {', '.join(by_id)}")
    selected = [by_id[level] for level in dict.fromkeys(levels)] if levels else list(cases)
    selected = [case for case in selected if case.is_quick or not quick]
    if not selected:
        raise ValueError("no case selected" + (" (no quick-tagged case)" if quick else ""))
    return selected


class _CannotRun(Exception):
    """Why no case of an operator can run; becomes ``RunResult.error``."""


def _step(what: str, call: Callable[[], Any]) -> Any:
    try:
        return call()
    except Exception as error:  # anything here means the run cannot start
        raise _CannotRun(f"{what}: {_describe(error)}") from error


def run_cases(op_name: str, levels: list[str] | None = None, quick: bool = False, backend=None, *,
              log: TextIO | None = None, verbose: bool = False) -> RunResult:
    """Run the selected cases of *op_name*; with *log*, print progress and per-case lines.

    The operator is resolved through ``ptogym.ops.get_op`` at call time and its cases
    from ``spec.cases_path``.  Problems before the first case (unknown operator,
    bad case file, unknown level, unusable backend) set ``RunResult.error``.
    """
    run = RunResult(op=op_name)
    try:
        spec = _step("operator", lambda: ops.get_op(op_name))
        cases = _step("cases", lambda: select_cases(load_cases(spec.cases_path, spec), levels, quick))
        ready_backend = _step("backend", lambda: open_backend(backend))
    except _CannotRun as error:
        run.error = str(error)
        return run
    from ptogym.interp.checks import watching_leniency

    run.backend = ready_backend.name
    start = time.perf_counter()
    with watching_leniency() as run.leniency:
        for index, case in enumerate(cases, 1):
            _print(log, f"[{index}/{len(cases)}] {op_name} {case.id} on {run.backend} ... "
                        f"(elapsed {time.perf_counter() - start:.1f}s)")
            case_result = run_case(spec, case, ready_backend)
            run.cases.append(case_result)
            _print(log, case_result.report(verbose))
    return run


def _print(log: TextIO | None, text: str) -> None:
    if log is not None:
        print(text, file=log, flush=True)


# ----------------------------------------------------------------------- CLI
def _run_command(args: argparse.Namespace) -> int:
    if args.list:
        return _list_levels(args.op)
    if args.all == bool(args.op):
        raise UsageError("give an operator name or --all (not both)")
    if args.json:
        check_writable(args.json, "--json")
    backends.configure_from_cli(args)
    options = dict(backend=args.backend, log=sys.stdout, verbose=args.verbose)
    with sanitizing(args, args.backend):
        if args.all:
            runs = [run_cases(name, quick=True, **options) for name in ops.OP_NAMES]
        else:
            runs = [run_cases(args.op, args.levels or None, args.quick, **options)]
    exit_code = worst_exit((run.exit_code for run in runs), default=2)
    print("no operator registered" if not runs else "\n".join(run.summary() for run in runs))
    if args.json:
        try:
            _write_json(args.json, {"verdict": MARKERS[exit_code].strip("[]"), "exit_code": exit_code,
                                    "runs": [run.to_dict() for run in runs]})
        except OSError as error:
            print(f"error: --json: {write_failure(args.json, error)}", file=sys.stderr)
            exit_code = 2
    print(MARKERS[exit_code])
    return exit_code


def _list_levels(op_name: str | None) -> int:
    if not op_name:
        raise UsageError("--list needs an operator name")
    try:
        cases = load_cases(op_name)
    except Exception as error:  # unknown operator, import failure or invalid file
        print(f"error: {_describe(error)}")
        print(verdict(2))
        return 2
    for case in cases:
        tags = ",".join(case.tags) or "-"
        print(f"{case.id:<12} {tags:<12} {case.shape_summary}  {case.description}")
    print(verdict(0, precision=False))
    return 0


def _list_command(args: argparse.Namespace) -> int:
    """Every registered operator with its one-line description; exit 2 if one cannot load."""
    exit_code = 0
    for name in ops.OP_NAMES:
        try:
            print(f"{name:<28} {ops.describe(name)}")
        except Exception as error:
            print(f"{name:<28} (cannot load: {_describe(error)})")
            exit_code = 2
    print(verdict(exit_code, precision=False))
    return exit_code


def _json_safe(value: Any) -> Any:
    """Strict JSON has no NaN/inf: write them as strings."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {str(key): _json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(item) for item in value]
    return value


def _write_json(path: str, document: dict) -> None:
    write_text(path, json.dumps(_json_safe(document), indent=2, allow_nan=False) + "\n")


def add_cli(subparsers) -> None:
    run = subparsers.add_parser(
        "run", help="run an operator's case levels and judge them against the golden",
        description="Run case levels; the last line is [PRECISION_PASS] (exit 0), "
                    "[PRECISION_FAIL] (exit 1), [RUN_ERROR] (exit 2) or [PRECISION_PASS_LENIENT] "
                    "(exit 3: within tolerance, but with checks downgraded by PTOGYM_LENIENT / lenient()).")
    run.add_argument("op", nargs="?", help="operator name (see 'ptogym list') or operator package directory")
    run.add_argument("levels", nargs="*", help="case ids to run (default: all)")
    run.add_argument("--all", action="store_true", help="the quick cases of every operator")
    run.add_argument("--quick", action="store_true", help="only cases tagged 'quick'")
    run.add_argument("--list", action="store_true", help="list the operator's cases and exit")
    run.add_argument("--backend", default=None, help=f"one of {', '.join(backends.names())} "
                                                     "(default: $PTOGYM_BACKEND or interp)")
    run.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    run.add_argument("--verbose", action="store_true", help="show tracebacks of errors")
    add_sanitize_option(run)
    backends.add_cli_options(run)
    run.set_defaults(func=_run_command)
    listing = subparsers.add_parser("list", help="list the operators")
    listing.set_defaults(func=_list_command)
