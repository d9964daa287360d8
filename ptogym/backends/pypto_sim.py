"""``pypto-sim``: the real pypto 0.2.0 on a CPU - full compile + cost model.

A launch compiles the kernel through all of pypto's passes (every call: pypto has
no compile cache in SIM mode), runs its cost model of an Ascend 910B (24 cube +
48 vector cores) and reads the per-core task timeline it writes
(``CostModelSimulationOutput/_simulate.swim.json``) into ``LaunchReport``:

* ``simulated_us`` - (last task end - first task start) / 1800 cycles per µs,
  the number pypto prints as "AICore End-to-End Time";
* ``extra["kernel_us"]`` - the cost model's whole-kernel time, its report's "Total
  Cycles" / 1800: from the device's start to its end, so it includes the scheduler's
  start-up before the first task, which ``simulated_us`` leaves out (what a chain of
  separate kernels pays once per kernel);
* ``tasks`` / ``cores`` - tasks executed and distinct AIC/AIV cores used.

The cost model alone leaves the output tensors untouched.  When the call is small
enough (total elements of all tensor arguments <= ``max_compute_elements``,
default 2**22, env ``PTOGYM_SIM_MAX_ELEMENTS``) the backend also lets pypto's own
graph-level interpreter compute the outputs into the caller's tensors and reports
``outputs_valid=True``.  Above it a launch raises ``OutputsNotComputed`` before
compiling; inside ``backend.cost_only()`` (timings only, e.g. ``ptogym bench``) it
runs the cost model alone, reports ``outputs_valid=False`` and the tensors keep their
contents.  Launches run in a child process (``_pypto_worker``) so that Ctrl-C and SIGTERM stop
a compile at once.  ``docs/pypto-sim.md`` has the details and the measurements.
"""
from __future__ import annotations

import contextlib
import os
from pathlib import Path

from . import _pypto_runtime as rt
from .base import OutputsNotComputed

DEFAULT_MAX_COMPUTE_ELEMENTS = 1 << 22
ENV_MAX_ELEMENTS = "PTOGYM_SIM_MAX_ELEMENTS"


def max_elements_from_env() -> int:
    """``$PTOGYM_SIM_MAX_ELEMENTS`` (a non-negative integer), else the default."""
    raw = os.environ.get(ENV_MAX_ELEMENTS, "").strip()
    if not raw:
        return DEFAULT_MAX_COMPUTE_ELEMENTS
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        raise ValueError(f"{ENV_MAX_ELEMENTS}: must be a non-negative integer (elements), got {raw!r}")
    return value


class Backend(rt.RealPyptoBackend):
    name = "pypto-sim"
    run_mode = 1  # pypto.RunMode.SIM
    isolated = True  # launches run in a child process: Ctrl-C stops a compile at once
    reduces_builds = True  # the cost model simulates what the call runs; --full-build compiles every branch
    caches_results = True  # cost-only results are cached (_sim_cache); --no-cache bypasses

    def __init__(self):
        super().__init__()
        self.max_compute_elements = max_elements_from_env()

    def _computes(self, elements: int) -> bool:
        return 0 < elements <= self.max_compute_elements and not self.cost_only_mode

    def _computes_outputs(self, tensors) -> bool:
        return self._computes(sum(int(t.numel()) for t in tensors))

    def _check_computes_outputs(self, tensors) -> None:
        elements = sum(int(t.numel()) for t in tensors)
        if elements and not self._computes(elements):
            raise OutputsNotComputed(
                f"pypto-sim: the call's tensors hold {elements} elements > {ENV_MAX_ELEMENTS}="
                f"{self.max_compute_elements}, so pypto's interpreter would not compute the outputs "
                f"(cost model only); raise {ENV_MAX_ELEMENTS} (slow: minutes) or use the interp backend "
                "for numbers")

    @contextlib.contextmanager
    def _prepare(self, pypto, kernel, tensors):
        for t in tensors:
            if t.device.type != "cpu":
                raise ValueError(f"pypto-sim: tensors must live on the CPU, got {t.device}")
        elements = sum(int(t.numel()) for t in tensors)
        compute = self._computes(elements)
        if compute:
            self.report_phase("loading pypto's op calculator (its first build takes ~25 s)")
            with rt.Capture(rt.session().log, enabled=not self.verbose):
                rt.ensure_calculator(pypto, rt.session())
        with rt.pypto_interpreter(pypto, compute):
            yield {
                "outputs_valid": compute,
                "compute": "pypto-interpreter" if compute else "none",
                "elements": elements,
                "max_compute_elements": self.max_compute_elements,
            }

    def _finish(self, pypto, run_dir: Path, report: dict) -> None:
        swims = sorted(run_dir.rglob("_simulate.swim.json"), key=lambda p: p.stat().st_mtime)
        if not swims:
            raise rt.PyptoRunError(
                f"pypto-sim: the cost model wrote no _simulate.swim.json under {run_dir}")
        summary = rt.parse_swim(swims[-1])
        stats = swims[-1].with_name("_simulate.stat.report.txt")
        total = rt.parse_total_cycles(stats) if stats.exists() else None
        summary["kernel_us"] = None if total is None else total / rt.SIM_CLOCK_MHZ
        report.update(summary)
        report["runs"] = len(swims)
