"""ptogym new / stage / bisect on scaffolded packages in a scratch directory, plus
the pieces they stand on: probes, the interpreter's op trace, the golden inventory.

Each test scaffolds its own package (unique name: packages are imported by path)
and breaks it the way authors do: a wrong constant, an unmarked inventory entry,
a missing staged file."""
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ptogym import probe
from ptogym.interp import trace
from ptogym.verify.cases import Case
from ptogym.verify.runner import open_backend, run_case
from ptogym.workflow.bisect import match_probes, run_bisect
from ptogym.workflow.inventory import check_inventory, read_inventory
from ptogym.workflow.package import WorkflowError, resolve
from ptogym.workflow.probe import recording_probes
from ptogym.workflow.scaffold import scaffold
from ptogym.workflow.stage import FAIL, PASS, SKIPPED, run_stages, write_log

REPO = Path(__file__).resolve().parents[1]


def _cli(*argv):
    """``python -m ptogym ...`` from this checkout: (exit code, stdout lines)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "ptogym", *argv], capture_output=True, text=True, env=env,
                          cwd=REPO, timeout=240)
    assert "Traceback" not in done.stderr + done.stdout
    return done.returncode, done.stdout.strip().splitlines()


def _new(tmp_path, name, modules=3) -> Path:
    return scaffold(name, modules, tmp_path)


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path.name}"
    path.write_text(text.replace(old, new))


# ------------------------------------------------------------------ scaffold
def test_scaffold_runs_lints_and_stages_out_of_the_box(tmp_path):
    package_dir = _new(tmp_path, "wf_fresh")
    names = {p.name for p in package_dir.iterdir()}
    assert {"DESIGN.md", "README.md", "golden.py", "kernel.py", "op.py", "cases.json", "test_wf_fresh.py",
            "wf_fresh_module1_impl.py", "wf_fresh_module12_impl.py", "wf_fresh_module123_impl.py"} <= names
    assert "| M3 | scale3" in (package_dir / "DESIGN.md").read_text()
    package = resolve(str(package_dir))
    for level in ("level0", "level1"):  # level1: bf16 with a tail block of rows
        result = run_case(package.spec, package.case(level), open_backend("interp"))
        assert result.status == "PASS", result.report()
        assert result.outputs["y"].max_diff == 0  # x * 8 is exact
        assert result.tolerances["y"].reason and result.tolerances["y"].source.endswith("tolerances.y")
    assert not package.case("level0").has_default  # the per-output form, no level-wide bounds
    assert package.case("level1").tolerance("y").source == "level1.tolerances.y"
    code, lines = _cli("lint", str(package_dir))
    assert code == 0 and lines[-1].startswith("[LINT_PASS] 8 file(s)")
    code, lines = _cli("stage", str(package_dir))
    assert code == 0 and lines[-1] == "[STAGE_PASS] wf_fresh: 3 module file(s) verified on interp (level0)"


def test_scaffold_refuses_bad_names_and_existing_packages(tmp_path):
    _new(tmp_path, "wf_taken", modules=None)
    for argv in (["wf_taken"], ["Bad-Name"], ["wf_ok", "--modules", "10"]):
        code, lines = _cli("new", *argv, "--dir", str(tmp_path))
        assert code == 2 and lines[-1].startswith("[NEW_ERROR]")
    assert not (tmp_path / "wf_ok").exists()


def test_scaffold_in_the_registry_passes_ptogym_run_quick():
    name = f"wf_registry_{os.getpid()}"
    try:
        code, lines = _cli("new", name)
        assert code == 0 and lines[-1].endswith(f"next: ptogym run {name} --quick")
        code, lines = _cli("run", name, "--quick")
        assert code == 0 and lines[-1] == "[PRECISION_PASS]"
    finally:
        shutil.rmtree(REPO / "ptogym" / "ops" / name, ignore_errors=True)


# ------------------------------------------------------------------ stage
def test_stage_log_records_every_module(tmp_path):
    package_dir = _new(tmp_path, "wf_log")
    log = run_stages(str(package_dir))
    assert [(m.module, m.file, m.verdict) for m in log.modules] == [
        (1, "wf_log_module1_impl.py", PASS), (2, "wf_log_module12_impl.py", PASS),
        (3, "wf_log_module123_impl.py", PASS)]
    md, js = write_log(log, tmp_path / "logs")
    document = json.loads(js.read_text())
    entry = document["modules"][1]
    assert entry["outputs"] == [{"name": "module2_out", "max_diff": 0.0, "ratio": 0.0, "all_close": True}]
    assert {"module", "file", "verdict", "timestamp", "inventory"} <= set(entry)
    assert "| M2 | `wf_log_module12_impl.py` | module2_out | 0 | 0 | PASS |" in md.read_text()


def test_stage_stops_at_the_first_wrong_module_and_resumes_with_from(tmp_path):
    package_dir = _new(tmp_path, "wf_bug")
    module12 = package_dir / "wf_bug_module12_impl.py"
    _edit(module12, "module2_out = pypto.mul(module1_out, 2.0)", "module2_out = pypto.mul(module1_out, 2.5)")
    code, lines = _cli("stage", str(package_dir))
    assert code == 1
    assert lines[-1].startswith(
        "[STAGE_FAIL] wf_bug: module 2 (wf_bug_module12_impl.py): out of tolerance: module2_out")
    assert not any(line.startswith("M3 ") for line in lines), "the chain must stop at module 2"
    _edit(module12, "2.5)", "2.0)")
    code, lines = _cli("stage", str(package_dir), "--from", "2")
    assert code == 0 and lines[0].startswith("M1 wf_bug_module1_impl.py: PASS")  # kept from the previous log
    document = json.loads((package_dir / "verification" / "stage_log.json").read_text())
    assert [m["verdict"] for m in document["modules"]] == [PASS, PASS, PASS]
    assert run_stages(str(package_dir), start=3, log_dir=tmp_path / "none").modules[0].verdict == SKIPPED


def test_stage_fails_on_an_unimplemented_inventory_entry(tmp_path):
    package_dir = _new(tmp_path, "wf_inventory")
    _edit(package_dir / "wf_inventory_module12_impl.py", "  # golden: scale2", "")
    log = run_stages(str(package_dir))
    assert [m.verdict for m in log.modules] == [PASS, FAIL]
    assert "M2 scale2" in log.modules[1].reason and "MISSING" in log.modules[1].reason
    assert log.modules[1].outputs == []  # judged before running anything


def test_inventory_mark_must_sit_on_a_pypto_call(tmp_path):
    package_dir = _new(tmp_path, "wf_mark", modules=None)
    kernel = package_dir / "kernel.py"
    (entry,) = run_stages(str(package_dir)).modules  # L0: no staged files, kernel.py is the one module
    assert (entry.file, entry.verdict, entry.outputs[0]["name"]) == ("kernel.py", PASS, "y")
    _edit(kernel, "  # golden: scale1", "")
    _edit(kernel, "row = block * ROWS_PER_TILE", "row = block * ROWS_PER_TILE  # golden: scale1")
    checks = check_inventory(read_inventory(package_dir / "golden.py"), kernel, 1)
    assert [(c.ok, c.problem) for c in checks] == [(False, "the marked line calls no pypto op")]
    log = run_stages(str(package_dir))
    assert log.modules[0].file == "kernel.py" and log.modules[0].verdict == FAIL


def test_stage_reports_a_crashing_or_malformed_module(tmp_path, monkeypatch):
    from ptogym.interp import runtime

    monkeypatch.setattr(runtime.GLOBAL_RUN, "vec_tile", None)  # no tile shape left by an earlier test
    package_dir = _new(tmp_path, "wf_crash", modules=2)
    module12 = package_dir / "wf_crash_module12_impl.py"
    _edit(module12, 'return {"module2_out": boundary.reshape(x.shape)}', "return boundary")
    log = run_stages(str(package_dir))
    assert [m.verdict for m in log.modules] == [PASS, FAIL] and "not a dict" in log.modules[1].reason
    package_dir = _new(tmp_path, "wf_crash2", modules=2)  # a fresh package: modules stay imported
    _edit(package_dir / "wf_crash2_module12_impl.py", "pypto.set_vec_tile_shapes(ROWS_PER_TILE, hidden)",
          "pass")  # the interpreter raises C-TILE-06 at the first op
    log = run_stages(str(package_dir))
    assert log.modules[1].verdict == "ERROR" and "C-TILE-06" in log.modules[1].reason and log.exit_code == 2
    broken = _new(tmp_path, "wf_syntax", modules=1)
    (broken / "wf_syntax_module1_impl.py").write_text("def broken(:\n")
    code, lines = _cli("stage", str(broken))
    assert code == 2 and "SyntaxError" in "\n".join(lines) and lines[-1].startswith("[STAGE_ERROR] wf_syntax: module 1")


def test_stage_errors_name_the_problem(tmp_path):
    package_dir = _new(tmp_path, "wf_chain")
    (package_dir / "wf_chain_module12_impl.py").unlink()
    code, lines = _cli("stage", str(package_dir))
    assert code == 2 and "wf_chain_module12_impl.py is missing" in lines[0]
    assert lines[-1] == "[STAGE_ERROR] " + str(package_dir) + ": nothing verified"
    code, lines = _cli("stage", "no_such_op")
    assert code == 2 and "not a registered operator" in lines[0]
    code, lines = _cli("stage", str(_new(tmp_path, "wf_backend", modules=None)), "--backend", "nowhere")
    assert code == 2 and "unknown backend 'nowhere'" in lines[0] and lines[-1].startswith("[STAGE_ERROR]")
    with pytest.raises(WorkflowError, match="no golden function inventory|has no 'Golden function inventory:'"):
        golden = package_dir / "golden.py"
        _edit(golden, "Golden function inventory:", "Inventory:")
        run_stages(str(package_dir))


# ------------------------------------------------------------------ bisect
def test_bisect_finds_the_first_diverging_op(tmp_path):
    package_dir = _new(tmp_path, "wf_bisect")
    kernel = package_dir / "kernel.py"
    assert run_bisect(str(package_dir)).exit_code == 0
    _edit(kernel, "module2_out = pypto.mul(module1_out, 2.0)", "module2_out = pypto.mul(module1_out, 2.5)")
    line = kernel.read_text().splitlines().index(
        next(l for l in kernel.read_text().splitlines() if "module1_out, 2.5" in l)) + 1
    code, lines = _cli("bisect", str(package_dir), "level1")
    assert code == 1
    assert lines[-1] == f"[BISECT_FOUND] wf_bisect: first divergence module2_out at kernel.py:{line} (pypto.mul)"
    text = "\n".join(lines)
    assert "module1_out      PASS" in text and "module3_out      FAIL" in text  # later ops inherit the error
    assert "inputs reaching it:\n  module1_out: probe PASS" in text
    result = run_bisect(str(package_dir), module=2)  # the staged file is still right
    assert result.exit_code == 0 and result.target == "wf_bisect_module12_impl.py"


def test_bisect_errors(tmp_path):
    package_dir = _new(tmp_path, "wf_bisect_err")
    code, lines = _cli("bisect", str(package_dir), "--module", "7")
    assert code == 2 and lines[-1].startswith("[BISECT_ERROR]")
    _edit(package_dir / "kernel.py", "module1_out = pypto.mul(", "renamed = pypto.mul(")
    _edit(package_dir / "kernel.py", "pypto.mul(module1_out, 2.0)", "pypto.mul(renamed, 2.0)")
    _edit(package_dir / "kernel.py", "module2_out", "other")
    _edit(package_dir / "kernel.py", "module3_out", "last")
    result = run_bisect(str(package_dir))
    assert result.exit_code == 2 and {p.status for p in result.probes} == {"NOT_LOCATED"}


def test_bisect_locates_the_registered_operators_outputs():
    """inplace_add_rms_norm's golden has no probes, but its outputs y, x_add, rstd are
    names of kernel ops: their tiles, from several loops of different block sizes,
    stack back to the full tensors."""
    result = run_bisect("inplace_add_rms_norm", "level0")
    assert {p.name: p.status for p in result.probes} == {"y": "PASS", "x_add": "PASS", "rstd": "PASS"}
    assert result.exit_code == 0


def _records(*specs):
    """Synthetic trace records: (op, line, label, tensor)."""
    return [trace.OpRecord(i, op, __file__, line, label, data) for i, (op, line, label, data) in enumerate(specs)]


def test_matching_by_label_and_stacking_tiles():
    case = Case(op="o", id="l", description="d", seed=0, inputs={}, rtol=1e-6, atol=1e-6)
    full = torch.arange(12.0).reshape(2, 3, 2)
    records = _records(("mul", 1, "scaled", full.reshape(6, 2)[:4]), ("add", 1, "other", torch.zeros(1)),
                       ("mul", 1, "scaled", full.reshape(6, 2)[4:]))
    (match,) = match_probes({"scaled": full}, records, case)
    assert match.status == "PASS" and [r.index for r in match.records] == [0, 2]
    (match,) = match_probes({"scaled": torch.zeros(5, 2)}, records, case)
    assert match.status == "UNPLACED" and "do not stack to [5, 2]" in match.note


EXAMPLE = REPO / "examples" / "add_rms_norm_scale"


@pytest.mark.parametrize("level", ["level0", "level1"])
def test_worked_example_of_docs_workflow(level):
    """examples/add_rms_norm_scale (docs/workflow.md): every module verified, the cases
    pass, and bisect locates every probed intermediate of the deliverable kernel."""
    log = run_stages(str(EXAMPLE), level)
    assert [(m.module, m.verdict) for m in log.modules] == [(1, PASS), (2, PASS), (3, PASS)]
    package = resolve(str(EXAMPLE))
    assert run_case(package.spec, package.case(level), open_backend("interp")).status == "PASS"
    result = run_bisect(str(EXAMPLE), level)
    assert {p.name: p.status for p in result.probes} == {
        "x_sum": "PASS", "mean_square": "PASS", "rstd": "PASS", "normed": "PASS", "y": "PASS", "x_add": "NOT_LOCATED"}


# ------------------------------------------------------------------ probes and the trace
def test_probe_is_free_outside_recording_and_unique_inside():
    tensor = torch.ones(2)
    assert probe("a", tensor) is tensor
    with recording_probes() as probes:
        probe("a", tensor * 2)
        with pytest.raises(ValueError, match="recorded twice"):
            probe("a", tensor)
    assert list(probes) == ["a"] and probes["a"].tolist() == [2.0, 2.0]


def build_double(pypto):
    @pypto.frontend.jit()
    def double(x: pypto.Tensor([2, 8], pypto.DT_FP32), out: pypto.Tensor([2, 8], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(2, 8)
        pypto.set_semantic_label("double")
        out[:] = pypto.add(x, x)  # the traced op
    return double


def test_trace_records_op_name_line_and_label():
    import ptogym.interp

    kernel = build_double(ptogym.interp)
    x, out = torch.ones(2, 8), torch.zeros(2, 8)
    kernel(x, out)
    assert not trace.recorders  # not recording: the hook in wrap() does nothing
    with trace.recording() as records:
        kernel(x, out)
    assert not trace.recorders
    source = Path(__file__).read_text().splitlines()
    line = next(i for i, text in enumerate(source, 1) if text.endswith("# the traced op"))
    (record,) = records
    assert (record.op, record.line, record.label, record.file) == ("add", line, "double", __file__)
    assert torch.equal(record.data, out * 1) and torch.equal(out, torch.full((2, 8), 2.0))


@pytest.mark.pypto
@pytest.mark.skipif(importlib.util.find_spec("pypto") is None, reason="the real pypto package is not installed")
def test_scaffold_kernel_passes_under_real_pypto(tmp_path):
    """The scaffold's kernel (row blocks, a valid_shape tail, casts) through pypto 0.2.0's
    compiler and interpreter: real pypto accepts what `ptogym new` writes."""
    package = resolve(str(_new(tmp_path, "wf_sim", modules=1)))
    result = run_case(package.spec, package.case("level1"), open_backend("pypto-sim"))
    assert result.status == "PASS", result.report()
