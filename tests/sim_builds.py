"""What the reduced == full proof compares: one case through ``pypto-sim`` with either
build, as cost-model figures and, where pypto's interpreter computed them, output digests.

Shared by ``scripts/record_full_builds.py`` (records full builds as
``tests/fixtures/full_builds_pypto.json``) and ``tests/test_backend_pypto_sim.py``
(compares reduced builds against them).  No ``from __future__ import annotations``
is needed here (no kernels), but none is used either, like the other pypto helpers.
"""
import hashlib
import json
import time
from pathlib import Path

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "full_builds_pypto.json"
COMPARED = ("simulated_us", "kernel_us", "tasks", "cores")


def digest(tensor) -> str:
    """sha256 of the tensor's bytes with its dtype and shape: equal digests are bitwise equal outputs."""
    import torch

    raw = tensor.detach().contiguous().view(-1).view(torch.uint8).numpy().tobytes()
    return hashlib.sha256(f"{tensor.dtype}{list(tensor.shape)}".encode() + raw).hexdigest()[:32]


def report_figures(report) -> dict:
    """The compared figures of a ``LaunchReport``."""
    return {"simulated_us": report.simulated_us, "kernel_us": report.extra.get("kernel_us"),
            "tasks": report.tasks, "cores": report.cores}


def case_figures(spec, case, backend, *, full_build: bool) -> dict:
    """Simulate ``case`` with the full or the reduced build (cache bypassed); outputs'
    digests when the call was small enough for pypto's interpreter, else cost only."""
    from ptogym.verify.runner import make_case_inputs

    from ptogym.backends.base import OutputsNotComputed

    inputs = make_case_inputs(spec, case)
    saved = backend.full_build, backend.no_cache
    backend.full_build, backend.no_cache = full_build, True
    start = time.perf_counter()
    try:
        try:
            outputs, report = spec.run({k: v.clone() for k, v in inputs.items()}, case.attrs, backend)
        except OutputsNotComputed:  # raised before compiling: too big for pypto's interpreter
            with backend.cost_only():
                outputs, report = spec.run({k: v.clone() for k, v in inputs.items()}, case.attrs, backend)
    finally:
        backend.full_build, backend.no_cache = saved
    figures = {**report_figures(report), "build": report.extra.get("build"),
               "wall_s": round(time.perf_counter() - start, 1)}
    if report.outputs_valid:
        figures["outputs"] = {name: digest(tensor) for name, tensor in sorted(outputs.items())}
    return figures


def load_fixture() -> dict:
    return json.loads(FIXTURE.read_text()) if FIXTURE.exists() else {}
