"""One trial, in a process of its own: check the candidate, then measure it.

``execute(request)`` starts a fresh process (pypto frees the memory of what it
compiled only at exit; forked from a server that imported torch once), waits for its record and stops it - with everything it
started, the pypto worker included - when it runs past ``timeout_s`` or its processes
hold more than ``memory_bytes`` resident.  A trial that dies, hangs or overflows is a
record like any other (status ``failed``, ``timeout``, ``memory``): a sweep never
stops because of one.

In the trial process (``run_in_process``), under ``table.override`` of the candidate:

1. the level's case runs on the interpreter and is judged against the golden with the
   case file's tolerances (``verify.runner.run_case``, what ``ptogym run`` does): a
   wrong result, or a pypto rule the interpreter enforces, rejects the candidate with
   the reason (status ``rejected``) and nothing is measured;
2. the measurement function runs it: ``pypto-sim`` (default) is one cost-only launch
   on real pypto's compiler and cost model (its result cache included), ``MODULE:FUNC``
   any function ``f(spec, case) -> {"us": ..., ...}`` (another cost model, a device).

A ``verify`` request instead runs the case on ``verify_backend`` (the winner on pypto's
own interpreter: ``pypto-sim`` computing the numbers, up to ``VERIFY_MAX_ELEMENTS``)
and reports its verdict: PASS, FAIL, ERROR, or TOO_LARGE when pypto's interpreter
would not compute a call that size (the winner then stands on the interpreter's check
alone, and the report says so).
"""
from __future__ import annotations

import importlib
import multiprocessing
import os
import signal
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

POLL_S = 0.2
#: set by an interrupted sweep: every trial this process is waiting on stops now
STOP = threading.Event()
#: elements up to which a winner is checked on pypto's interpreter (its default for
#: launches is 2**22; a CI level of rms_norm_linear holds 4.3 M)
VERIFY_MAX_ELEMENTS = 1 << 24
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class TrialRequest:
    op: str
    level: str
    params: dict  # the candidate: the tuned parameters it sets
    measure: str = "pypto-sim"
    kind: str = "trial"  # or "verify"
    verify_backend: str = "pypto-sim"
    timeout_s: float = 600.0
    memory_bytes: int = 4 << 30
    sys_path: tuple = field(default_factory=tuple)  # the driver's import path (Ray workers)


# ------------------------------------------------------------------ in the trial process
def load_level(op: str, level: str):
    """(spec, case, kernel module declaring ``TUNING``, its Tuning) for a level of ``op``
    (a registered operator or an operator package's directory)."""
    from ptogym.ops import get_op, locate
    from ptogym.verify.cases import load_cases

    spec = get_op(op)
    cases = {case.id: case for case in load_cases(spec.cases_path, spec)}
    if level not in cases:
        raise ValueError(f"{spec.name}: unknown level {level!r}; known: {', '.join(cases)}")
    kernel = importlib.import_module(f"{locate(op).package}.kernel")
    tuning = getattr(kernel, "TUNING", None)
    if tuning is None:
        raise ValueError(f"{spec.name}: its kernel module declares no TUNING (nothing to tune)")
    if "tuning_shape" not in spec.extra:
        raise ValueError(f"{spec.name}: its SPEC.extra has no 'tuning_shape' (how a level maps to the tuned table)")
    return spec, cases[level], sys.modules[tuning.band.__module__], tuning


def pypto_sim(spec, case) -> dict:
    """The default measurement: one cost-only pypto-sim launch of the case (cached
    results reused: ``_sim_cache``)."""
    from ptogym.backends import get_backend
    from ptogym.verify.runner import make_case_inputs

    sim = get_backend("pypto-sim")
    with sim.cost_only():
        _, report = spec.run(make_case_inputs(spec, case), case.attrs, sim)
    extra = report.extra
    return {"us": report.simulated_us, "kernel_us": extra.get("kernel_us"), "compile_s": extra.get("call_s"),
            "tasks": report.tasks, "cache": extra.get("cache"), "peak_rss_bytes": extra.get("worker_peak_rss_bytes")}


def resolve_measure(name: str):
    """``pypto-sim`` or ``MODULE:FUNCTION``; ValueError naming the rule."""
    if name == "pypto-sim":
        return pypto_sim
    module, _, function = name.partition(":")
    if not module or not function:
        raise ValueError(f"--measure: {name!r} is neither 'pypto-sim' nor MODULE:FUNCTION")
    try:
        return getattr(importlib.import_module(module), function)
    except (ImportError, AttributeError) as error:
        raise ValueError(f"--measure: cannot load {name!r}: {error}") from None


def _case_failure(result) -> str:
    """Why a case did not pass, in one line: the failing outputs, or the error."""
    if result.status == "FAIL":
        return "wrong result: " + "; ".join(r.brief() for r in result.outputs.values() if not r.all_close)
    return f"refused: {result.reason}"


def run_in_process(request: TrialRequest) -> dict:
    """The trial itself (see the module docstring); never raises."""
    from ptogym.backends import get_backend
    from ptogym.tune.table import override
    from ptogym.verify.runner import run_case

    record: dict = {"status": "failed"}
    try:
        spec, case, kernel, _ = load_level(request.op, request.level)
        with override(kernel, request.params):
            if request.kind == "verify":
                backend = get_backend(request.verify_backend)
                if hasattr(backend, "max_compute_elements"):  # a winner's check is worth a slower launch
                    backend.max_compute_elements = max(backend.max_compute_elements, VERIFY_MAX_ELEMENTS)
                result = run_case(spec, case, backend)
                too_large = result.status == "ERROR" and "OutputsNotComputed" in (result.reason or "")
                verdict = "TOO_LARGE" if too_large else result.status
                record.update(status="ok" if result.status == "PASS" else "rejected",
                              verdict=verdict, reason=None if result.status == "PASS" else _case_failure(result))
                return record
            checked = run_case(spec, case, get_backend("interp"))
            if checked.status != "PASS":
                record.update(status="rejected", reason=_case_failure(checked))
                return record
            measured = resolve_measure(request.measure)(spec, case)
        if not isinstance(measured, dict) or not isinstance(measured.get("us"), (int, float)):
            raise TypeError(f"the measurement {request.measure!r} returned {measured!r}, not a dict with 'us'")
        record.update(measured, status="ok")
    except Exception as error:  # the record says what went wrong; the sweep goes on
        record.update(status="failed", reason=f"{type(error).__name__}: {str(error)[:2000]}",
                      traceback=traceback.format_exc()[-4000:])
    return record


def _child(request: TrialRequest, connection) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the driver stops trials on Ctrl-C
    os.environ["PTOGYM_PROGRESS_S"] = "0"  # the driver prints one line per trial instead
    from ptogym.backends._pypto_worker import die_with_parent

    die_with_parent(os.getppid())
    sys.path[:0] = [path for path in request.sys_path if path not in sys.path]
    record = run_in_process(request)
    record["peak_rss_bytes"] = max(record.get("peak_rss_bytes") or 0, _own_peak_rss()) or None
    from ptogym.backends._pypto_worker import stop_workers

    stop_workers()  # first, so that the CPU time below includes pypto's worker and its compilers
    record["cpu_s"] = _own_cpu_seconds()
    connection.send(record)


def _own_cpu_seconds() -> float:
    """CPU seconds of this trial process and the processes it waited for (pypto's worker)."""
    import resource

    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _own_peak_rss() -> int:
    import resource

    return 1024 * resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


# ------------------------------------------------------------------ in the driver (or a Ray task)
def tree_rss_bytes(root: int) -> int:
    """Resident bytes of process ``root`` and all its descendants (0 once it is gone)."""
    parents, rss = {}, {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        pid = int(stat.parent.name)
        parents[pid], rss[pid] = int(fields[1]), int(fields[21]) * PAGE_BYTES
    total, frontier = 0, [root]
    while frontier:
        pid = frontier.pop()
        total += rss.get(pid, 0)
        frontier += [child for child, parent in parents.items() if parent == pid]
    return total


def _kill_tree(root: int) -> None:
    """SIGKILL ``root`` and its descendants (the pypto worker runs in a group of its own)."""
    victims = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        victims.append((int(stat.parent.name), parent))
    family, frontier = set(), [root]
    while frontier:
        pid = frontier.pop()
        family.add(pid)
        frontier += [child for child, parent in victims if parent == pid and child not in family]
    for pid in family:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _trial_context():
    """``forkserver`` with torch and the runner imported once in the server: a trial
    process starts in a fraction of a second instead of importing torch again (a fresh
    process all the same: pypto's memory goes when it exits)."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["torch", "ptogym.verify.runner", "ptogym.tune.trial", "ptogym.interp"])
    return context


def execute(request: TrialRequest) -> dict:
    """Run ``request`` in a fresh process with its timeout and memory cap; the record,
    with ``wall_s`` and the peak resident memory seen."""
    context = _trial_context()
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=_child, args=(request, sender), daemon=False, name="ptogym-tune-trial")
    process.start()  # the first one waits for the fork server to import torch: not the trial's time
    start = time.monotonic()
    sender.close()
    peak, record = 0, None
    try:
        while record is None:
            if receiver.poll(POLL_S):
                try:
                    record = receiver.recv()
                except EOFError:
                    record = {"status": "failed", "reason": f"the trial process died (exit code {process.exitcode})"}
                break
            peak = max(peak, tree_rss_bytes(process.pid))
            if peak > request.memory_bytes:
                record = {"status": "memory", "reason": f"its processes held {peak / 2**30:.2f} GB resident > the "
                                                        f"cap of {request.memory_bytes / 2**30:.2f} GB; stopped"}
            elif time.monotonic() - start > request.timeout_s:
                record = {"status": "timeout", "reason": f"no result after {request.timeout_s:.0f} s; stopped"}
            elif STOP.is_set():
                record = {"status": "interrupted", "reason": "the sweep was interrupted"}
    finally:  # a trial that overran is stopped at once; one that answered gets time to exit
        if record is not None and record.get("status") not in ("memory", "timeout", "interrupted"):
            process.join(10.0)
        if process.is_alive():
            _kill_tree(process.pid)
        process.join(5.0)
        receiver.close()
    record["wall_s"] = time.monotonic() - start
    record["peak_rss_bytes"] = max(record.get("peak_rss_bytes") or 0, peak) or None
    if record["status"] == "ok" and record["peak_rss_bytes"] > request.memory_bytes:  # a peak between two looks
        record.update(status="memory", reason=f"it peaked at {record['peak_rss_bytes'] / 2**30:.2f} GB resident > "
                                              f"the cap of {request.memory_bytes / 2**30:.2f} GB")
    return record
