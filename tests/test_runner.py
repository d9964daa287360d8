"""Runner verdicts, exit codes and output, driven by a fake 'add' operator."""
from __future__ import annotations

import json
import re

import pytest
import torch

from ptogym import backends, ops
from ptogym.backends import BackendUnavailable
from ptogym.backends.base import BackendBase, LaunchReport
from ptogym.ops import OpSpec
from ptogym.verify.cases import load_cases
from ptogym.verify.runner import ERROR, FAIL, PASS, run_case, run_cases


def level(level_id, shape, tags=()):
    tensor = {"shape": shape, "dtype": "float32"}
    return {"id": level_id, "description": f"{level_id} case", "seed": 3, "inputs": {"a": tensor, "b": tensor},
            "attrs": {"scale": 2.0}, "rtol": 1e-3, "atol": 1e-3, "tags": list(tags)}


CASES = {"op": "fake_add", "required_levels": ["level0"],
         "levels": [level("level0", [4, 8], ["quick"]), level("level1", [16, 8])]}


def make_inputs(case, generator, device):
    return {name: torch.randn(spec.shape, generator=generator).to(spec.dtype).to(device)
            for name, spec in case.inputs.items()}


def golden(inputs, attrs):
    # Writes its inputs in place: only harmless because the runner passes copies.
    return {"out": inputs["a"].add_(inputs["b"]).mul_(attrs["scale"])}


def launched(outputs, backend, valid=True):
    return outputs, LaunchReport(backend=backend.name, wall_s=0.0, outputs_valid=valid)


def correct_run(inputs, attrs, backend):
    return launched({"out": (inputs["a"] + inputs["b"]) * attrs["scale"]}, backend)


def off_by_half_run(inputs, attrs, backend):
    outputs, report = correct_run(inputs, attrs, backend)
    outputs["out"][1, 2] += 0.5
    return outputs, report


def raising_run(inputs, attrs, backend):
    raise RuntimeError("kernel exploded")


class FakeBackend(BackendBase):
    name = "fake"
    pypto = None


class OfflineBackend(FakeBackend):
    name = "offline"

    def check_available(self):
        raise BackendUnavailable("no device attached")


@pytest.fixture
def install_op(tmp_path, monkeypatch):
    """install_op(run, name=..., cases=...) registers a fake operator in place of the real registry."""
    registry: dict[str, OpSpec] = {}

    def get_op(name):
        if name not in registry:
            raise KeyError(f"unknown operator {name!r}; known: {', '.join(registry)}")
        return registry[name]

    def install(run, name="fake_add", cases=CASES, **fields):
        folder = tmp_path / name
        folder.mkdir()
        case_file = folder / "cases.json"
        case_file.write_text(json.dumps({**cases, "op": name}))
        spec_fields = dict(name=name, description=f"{name}: elementwise add, scaled", make_inputs=make_inputs,
                           golden=golden, run=run, check_case=lambda case: [], hbm_bytes=lambda case: 0,
                           input_names=("a", "b"), cases_file=case_file)
        registry[name] = OpSpec(**{**spec_fields, **fields})
        monkeypatch.setattr(ops, "OP_NAMES", tuple(registry))
        return registry[name]

    fake_backends = {"fake": FakeBackend(), "offline": OfflineBackend()}

    def get_backend(name=None):
        if (name or "fake") not in fake_backends:
            raise ValueError(f"backend: unknown backend {name!r}")
        return fake_backends[name or "fake"]

    monkeypatch.setattr(ops, "get_op", get_op)
    monkeypatch.setattr(ops, "OP_NAMES", ())
    monkeypatch.setattr(backends, "get_backend", get_backend)
    return install


def progress(line: str) -> str:
    """A progress line with its elapsed seconds masked."""
    return re.sub(r"elapsed [0-9.]+s", "elapsed Xs", line)


def run_cli(ptogym_cli, capsys, *argv) -> tuple[int, list[str]]:
    exit_code = ptogym_cli(list(argv))
    return exit_code, capsys.readouterr().out.rstrip("\n").splitlines()


# ------------------------------------------------------------------ verdicts
def test_all_cases_pass(install_op, ptogym_cli, capsys):
    # also shows the golden got copies: it adds in place, so shared inputs would fail
    install_op(correct_run)
    exit_code, lines = run_cli(ptogym_cli, capsys, "run", "fake_add")
    assert exit_code == 0
    assert lines[-1] == "[PRECISION_PASS]"
    assert lines[-2] == "fake_add [fake]: 2 passed, 0 failed, 0 errors"
    assert progress(lines[0]) == "[1/2] fake_add level0 on fake ... (elapsed Xs)"
    assert lines[1].startswith("level0  a:float32[4,8] b:float32[4,8]  PASS  out max_abs=0 max_rel=0  ")
    assert lines[2] == ("  out: within rtol=0.001 atol=0.001 [level default]: the level's default bounds "
                        "(no entry for this output)")
    assert progress(lines[3]) == "[2/2] fake_add level1 on fake ... (elapsed Xs)"


def test_out_of_tolerance_output_fails_with_details(install_op, ptogym_cli, capsys):
    install_op(off_by_half_run)
    exit_code, lines = run_cli(ptogym_cli, capsys, "run", "fake_add", "level0")
    text = "\n".join(lines)
    assert exit_code == 1
    assert lines[-1] == "[PRECISION_FAIL]"
    assert "  FAIL  out max_abs=0.5 max_rel=" in lines[1]
    assert "out: FAIL (rtol=0.001 atol=0.001)" in text
    assert "worst 1 elements:" in text and "[1, 2]" in text
    assert lines[-2] == "fake_add [fake]: 0 passed, 1 failed, 0 errors (level0)"


def test_a_lenient_run_is_no_plain_pass(install_op, ptogym_cli, capsys, monkeypatch, tmp_path):
    """Checks downgraded by lenient mode (PTOGYM_LENIENT=1 sets checks._mode.lenient at import,
    lenient() sets it for a block): the verdict says so, exit 3; a failure stays a failure."""
    from ptogym.interp import checks, lenient

    install_op(correct_run)
    monkeypatch.setattr(checks._mode, "lenient", True)
    exit_code, lines = run_cli(ptogym_cli, capsys, "run", "fake_add", "level0", "--json", str(tmp_path / "r.json"))
    assert exit_code == 3 and lines[-1] == "[PRECISION_PASS_LENIENT]"
    assert lines[-2].startswith("fake_add [fake]: 1 passed, 0 failed, 0 errors; lenient mode")
    document = json.loads((tmp_path / "r.json").read_text())
    assert (document["verdict"], document["exit_code"]) == ("PRECISION_PASS_LENIENT", 3)
    assert document["runs"][0]["lenient"] is True
    install_op(off_by_half_run, name="fake_off")
    assert run_cli(ptogym_cli, capsys, "run", "fake_off", "level0")[1][-1] == "[PRECISION_FAIL]"
    monkeypatch.setattr(checks._mode, "lenient", False)
    assert run_cases("fake_add", ["level0"]).exit_code == 0
    with lenient():
        assert run_cases("fake_add", ["level0"]).marker == "[PRECISION_PASS_LENIENT]"


@pytest.mark.parametrize("run, reason", [
    (raising_run, "run raised RuntimeError: kernel exploded"),
    (lambda inputs, attrs, backend: launched({"out": inputs["a"]}, backend, valid=False),
     "backend 'fake' ran the kernel but computed no numbers (outputs_valid=False)"),
    (lambda inputs, attrs, backend: launched({"y": inputs["a"]}, backend),
     "run returned outputs ['y'], the golden ['out']"),
    (lambda inputs, attrs, backend: {"out": inputs["a"]},
     "run raised TypeError: OpSpec.run must return (dict of outputs, LaunchReport), got dict"),
])
def test_cases_that_cannot_run_are_run_errors(install_op, ptogym_cli, capsys, run, reason):
    install_op(run)
    exit_code, lines = run_cli(ptogym_cli, capsys, "run", "fake_add", "level0")
    assert exit_code == 2
    assert lines[-1] == "[RUN_ERROR]"
    assert reason in lines[1] and "  ERROR  " in lines[1]


def test_invalid_inputs_are_a_run_error(install_op, ptogym_cli, capsys):
    def refusing_inputs(case, generator, device):
        raise ValueError("b must match a")

    install_op(correct_run, make_inputs=refusing_inputs)
    exit_code, lines = run_cli(ptogym_cli, capsys, "run", "fake_add")
    assert exit_code == 2 and lines[-1] == "[RUN_ERROR]"
    assert "make_inputs raised ValueError: b must match a" in lines[1]


def test_verbose_shows_the_traceback(install_op, ptogym_cli, capsys):
    install_op(raising_run)
    exit_code, lines = run_cli(ptogym_cli, capsys, "run", "fake_add", "level0", "--verbose")
    assert exit_code == 2
    assert "Traceback (most recent call last):" in lines
    assert "RuntimeError: kernel exploded" in lines


def test_run_error_dominates_fail(install_op, ptogym_cli, capsys):
    def wrong_then_raising(inputs, attrs, backend):
        if inputs["a"].shape[0] == 16:
            raise RuntimeError("level1 kernel exploded")
        return off_by_half_run(inputs, attrs, backend)

    install_op(wrong_then_raising)
    exit_code, lines = run_cli(ptogym_cli, capsys, "run", "fake_add")
    assert exit_code == 2
    assert lines[-1] == "[RUN_ERROR]"
    assert lines[-2] == "fake_add [fake]: 0 passed, 1 failed, 1 errors (level0, level1)"


# ------------------------------------------------------------------ errors before any case
@pytest.mark.parametrize("argv, reason", [
    (["run", "fake_add", "level9"], "fake_add: cases: ValueError: unknown level(s) level9; known: level0, level1"),
    (["run", "no_such_op"], "no_such_op: operator: KeyError: unknown operator 'no_such_op'; known: fake_add"),
    (["run", "fake_add", "--backend", "offline"], "fake_add: backend: BackendUnavailable: no device attached"),
    (["run", "fake_add", "--backend", "tpu"], "fake_add: backend: ValueError: backend: unknown backend 'tpu'"),
])
def test_unrunnable_requests_are_run_errors(install_op, ptogym_cli, capsys, argv, reason):
    install_op(correct_run)
    exit_code, lines = run_cli(ptogym_cli, capsys, *argv)
    assert exit_code == 2
    assert lines == [reason, "[RUN_ERROR]"]


def test_bad_case_file_is_a_run_error(install_op, ptogym_cli, capsys):
    broken = {**CASES, "levels": [{**level("level0", [4, 8]), "seed": -5}]}
    spec = install_op(correct_run, cases=broken)
    exit_code, lines = run_cli(ptogym_cli, capsys, "run", "fake_add")
    assert exit_code == 2
    assert lines[-1] == "[RUN_ERROR]"
    assert f"{spec.cases_path}: case 'level0': field 'seed': must be >= 0, got -5" in lines[0]


def test_operator_name_or_all_is_required(install_op, ptogym_cli, capsys):
    install_op(correct_run)
    assert run_cli(ptogym_cli, capsys, "run")[0] == 2
    exit_code, lines = run_cli(ptogym_cli, capsys, "run", "fake_add", "--all")
    assert exit_code == 2 and lines[-1] == "[RUN_ERROR]"


# ------------------------------------------------------------------ selection and listing
def test_quick_runs_only_quick_cases_and_levels_keep_their_order(install_op, ptogym_cli, capsys):
    install_op(correct_run)
    _, lines = run_cli(ptogym_cli, capsys, "run", "fake_add", "--quick")
    assert [progress(line) for line in lines if line.startswith("[")] == [
        "[1/1] fake_add level0 on fake ... (elapsed Xs)", "[PRECISION_PASS]"]
    _, lines = run_cli(ptogym_cli, capsys, "run", "fake_add", "level1", "level0")
    assert [progress(line) for line in lines if line.startswith("[")][:2] == [
        "[1/2] fake_add level1 on fake ... (elapsed Xs)", "[2/2] fake_add level0 on fake ... (elapsed Xs)"]


def test_quick_with_no_quick_case_is_a_run_error(install_op):
    install_op(correct_run)
    result = run_cases("fake_add", levels=["level1"], quick=True)
    assert result.exit_code == 2 and "no case selected" in result.error


def test_list_cases(install_op, ptogym_cli, capsys):
    install_op(correct_run)
    exit_code, lines = run_cli(ptogym_cli, capsys, "run", "fake_add", "--list")
    assert exit_code == 0
    assert [line.split()[:2] for line in lines[:-1]] == [["level0", "quick"], ["level1", "-"]]
    assert lines[-1] == "[OK]"
    assert lines[0].endswith("level0 case")


def test_list_operators(install_op, ptogym_cli, capsys):
    install_op(correct_run)
    install_op(correct_run, name="fake_mul", description="fake_mul: product")
    exit_code, lines = run_cli(ptogym_cli, capsys, "list")
    assert exit_code == 0
    assert [line.split(None, 1) for line in lines] == [["fake_add", "fake_add: elementwise add, scaled"],
                                                       ["fake_mul", "fake_mul: product"], ["[OK]"]]


def test_list_operators_reports_one_that_cannot_load(install_op, ptogym_cli, capsys, monkeypatch):
    install_op(correct_run)
    monkeypatch.setattr(ops, "OP_NAMES", ("fake_add", "ghost"))
    exit_code, lines = run_cli(ptogym_cli, capsys, "list")
    assert exit_code == 2
    assert lines[1].split(None, 1) == ["ghost", "(cannot load: KeyError: unknown operator 'ghost'; known: fake_add)"]
    assert lines[-1] == "[RUN_ERROR]"


def test_all_runs_quick_cases_of_every_operator(install_op, ptogym_cli, capsys):
    install_op(correct_run)
    install_op(off_by_half_run, name="fake_sub")
    exit_code, lines = run_cli(ptogym_cli, capsys, "run", "--all")
    assert exit_code == 1
    assert lines[-3:] == ["fake_add [fake]: 1 passed, 0 failed, 0 errors",
                          "fake_sub [fake]: 0 passed, 1 failed, 0 errors (level0)", "[PRECISION_FAIL]"]


def test_all_without_operators_is_a_run_error(install_op, ptogym_cli, capsys):
    exit_code, lines = run_cli(ptogym_cli, capsys, "run", "--all")
    assert exit_code == 2 and lines == ["no operator registered", "[RUN_ERROR]"]


# ------------------------------------------------------------------ JSON and Python API
def test_json_result_file(install_op, ptogym_cli, capsys, tmp_path):
    def infinite_run(inputs, attrs, backend):
        outputs, report = correct_run(inputs, attrs, backend)
        outputs["out"][0, 0] = float("inf")
        return outputs, report

    install_op(infinite_run)
    path = tmp_path / "result.json"
    assert run_cli(ptogym_cli, capsys, "run", "fake_add", "level0", "--json", str(path))[0] == 1

    def reject(constant):
        raise AssertionError(f"non-standard JSON constant {constant}")

    document = json.loads(path.read_text(), parse_constant=reject)
    assert (document["verdict"], document["exit_code"]) == ("PRECISION_FAIL", 1)
    [run] = document["runs"]
    assert (run["op"], run["backend"], run["verdict"]) == ("fake_add", "fake", "PRECISION_FAIL")
    [case] = run["cases"]
    assert (case["id"], case["status"], case["inputs"]) == ("level0", "FAIL", "a:float32[4,8] b:float32[4,8]")
    assert case["outputs"]["out"]["max_diff"] == "inf"
    assert case["outputs"]["out"]["outliers"][0]["index"] == [0, 0]
    assert set(case["timings_s"]) == {"make_inputs", "golden", "tolerances", "run", "compare"}
    assert case["launch"]["backend"] == "fake" and case["launch"]["outputs_valid"] is True
    assert case["tolerances"] == {"out": {"rtol": 0.001, "atol": 0.001, "max_error_ratio": 0.0, "int_tolerance": 0,
                                          "reason": "the level's default bounds (no entry for this output)",
                                          "source": "level default"}}


# ------------------------------------------------------------------ per-output tolerances
def pair_golden(inputs, attrs):
    return {"loose": inputs["a"].clone(), "strict": inputs["a"] * 2}


def pair_run_off_by(error):
    def run(inputs, attrs, backend):
        return launched({"loose": inputs["a"] + error, "strict": inputs["a"] * 2 + error}, backend)
    return run


def pair_cases(**level_changes):
    tensor = {"shape": [4, 8], "dtype": "float32"}
    case = {"id": "level0", "description": "two outputs", "seed": 3, "inputs": {"a": tensor, "b": tensor},
            **level_changes}
    return {"op": "fake_pair", "required_levels": ["level0"], "levels": [case], "tolerances": {
        "loose": {"atol": 0.1, "reason": "summed in another order"},
        "strict": {"atol": 0.01, "reason": "one rounding"}}}


def test_each_output_is_judged_by_its_own_tolerance(install_op, ptogym_cli, capsys, tmp_path):
    """An error of 0.05 passes 'loose' (atol 0.1) and fails 'strict' (atol 0.01); the
    report says which bound and reason applied to each output, in text and JSON."""
    install_op(pair_run_off_by(0.05), name="fake_pair", cases=pair_cases(), golden=pair_golden,
               output_names=("loose", "strict"))
    path = tmp_path / "result.json"
    exit_code, lines = run_cli(ptogym_cli, capsys, "run", "fake_pair", "--json", str(path))
    assert exit_code == 1 and lines[-1] == "[PRECISION_FAIL]"
    assert "  loose: within atol=0.1 [tolerances.loose]: summed in another order" in lines
    assert "  strict: OUT OF atol=0.01 [tolerances.strict]: one rounding" in lines
    assert "strict: FAIL (rtol=0 atol=0.01)" in "\n".join(lines) and "loose: FAIL" not in "\n".join(lines)
    [case] = json.loads(path.read_text())["runs"][0]["cases"]
    assert case["tolerances"]["strict"] == {"rtol": 0.0, "atol": 0.01, "max_error_ratio": 0.0, "int_tolerance": 0,
                                            "reason": "one rounding", "source": "tolerances.strict"}
    assert (case["outputs"]["loose"]["all_close"], case["outputs"]["strict"]["all_close"]) == (True, False)


def test_a_level_entry_replaces_the_file_entry_for_that_level(install_op):
    override = {"strict": {"atol": 0.1, "reason": "this level sums in another order too"}}
    install_op(pair_run_off_by(0.05), name="fake_pair", cases=pair_cases(tolerances=override), golden=pair_golden)
    [case] = run_cases("fake_pair", backend=FakeBackend()).cases
    assert case.status == PASS
    assert case.tolerances["strict"].source == "level0.tolerances.strict"
    assert case.outputs["strict"].atol == 0.1


@pytest.mark.parametrize("tolerances, reason", [
    ({"loose": {"atol": 0.1, "reason": "r"}},
     "field 'tolerances': output 'strict' has no tolerance; add tolerances.strict with a reason"),
    ({"loose": {"atol": 0.1, "reason": "r"}, "strict": {"atol": 0.1, "reason": "r"}, "extra": {"reason": "r"}},
     "field 'tolerances': no output named 'extra'; the golden returns loose, strict"),
])
def test_undeclared_outputs_are_checked_against_the_golden_at_run_time(install_op, tolerances, reason):
    """Without SPEC.output_names the case file cannot check the names; the runner does."""
    cases = {**pair_cases(), "tolerances": tolerances}
    install_op(pair_run_off_by(0.0), name="fake_pair", cases=cases, golden=pair_golden)
    [case] = run_cases("fake_pair", backend=FakeBackend()).cases
    assert case.status == ERROR and case.reason.startswith("tolerances raised ValueError: ")
    assert "cases.json: case 'level0': " + reason in case.reason


def test_run_cases_api_returns_results_and_prints_nothing(install_op, capsys):
    install_op(correct_run)
    result = run_cases("fake_add", backend=FakeBackend())
    assert capsys.readouterr().out == ""
    assert (result.exit_code, result.marker, result.backend) == (0, "[PRECISION_PASS]", "fake")
    assert [(case.case.id, case.status) for case in result.cases] == [("level0", PASS), ("level1", PASS)]
    assert result.cases[0].outputs["out"].all_close


def test_make_inputs_gets_a_generator_seeded_from_the_case_and_the_backend_device(install_op):
    seen = []

    def recording_inputs(case, generator, device):
        seen.append((generator.initial_seed(), device))
        return make_inputs(case, generator, device)

    install_op(correct_run, make_inputs=recording_inputs)
    assert run_cases("fake_add", backend=FakeBackend()).exit_code == 0
    assert seen == [(3, torch.device("cpu"))] * 2


def test_run_case_is_deterministic(install_op):
    spec = install_op(off_by_half_run)
    case = load_cases(spec.cases_path, spec)[0]
    first, second = (run_case(spec, case, FakeBackend()).outputs["out"] for _ in range(2))
    assert first.to_dict() == second.to_dict()


def test_case_statuses_cover_fail_and_error(install_op):
    install_op(off_by_half_run)
    install_op(raising_run, name="fake_err")
    assert [c.status for c in run_cases("fake_add", backend=FakeBackend()).cases] == [FAIL, FAIL]
    assert [c.status for c in run_cases("fake_err", backend=FakeBackend()).cases] == [ERROR, ERROR]
