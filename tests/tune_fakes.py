"""Cheap stand-ins for the tuner's tests: a backend that records what an operator
would build (its static build parameters) without running anything, a measurement
that prices those parameters instead of compiling, and a toy operator package with a
TUNING space in which one candidate computes wrong numbers.

The measurement functions are found by name (``--measure tune_fakes:...``) in the
trial processes, which start with the test process's import path."""
from __future__ import annotations

import json
import time
from pathlib import Path

from ptogym.backends.base import LaunchReport
from ptogym.verify.runner import make_case_inputs
from ptogym.workflow.scaffold import scaffold


class RecordingBackend:
    """Takes launches, runs nothing, keeps each launch's static build parameters."""

    name = "recording"
    cost_only_mode = True

    def __init__(self):
        self.statics = []

    def launch(self, builder, static, tensors, scalars=None):
        self.statics.append(dict(static))
        return LaunchReport(backend=self.name, wall_s=0.0, outputs_valid=False)


def built_static(spec, case) -> dict:
    """The static build parameters a level's call of ``spec`` passes to its builder now."""
    backend = RecordingBackend()
    spec.run(make_case_inputs(spec, case), case.attrs, backend)
    return backend.statics[-1]


def toy_cost(spec, case) -> dict:
    """µs priced from the toy kernel's parameters: taller tiles are cheaper, and the
    wrong-result scale 3.0 is the cheapest of all (so only the golden check stops it)."""
    static = built_static(spec, case)
    us = 100.0 / static["rows_per_tile"] + (0.0 if static["scale"] == 3.0 else 5.0)
    return {"us": us, "kernel_us": us + 1.0, "compile_s": 0.01, "tasks": 1}


def wide_row_cost(spec, case) -> dict:
    """``toy_cost``, except that 16-row tiles are slow on 128-wide rows: a winner at
    64 wide that another level of its band must not get."""
    record = toy_cost(spec, case)
    if case.inputs["x"].shape[-1] == 128 and built_static(spec, case)["rows_per_tile"] == 16:
        record = {**record, "us": record["us"] + 30.0}
    return record


def refusing_cost(spec, case) -> dict:
    """``toy_cost``, but 128-wide rows are refused before anything runs (as pypto-sim
    refuses linear's mxfp8)."""
    if case.inputs["x"].shape[-1] == 128:
        raise NotImplementedError("toy: 128-wide rows cannot run on this measure")
    return toy_cost(spec, case)


def slow_cost(spec, case) -> dict:
    """Hangs for the timeout test."""
    time.sleep(60)
    return toy_cost(spec, case)


def hog_cost(spec, case) -> dict:
    """Holds 400 MB for a few seconds, for the memory cap test."""
    import torch

    held = torch.ones(100 << 20)  # 400 MB of fp32, touched
    time.sleep(5)
    return {"us": float(held[0])}


def make_toy_operator(tmp_path: Path, name: str) -> Path:
    """A scaffolded operator (y = 2 x) whose kernel tunes ``rows_per_tile`` (8, 16, 4, 32)
    and ``scale`` (2.0, or 3.0: wrong numbers); 32-row tiles trip a constraint."""
    package = scaffold(name, None, tmp_path)
    kernel = package / "kernel.py"
    text = kernel.read_text()
    text = text.replace('def build(pypto, *, hidden: int, dtype: str, out_dtype: str = ""):',
                        'def build(pypto, *, hidden: int, dtype: str, out_dtype: str = "", rows_per_tile: int = 8, '
                        'scale: float = 2.0):')
    body_start = text.index("    @pypto.frontend.jit()")
    text = text[:body_start] + text[body_start:].replace("ROWS_PER_TILE", "rows_per_tile").replace(
        "pypto.mul(x_fp32, 2.0)", "pypto.mul(x_fp32, scale)")
    text += '''

from ptogym.tune.space import Param, Tuning, token_band  # noqa: E402


def _tile_rule(params, shape):
    return "32-row tiles exceed the test's UB rule" if params["rows_per_tile"] == 32 else None


TUNING = Tuning(params={"rows_per_tile": Param((8, 16, 4, 32)), "scale": Param((2.0, 3.0))},
                band=lambda rows, hidden: (token_band(rows),), constraints=(_tile_rule,),
                plain={"rows_per_tile": 4})
'''
    kernel.write_text(text)
    (package / "tuned.json").write_text(json.dumps({"op": name, "default": {"rows_per_tile": 8, "scale": 2.0},
                                                    "bands": {}}))
    op = package / "op.py"
    text = op.read_text()
    text = text.replace('{"hidden": x.shape[-1], "dtype": SUPPORTED_DTYPES[x.dtype]}',
                        '{"hidden": x.shape[-1], "dtype": SUPPORTED_DTYPES[x.dtype], '
                        '**tuned_params(kernel, rows=rows.shape[0], hidden=x.shape[-1])}')
    text = text.replace("    cases_file=Path(__file__).with_name(\"cases.json\"),",
                        "    cases_file=Path(__file__).with_name(\"cases.json\"),\n"
                        "    extra={\"tuning_shape\": lambda case: {\"rows\": math.prod(case.inputs[\"x\"].shape[:-1]), "
                        "\"hidden\": case.inputs[\"x\"].shape[-1]}},")
    text = "from ptogym.tune.table import tuned_params\n" + text if text.startswith("import") else text.replace(
        "\nimport math", "\nimport math\n\nfrom ptogym.tune.table import tuned_params", 1)
    op.write_text(text)
    assert "tuned_params(kernel" in op.read_text() and "tuning_shape" in op.read_text()
    return package
