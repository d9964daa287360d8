"""pytest plugin that runs pypto's own test files on a CPU and records what happened.

Loaded by ``scripts/record_pypto_suite.py`` into a pytest process of its own per
upstream test file (``-p pypto_suite.plugin``), with

* ``PTOGYM_SUITE_SIDE`` - ``pypto``: the real pypto 0.2.0, every ``@pypto.frontend.jit``
  call forced into SIM run mode with pypto's own graph interpreter computing the
  outputs on the caller's CPU tensors, exactly as the ``pypto-sim`` backend drives it;
  ``interp``: ``import pypto`` bound to ``ptogym.interp`` (as ``ptogym interp`` does),
  strict mode;
* ``PTOGYM_SUITE_LOG`` - a JSON-lines file: one line per finished test (its outcome,
  the failure's message, and per jit call the digest of the tensors going in and the
  tensors coming out);
* ``PTOGYM_SUITE_ARGV`` - words appended to ``sys.argv`` (the published examples' own
  ``--run_mode sim`` switch, read when they are imported).

Both sides install the ``torch_npu`` stand-in (``npu_standin``) and seed torch, numpy
and ``random`` with 0 at import and before every test, so that both compute on the
same inputs (the recorded input digests show it).
"""
from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

from pypto_suite import npu_standin, records

SIDE = os.environ.get("PTOGYM_SUITE_SIDE", "interp")
LOG = os.environ.get("PTOGYM_SUITE_LOG")
_calls: list = []


def _seed() -> None:
    torch.manual_seed(0)
    random.seed(0)
    with contextlib.suppress(ImportError):
        import numpy

        numpy.random.seed(0)


def _no_preparation(kernel, entry):
    return contextlib.nullcontext()


def _recording(original, prepare=_no_preparation, on_error=None):
    """``original`` (a jit wrapper's ``__call__``) recording its tensors around the call."""
    def call(self, *args, **kwargs):
        tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
        entry = {"kernel": getattr(self, "__name__", "?"), "inputs_sha1": records.digest(tensors)}
        _calls.append(entry)
        try:
            with prepare(self, entry):
                result = original(self, *args, **kwargs)
        except BaseException as error:
            entry["error"] = records.clean_error(f"{type(error).__name__}: {error}")
            if on_error is not None:
                on_error()
            raise
        entry["outputs"] = [records.encode_output(t) for t in tensors]
        return result

    return call


def _bind_interp() -> None:
    from ptogym.interp import frontend
    from ptogym.interp.launcher import bind_pypto

    bind_pypto()
    frontend.JitKernel.__call__ = _recording(frontend.JitKernel.__call__)


def _bind_pypto() -> None:
    from ptogym.backends import _pypto_runtime as rt

    pypto = rt.import_pypto()
    from pypto.frontend.parser import entry

    session = rt.session()
    serial = iter(range(1 << 30))

    @contextlib.contextmanager
    def sim_run(kernel, entry):
        call_dir = session.out / f"suite-{os.getpid()}-{next(serial):05d}"
        call_dir.mkdir(parents=True, exist_ok=True)
        os.environ["TILE_FWK_OUTPUT_DIR"] = str(call_dir)
        rt.force_run_mode(kernel, 1)  # pypto.RunMode.SIM, whatever the test asked
        log = rt.Capture(call_dir.parent / f"{call_dir.name}.log")
        try:
            with log:
                rt.ensure_calculator(pypto, session)
            with rt.pypto_interpreter(pypto, True), log:
                yield
        except BaseException:
            entry["log"] = records.clean_error(log.tail(12))
            raise
        finally:
            shutil.rmtree(call_dir, ignore_errors=True)
            with contextlib.suppress(OSError):
                log.path.unlink()

    entry.JitCallableWrapper.__call__ = _recording(entry.JitCallableWrapper.__call__, sim_run,
                                                   lambda: rt.recover(pypto))


class _XdistHookSpecs:
    """pypto's root conftest.py implements pytest-xdist's hook (its device-per-worker
    setup); declared here so that it loads without xdist, which is not used."""

    @pytest.hookspec
    def pytest_configure_node(self, node):
        """pytest-xdist: a worker node is about to be configured."""


def pytest_addhooks(pluginmanager):
    if not pluginmanager.has_plugin("xdist"):
        pluginmanager.add_hookspecs(_XdistHookSpecs)


def pytest_configure(config):
    # the published examples read their run mode from the command line when imported
    sys.argv += os.environ.get("PTOGYM_SUITE_ARGV", "").split()
    limit = float(os.environ.get("PTOGYM_SUITE_TEST_LIMIT_S") or 0)
    if limit > 0:
        threading.Thread(target=_watchdog, args=(limit,), daemon=True).start()
    npu_standin.install()
    _seed()
    if SIDE == "pypto":
        _bind_pypto()
    else:
        _bind_interp()


def _log(record: dict) -> None:
    if LOG:
        with open(LOG, "a", encoding="utf-8") as log:
            log.write(json.dumps(record, separators=(",", ":")) + "\n")


def pytest_sessionfinish(session, exitstatus):
    """The session ran to its end: ``<log>.complete``.  (pypto can end the process with
    exit(1) from C++, which is pytest's own "tests failed" code: the return code says
    nothing, this marker does.)"""
    if LOG:
        open(LOG + ".complete", "w").close()


def pytest_runtest_logstart(nodeid, location):
    _log({"start": nodeid})
    _watch["started"] = time.monotonic()


def pytest_runtest_logfinish(nodeid, location):
    _watch["started"] = None


def _watchdog(limit_s: float) -> None:
    """End the process when one test runs past ``limit_s`` (pypto can hang in C++, where no
    Python signal handler runs); the recorder records that test and resumes after it."""
    while True:
        time.sleep(1.0)
        started = _watch["started"]
        if started is not None and time.monotonic() - started > limit_s:
            os._exit(70)


_watch: dict = {"started": None}


def pytest_runtest_setup(item):
    global _last_file
    _calls.clear()
    _seed()
    if SIDE == "interp" and item.path != _last_file:  # a new upstream file starts from a fresh global state
        from ptogym.interp import runtime

        runtime.GLOBAL_RUN.__init__(name="<global>")
    _last_file = item.path


_last_file = None


def pytest_runtest_logreport(report):
    if report.when == "call" or (report.when == "setup" and not report.passed):
        message = ""
        if report.failed:
            crash = getattr(report.longrepr, "reprcrash", None)
            message = crash.message if crash is not None else str(report.longrepr)
        elif report.skipped:
            message = str(report.longrepr[-1]) if isinstance(report.longrepr, tuple) else str(report.longrepr)
        record = {"test": report.nodeid, "outcome": report.outcome, "message": records.clean_error(message),
                  "seconds": round(report.duration, 2), "calls": list(_calls)}
        _log(record)
        print(f"[suite] {report.nodeid}: {report.outcome} {record['message'][:160]!r}", file=sys.__stderr__,
              flush=True)


@pytest.hookimpl(hookwrapper=True)
def pytest_collection_modifyitems(config, items):
    """Log the tests pypto's own conftest.py leaves out (marked for another SoC or card
    count; it drops them from the list without reporting them)."""
    before = list(items)
    yield
    kept = {id(item) for item in items}
    resumed = set(config.getoption("deselect") or ())  # already recorded by an earlier run
    for item in before:
        if id(item) not in kept and item.nodeid not in resumed:
            _log({"test": item.nodeid, "outcome": "deselected", "message": "left out by pypto's conftest.py: marked "
                  "for another SoC or card count", "seconds": 0.0, "calls": []})


def pytest_collectreport(report):
    if report.failed:  # the exception is the last line of the import traceback
        lines = [line for line in str(report.longrepr).splitlines() if line.strip()]
        message = lines[-1].lstrip("E ").strip() if lines else ""
        _log({"test": report.nodeid or "<collect>", "outcome": "collect-error",
              "message": records.clean_error(message), "seconds": 0.0, "calls": []})
