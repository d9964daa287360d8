"""ptogym new / stage / bisect on scaffolded packages in a scratch directory, plus
the pieces they stand on: probes, the interpreter's op trace, the golden inventory.

Each test scaffolds its own package (unique name: packages are imported by path)
and breaks it the way authors do: a wrong constant, an unmarked inventory entry,
a missing staged file."""
import hashlib
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
from ptogym import ops
from ptogym.workflow.bisect import match_probes, report, run_bisect, verdict_line
from ptogym.workflow.inventory import check_inventory, read_inventory
from ptogym.workflow.package import WorkflowError, resolve
from ptogym.workflow.probe import recording_probes
from ptogym.workflow.scaffold import scaffold
from ptogym.workflow.stage import FAIL, PASS, PASS_LENIENT, run_stages, write_log

REPO = Path(__file__).resolve().parents[1]


def _cli(*argv, **environ):
    """``python -m ptogym ...`` from this checkout: (exit code, stdout lines)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "PTOGYM_LENIENT": "0", **environ}
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
    assert code == 0 and lines[0].startswith("M1 wf_bug_module1_impl.py: PASS")
    assert "kept from the previous log" in lines[0]  # same file contents, level and backend
    assert lines[-1].endswith("M1 kept from the previous log (same content, level, backend)")
    document = json.loads((package_dir / "verification" / "stage_log.json").read_text())
    assert [m["verdict"] for m in document["modules"]] == [PASS, PASS, PASS]
    first = run_stages(str(package_dir), start=3, log_dir=tmp_path / "none").modules[0]
    assert first.verdict == PASS and first.provenance == "re-run despite --from 3: no entry in the previous log"


def test_stage_from_keeps_a_pass_only_on_the_same_content_level_and_backend(tmp_path):
    """The log records what each verdict was earned on; --from K re-runs an earlier module
    whose file changed (here: now wrong), or whose entry came from another level or backend."""
    package_dir = _new(tmp_path, "wf_reuse")
    code, lines = _cli("stage", str(package_dir), "--level", "level0")
    assert code == 0
    log_path = package_dir / "verification" / "stage_log.json"
    entry = json.loads(log_path.read_text())["modules"][0]
    module1 = package_dir / "wf_reuse_module1_impl.py"
    assert entry["sources"]["wf_reuse_module1_impl.py"] == hashlib.sha256(module1.read_bytes()).hexdigest()
    assert {"golden.py", "op.py", "cases.json"} <= set(entry["sources"])
    assert (entry["case"], entry["backend"], entry["lenient"]) == ("level0", "interp", False)
    code, lines = _cli("stage", str(package_dir), "--level", "level1", "--from", "2")  # another level
    assert code == 0 and "re-run despite --from 2: the previous entry was earned on another case 'level0'" in lines[0]
    _edit(module1, "module1_out = pypto.mul(x_fp32, 2.0)", "module1_out = pypto.mul(x_fp32, 2.5)")
    code, lines = _cli("stage", str(package_dir), "--level", "level1", "--from", "2")
    assert code == 1 and lines[-1].startswith("[STAGE_FAIL] wf_reuse: module 1 (wf_reuse_module1_impl.py)")
    assert "content changed since the previous log: wf_reuse_module1_impl.py" in lines[0]
    _edit(module1, "2.5)", "2.0)")
    assert _cli("stage", str(package_dir), "--level", "level1")[0] == 0
    document = json.loads(log_path.read_text())
    document["modules"][0]["backend"] = "pypto-sim"
    log_path.write_text(json.dumps(document))
    log = run_stages(str(package_dir), "level1", start=2)
    assert log.modules[0].provenance.endswith("another backend 'pypto-sim' -> 'interp'")
    assert log.modules[1].provenance is None and log.exit_code == 0
    assert not list(log_path.parent.glob("*.tmp"))  # written through a temporary file, renamed


def test_stage_under_lenient_mode_is_no_plain_pass(tmp_path):
    """A module whose tile shape is no int (C-TILE-06, refused by pypto) is an error;
    PTOGYM_LENIENT=1 lets it through, and the verdict says so (exit 3)."""
    package_dir = _new(tmp_path, "wf_lenient", modules=1)
    _edit(package_dir / "wf_lenient_module1_impl.py", "set_vec_tile_shapes(ROWS_PER_TILE, hidden)",
          "set_vec_tile_shapes(ROWS_PER_TILE, hidden * 1.0)")
    code, lines = _cli("stage", str(package_dir), "--level", "level1")
    assert code == 2 and "C-TILE-06" in lines[-1] and lines[-1].startswith("[STAGE_ERROR]")
    code, lines = _cli("stage", str(package_dir), "--level", "level1", PTOGYM_LENIENT="1")
    assert code == 3 and lines[-1].startswith("[STAGE_PASS_LENIENT] wf_lenient: 1 module file(s) verified")
    assert "lenient mode downgraded the checks of M1" in lines[-1]
    assert lines[0].startswith("M1 wf_lenient_module1_impl.py: PASS_LENIENT")
    entry = json.loads((package_dir / "verification" / "stage_log.json").read_text())["modules"][0]
    assert entry["verdict"] == PASS_LENIENT and entry["lenient"] and entry["downgraded"] >= 1


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
    code, lines = _cli("stage", str(package_dir))  # the violation in one line, no traceback (_cli checks)
    assert code == 2 and lines[-1].startswith("[STAGE_ERROR] wf_crash2: module 2") and "C-TILE-06" in lines[-1]
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
    assert code == 2 and "unknown operator 'no_such_op'" in lines[0]
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
    result = run_bisect(str(package_dir))  # the output still matches, but no probe can be checked
    assert result.exit_code == 2
    assert {p.name: p.status for p in result.probes} == {
        "y": "PASS", "module1_out": "NOT_LOCATED", "module2_out": "NOT_LOCATED", "module3_out": "NOT_LOCATED"}
    assert verdict_line(result).startswith("[BISECT_ERROR] wf_bisect_err: golden value(s) not matched to a kernel "
                                           "value: module1_out (NOT_LOCATED: no kernel value named after it")


@pytest.mark.parametrize("op", ops.OP_NAMES)
def test_bisect_is_clean_on_every_shipped_operator(op):
    """Every output compared as the kernel wrote it and located by the op assembled into it
    (rms_norm's y is the value after gamma, not the earlier y before it)."""
    result = run_bisect(op)
    assert result.exit_code == 0, report(result)
    assert {p.kind for p in result.probes} == {"output"} and all(p.status == "PASS" for p in result.probes)
    assert all(p.records for p in result.probes), "every output is located by the writes into it"
    assert verdict_line(result).startswith(f"[BISECT_CLEAN] {op}: every value compared matches")


def _line_of(path: Path, fragment: str) -> int:
    return next(i for i, text in enumerate(path.read_text().splitlines(), 1) if fragment in text)


def test_bisect_a_wrong_final_output_is_never_clean(tmp_path):
    """y = 4x + 1 against the golden's 4x: no intermediate diverges, the output does."""
    package_dir = _new(tmp_path, "wf_final", modules=2)  # (edited before its first import: modules stay imported)
    kernel = package_dir / "kernel.py"
    _edit(kernel, "pypto.cast(module2_out, out_dt)", "pypto.cast(pypto.add(module2_out, 1.0), out_dt)")
    result = run_bisect(str(package_dir))
    line = _line_of(kernel, "pypto.add(module2_out, 1.0)")
    assert result.exit_code == 1 and result.first_mismatch.name == "y" and result.first_mismatch.kind == "output"
    # level0 is fp32: the cast to fp32 is no op, the value assembled into y is the add's
    assert verdict_line(result) == f"[BISECT_FOUND] wf_final: first divergence y at kernel.py:{line} (pypto.add)"
    assert {p.name: p.status for p in result.probes if p.kind == "probe"} == {"module1_out": "PASS",
                                                                             "module2_out": "PASS"}
    _edit(package_dir / "golden.py", 'h = probe("module1_out", h * 2.0)', "h = h * 2.0")  # a golden without probes
    _edit(package_dir / "golden.py", 'h = probe("module2_out", h * 2.0)', "h = h * 2.0")
    code, lines = _cli("bisect", str(package_dir))
    assert code == 1 and lines[-1] == f"[BISECT_FOUND] wf_final: first divergence y at kernel.py:{line} (pypto.add)"


def test_bisect_an_output_the_kernel_did_not_write_is_not_clean(tmp_path):
    """An output right by value but made outside the kernel (here: the host returns the
    golden's) is not located, so it cannot be clean."""
    package_dir = _new(tmp_path, "wf_host", modules=None)
    _edit(package_dir / "op.py", 'return {"y": y}, report', 'return {"y": ' + "wf_host_golden(inputs['x'])}, report")
    result = run_bisect(str(package_dir))
    assert result.exit_code == 2 and result.probes[0].status == "NOT_LOCATED"
    assert "y (NOT_LOCATED: no traced kernel op wrote into it)" in verdict_line(result)


def test_bisect_takes_the_last_value_of_a_rebound_name(tmp_path):
    """A probe matches the value its name holds when the dataflow reads it on, not an
    earlier value of the same name: wrong after a rebinding is found, wrong before it
    and corrected is clean; two unrelated values of one name are an error, not a guess."""
    first = "module1_out = pypto.mul(x_fp32, 2.0)  # golden: scale1"
    indent = " " * 12

    def bisect_with(name: str, replacement: str):
        package_dir = _new(tmp_path, name, modules=2)  # a fresh package per edit: modules stay imported
        _edit(package_dir / "kernel.py", first, replacement)
        return package_dir / "kernel.py", run_bisect(str(package_dir))

    kernel, result = bisect_with("wf_rebind_wrong", first + f"\n{indent}module1_out = pypto.add(module1_out, 0.5)")
    line = _line_of(kernel, "pypto.add(module1_out, 0.5)")
    assert verdict_line(result) == f"[BISECT_FOUND] wf_rebind_wrong: first divergence module1_out at " \
                                   f"kernel.py:{line} (pypto.add)"
    kernel, result = bisect_with("wf_rebind_via", first + f"\n{indent}spare = pypto.add(module1_out, 0.5)\n"
                                                         f"{indent}module1_out = pypto.mul(spare, 1.0)")
    assert result.first_mismatch.name == "module1_out"  # rebound through another name: still the chain's end
    assert result.first_mismatch.where == f"kernel.py:{_line_of(kernel, 'pypto.mul(spare, 1.0)')}"
    kernel, result = bisect_with("wf_rebind_fixed", "module1_out = pypto.mul(x_fp32, 4.0)  # golden: scale1\n"
                                                    f"{indent}module1_out = pypto.mul(module1_out, 0.5)")
    assert result.exit_code == 0 and result.probes[1].where == f"kernel.py:{_line_of(kernel, 'module1_out, 0.5')}"
    kernel, result = bisect_with("wf_rebind_two", f"module1_out = pypto.mul(x_fp32, 3.0)\n{indent}"
                                                  f"spare = pypto.add(module1_out, 0.0)\n{indent}{first}")
    assert result.exit_code == 2 and result.probes[1].status == "AMBIGUOUS"  # both values are read on
    assert "module1_out (AMBIGUOUS: each of kernel.py:" in verdict_line(result)
    kernel, result = bisect_with("wf_rebind_dead", f"module1_out = pypto.mul(x_fp32, 3.0)\n{indent}{first}")
    assert result.exit_code == 0  # a value nothing reads is not the one the dataflow carries on


def test_bisect_locates_the_registered_operators_outputs():
    """inplace_add_rms_norm's golden has no probes; its outputs y, x_add, rstd are located
    by the tiles assembled into them, from several loops of different block sizes."""
    result = run_bisect("inplace_add_rms_norm", "level0")
    assert {p.name: (p.kind, p.status) for p in result.probes} == {
        "y": ("output", "PASS"), "x_add": ("output", "PASS"), "rstd": ("output", "PASS")}
    assert result.exit_code == 0


def test_bisect_under_lenient_mode_is_no_plain_clean(tmp_path, monkeypatch):
    from ptogym.interp import checks

    package_dir = _new(tmp_path, "wf_bisect_lenient", modules=None)
    _edit(package_dir / "kernel.py", "set_vec_tile_shapes(ROWS_PER_TILE, hidden)",
          "set_vec_tile_shapes(ROWS_PER_TILE, hidden * 1.0)")  # C-TILE-06: a float tile shape
    with pytest.raises(WorkflowError, match="C-TILE-06"):
        run_bisect(str(package_dir), "level1")
    monkeypatch.setattr(checks._mode, "lenient", True)  # what PTOGYM_LENIENT=1 sets at import
    result = run_bisect(str(package_dir), "level1")
    assert result.exit_code == 3 and result.leniency.downgraded >= 1
    assert verdict_line(result).startswith("[BISECT_CLEAN_LENIENT] wf_bisect_lenient: every value compared matches")


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
        "x_sum": "PASS", "mean_square": "PASS", "rstd": "PASS", "normed": "PASS", "y": "PASS", "x_add": "PASS"}
    assert result.exit_code == 0


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
