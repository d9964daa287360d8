"""``pypto-sim``: the real pypto 0.2.0 on a CPU - full compile + cost model.

A launch compiles the kernel through all of pypto's passes (every call: pypto has
no compile cache in SIM mode), runs its cost model of an Ascend 910B (24 cube +
48 vector cores) and reads the per-core task timeline it writes
(``CostModelSimulationOutput/_simulate.swim.json``) into ``LaunchReport``:

* ``simulated_us`` - (last task end - first task start) / 1800 cycles per µs,
  the number pypto prints as "AICore End-to-End Time";
* ``tasks`` / ``cores`` - tasks executed and distinct AIC/AIV cores used.

The cost model alone leaves the output tensors untouched.  When the call is small
enough (total elements of all tensor arguments <= ``max_compute_elements``,
default 2**22, env ``PTOGYM_SIM_MAX_ELEMENTS``) the backend also lets pypto's own
graph-level interpreter compute the outputs into the caller's tensors and reports
``outputs_valid=True``; otherwise ``outputs_valid=False`` and the tensors keep their
contents.  ``docs/pypto-sim.md`` has the details and the measurements.
"""
from __future__ import annotations

import contextlib
import os
from pathlib import Path

from . import _pypto_runtime as rt

DEFAULT_MAX_COMPUTE_ELEMENTS = 1 << 22
ENV_MAX_ELEMENTS = "PTOGYM_SIM_MAX_ELEMENTS"


class Backend(rt.RealPyptoBackend):
    name = "pypto-sim"
    run_mode = 1  # pypto.RunMode.SIM

    def __init__(self):
        super().__init__()
        env = os.environ.get(ENV_MAX_ELEMENTS, "").strip()
        self.max_compute_elements = int(env) if env else DEFAULT_MAX_COMPUTE_ELEMENTS

    @contextlib.contextmanager
    def _prepare(self, pypto, kernel, tensors):
        for t in tensors:
            if t.device.type != "cpu":
                raise ValueError(f"pypto-sim: tensors must live on the CPU, got {t.device}")
        elements = sum(int(t.numel()) for t in tensors)
        compute = 0 < elements <= self.max_compute_elements
        if compute:
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
        report.update(summary)
        report["runs"] = len(swims)
