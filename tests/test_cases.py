"""Case files: parsing, and one test per kind of error (each names file, case, field)."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import torch

from ptogym import ops
from ptogym.ops import OpSpec
from ptogym.verify import Case, CaseFileError, TensorSpec, load_cases, parse_dtype
from ptogym.verify.cases import LEVEL_DEFAULT, Tolerance

LEVEL = {
    "id": "level0", "description": "small smoke", "seed": 0,
    "inputs": {"x": {"shape": [2, 4, 256], "dtype": "bfloat16"}, "gamma": {"shape": [256], "dtype": "float32"}},
    "attrs": {"eps": 1e-6}, "rtol": 0.01, "atol": 0.01, "max_error_ratio": 0.0, "int_tolerance": 0,
    "tags": ["quick"],
}
MINIMAL_LEVEL = {"id": "level1", "description": "required fields only", "seed": 7,
                 "inputs": {"x": {"shape": [8, 256], "dtype": "bfloat16"},
                            "gamma": {"shape": [256], "dtype": "float32"}},
                 "rtol": 0.02, "atol": 0}
DOCUMENT = {"op": "fake_norm", "required_levels": ["level0", "level1"], "levels": [LEVEL, MINIMAL_LEVEL]}


def last_dim_is_256(case: Case) -> list[str]:
    return [f"{name}: last dimension must be 256" for name, spec in case.inputs.items() if spec.shape[-1:] != (256,)]


def make_spec(case_file: Path, **overrides) -> OpSpec:
    fields = dict(name="fake_norm", description="fake", make_inputs=None, golden=None, run=None,
                  check_case=last_dim_is_256, hbm_bytes=None, input_names=("x", "gamma"), cases_file=case_file)
    return OpSpec(**{**fields, **overrides})


def write(tmp_path: Path, document, name: str = "cases.json") -> Path:
    path = tmp_path / name
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return path


def errors_of(path: Path, spec=None) -> list[str]:
    with pytest.raises(CaseFileError) as raised:
        load_cases(path, spec)
    assert str(raised.value) == "\n".join(raised.value.errors)
    return raised.value.errors


def with_level(**changes) -> dict:
    """DOCUMENT with level0 changed; a value of ... deletes the field."""
    document = copy.deepcopy(DOCUMENT)
    level = document["levels"][0]
    for name, value in changes.items():
        if value is ...:
            del level[name]
        else:
            level[name] = value
    return document


# ------------------------------------------------------------------ valid files
def test_valid_file_loads_into_cases(tmp_path):
    path = write(tmp_path, DOCUMENT)
    level0, level1 = load_cases(path, make_spec(path))
    assert level0 == Case(op="fake_norm", id="level0", description="small smoke", seed=0,
                          inputs={"x": TensorSpec((2, 4, 256), torch.bfloat16),
                                  "gamma": TensorSpec((256,), torch.float32)},
                          rtol=0.01, atol=0.01, attrs={"eps": 1e-6}, max_error_ratio=0.0, int_tolerance=0,
                          tags=("quick",), path=path)
    assert level0.is_quick and not level0.is_slow
    assert (level1.attrs, level1.tags, level1.max_error_ratio, level1.int_tolerance) == ({}, (), 0.0, 0)
    assert not level1.is_quick
    assert level0.shape_summary == "x:bfloat16[2,4,256] gamma:float32[256]"


def test_slow_tag():
    case = Case(op="o", id="l", description="d", seed=0, inputs={}, rtol=0, atol=0, tags=("slow",))
    assert case.is_slow and not case.is_quick


def test_load_by_operator_name_uses_the_registry(tmp_path, monkeypatch):
    spec = make_spec(write(tmp_path, DOCUMENT))
    monkeypatch.setattr(ops, "get_op", {"fake_norm": spec}.__getitem__)
    assert [case.id for case in load_cases("fake_norm")] == ["level0", "level1"]


@pytest.mark.parametrize("name, dtype", [("bfloat16", torch.bfloat16), ("float16", torch.float16),
                                         ("int8", torch.int8), ("int64", torch.int64), ("bool", torch.bool)])
def test_parse_dtype_accepts_torch_names(name, dtype):
    assert parse_dtype(name) is dtype


@pytest.mark.parametrize("name", ["bf16", "Tensor", "torch.float32", 3])
def test_parse_dtype_rejects_other_names(name):
    with pytest.raises(ValueError, match="unknown dtype"):
        parse_dtype(name)


# ------------------------------------------------------------------ file-level errors
def test_missing_file(tmp_path):
    assert errors_of(tmp_path / "nope.json") == [f"{tmp_path / 'nope.json'}: case file not found"]


def test_invalid_json_names_the_line(tmp_path):
    path = write(tmp_path, '{"op": "x",\n "levels": [,]}')
    [error] = errors_of(path)
    assert error.startswith(f"{path}: line 2: invalid JSON")


def test_unknown_and_missing_top_level_fields(tmp_path):
    path = write(tmp_path, {"op": "fake_norm", "level": []})
    assert errors_of(path) == [
        f"{path}: field 'levels': missing",
        f"{path}: field 'level': unknown field; allowed: op, levels, required_levels, tolerances",
    ]


def test_file_for_another_operator(tmp_path):
    path = write(tmp_path, {**DOCUMENT, "op": "other_op"})
    assert errors_of(path, make_spec(path)) == [
        f"{path}: field 'op': file is for 'other_op', expected 'fake_norm'"]


def test_missing_required_level_from_file_and_from_spec(tmp_path):
    path = write(tmp_path, {**DOCUMENT, "required_levels": ["level0", "level1", "level2"]})
    assert errors_of(path) == [f"{path}: case 'level2': field 'levels': required level is missing"]
    spec = make_spec(path, required_levels=("level3",))
    assert errors_of(path, spec) == [f"{path}: case 'level2': field 'levels': required level is missing",
                                     f"{path}: case 'level3': field 'levels': required level is missing"]


# ------------------------------------------------------------------ level errors
@pytest.mark.parametrize("changes, field, fragment", [
    ({"seed": ...}, "seed", "missing"),
    ({"inputs": ...}, "inputs", "missing"),
    ({"shapes": [1]}, "shapes", "unknown field"),
    ({"seed": -1}, "seed", "must be >= 0"),
    ({"seed": 1.5}, "seed", "must be an integer"),
    ({"seed": True}, "seed", "must be an integer"),
    ({"rtol": "0.01"}, "rtol", "must be a finite number"),
    ({"atol": -0.1}, "atol", "must be in [0, inf]"),
    ({"max_error_ratio": 2}, "max_error_ratio", "must be in [0, 1.0]"),
    ({"int_tolerance": 0.5}, "int_tolerance", "must be an integer"),
    ({"tags": "quick"}, "tags", "must be a list of strings"),
    ({"attrs": [1]}, "attrs", "must be a JSON object"),
    ({"description": ""}, "description", "must be a non-empty string"),
    ({"inputs": {}}, "inputs", "must be a non-empty JSON object"),
])
def test_level_field_errors_name_file_case_and_field(tmp_path, changes, field, fragment):
    path = write(tmp_path, with_level(**changes))
    [error] = errors_of(path)
    assert error.startswith(f"{path}: case 'level0': field '{field}': ")
    assert fragment in error


@pytest.mark.parametrize("tensor, field, fragment", [
    ({"shape": [2, 256], "dtype": "bf16"}, "inputs.x.dtype", "unknown dtype 'bf16'"),
    ({"shape": [2, -1], "dtype": "bfloat16"}, "inputs.x.shape", "non-negative integers"),
    ({"shape": [2.0, 256], "dtype": "bfloat16"}, "inputs.x.shape", "non-negative integers"),
    ({"shape": 256, "dtype": "bfloat16"}, "inputs.x.shape", "non-negative integers"),
    ({"shape": [256]}, "inputs.x.dtype", "missing"),
    ({"shape": [256], "dtype": "bfloat16", "layout": "nd"}, "inputs.x.layout", "unknown field"),
    ([256], "inputs.x", "must be {"),
])
def test_tensor_spec_errors(tmp_path, tensor, field, fragment):
    path = write(tmp_path, with_level(inputs={**LEVEL["inputs"], "x": tensor}))
    [error] = errors_of(path)
    assert error.startswith(f"{path}: case 'level0': field '{field}': ")
    assert fragment in error


def test_level_without_a_usable_id_is_named_by_position(tmp_path):
    path = write(tmp_path, with_level(id=...))
    errors = errors_of(path)
    assert f"{path}: case 'levels[0]': field 'id': missing" in errors


def test_duplicate_id(tmp_path):
    document = copy.deepcopy(DOCUMENT)
    document["levels"].append(copy.deepcopy(LEVEL))
    path = write(tmp_path, document)
    assert errors_of(path) == [f"{path}: case 'level0': field 'id': duplicate id (levels[0] and levels[2])"]


def test_operator_constraints_and_input_names_come_from_the_spec(tmp_path):
    path = write(tmp_path, with_level(inputs={"x": {"shape": [2, 4, 100], "dtype": "bfloat16"},
                                              "beta": {"shape": [256], "dtype": "float32"}}))
    assert load_cases(path)  # without a spec only the format is checked
    assert errors_of(path, make_spec(path)) == [
        f"{path}: case 'level0': field 'inputs': names ['beta', 'x'] differ from the operator's ['gamma', 'x']",
    ]
    path = write(tmp_path, with_level(inputs={"x": {"shape": [2, 4, 100], "dtype": "bfloat16"},
                                              "gamma": {"shape": [100], "dtype": "float32"}}))
    assert errors_of(path, make_spec(path)) == [
        f"{path}: case 'level0': field 'inputs': violates the operator's constraints: x: last dimension must be 256",
        f"{path}: case 'level0': field 'inputs': violates the operator's constraints: gamma: last dimension must be 256",
    ]


def test_all_errors_are_reported_at_once(tmp_path):
    document = with_level(seed=-1, rtol=...)
    document["levels"][1]["tags"] = "slow"
    document["extra"] = 1
    path = write(tmp_path, document)
    errors = errors_of(path)
    assert len(errors) == 4
    assert any("case 'level0': field 'seed'" in e for e in errors)
    assert any("case 'level0': field 'rtol': missing" in e for e in errors)
    assert any("case 'level1': field 'tags'" in e for e in errors)
    assert any("field 'extra': unknown field" in e for e in errors)


# ------------------------------------------------------------------ per-output tolerances
Y_TOLERANCE = {"rtol": 0.0078125, "atol": 1e-3, "max_error_ratio": 0.005, "reason": "bf16 y: one ulp"}
RSTD_TOLERANCE = {"rtol": 1e-6, "atol": 0, "reason": "fp32 rstd: summation order"}


def per_output_document(**level_changes) -> dict:
    """DOCUMENT with per-output tolerances in place of level0's default bounds."""
    defaults = dict.fromkeys(("rtol", "atol", "max_error_ratio", "int_tolerance"), ...)
    document = with_level(**{**defaults, **level_changes})
    document["tolerances"] = {"y": dict(Y_TOLERANCE), "rstd": dict(RSTD_TOLERANCE)}
    return document


def test_per_output_tolerances_resolve_level_entry_then_file_entry_then_level_default(tmp_path):
    document = per_output_document(tolerances={"rstd": {"rtol": 1e-5, "reason": "fp16 input"}})
    path = write(tmp_path, document)
    level0, level1 = load_cases(path, make_spec(path, output_names=("y", "rstd")))
    assert level0.rtol is None and level0.atol is None and not level0.has_default
    assert level0.tolerance("y") == Tolerance(0.0078125, 1e-3, 0.005, 0, "bf16 y: one ulp", "tolerances.y")
    assert level0.tolerance("rstd") == Tolerance(1e-5, 0.0, 0.0, 0, "fp16 input", "level0.tolerances.rstd")
    assert level1.tolerance("rstd").source == "tolerances.rstd"  # the override is level0's only
    del document["tolerances"]["rstd"]
    path = write(tmp_path, document)
    level1 = load_cases(path, make_spec(path, output_names=("y", "rstd")))[1]
    assert level1.tolerance("rstd") == Tolerance(0.02, 0.0, 0.0, 0, level1.tolerance("rstd").reason, LEVEL_DEFAULT)
    assert level1.tolerance("rstd").bounds() == {"rtol": 0.02, "atol": 0.0, "max_error_ratio": 0.0,
                                                 "int_tolerance": 0}


def test_an_output_without_entry_or_default_is_named(tmp_path):
    case = Case(op="o", id="l", description="d", seed=0, inputs={}, path=Path("c.json"),
                tolerances={"y": Tolerance(0.01, 0.01, reason="r", source="tolerances.y")})
    with pytest.raises(KeyError, match=r"c.json: case 'l': field 'tolerances': output 'rstd' has no tolerance"):
        case.tolerance("rstd")


def test_stage_and_bisect_hold_tensors_to_the_loosest_output_bound():
    case = Case(op="o", id="l", description="d", seed=0, inputs={}, tolerances={
        "y": Tolerance(0.01, 1e-3, 0.005, 0, "r", "tolerances.y"), "q": Tolerance(0, 0, 0, 1, "r", "tolerances.q")})
    loose = case.boundary_tolerance()
    assert loose.bounds() == {"rtol": 0.01, "atol": 1e-3, "max_error_ratio": 0.005, "int_tolerance": 1}
    assert loose.source == "loosest output tolerance"
    with_default = Case(op="o", id="l", description="d", seed=0, inputs={}, rtol=0.1, atol=0.2,
                        tolerances=case.tolerances)
    assert with_default.boundary_tolerance().bounds()["atol"] == 0.2


@pytest.mark.parametrize("where, entry, field, fragment", [
    ("file", {"y": {"rtol": 0.01, "atol": 0.01}}, "tolerances.y.reason", "missing"),
    ("file", {"y": {**Y_TOLERANCE, "reason": ""}}, "tolerances.y.reason", "must be a non-empty string"),
    ("file", {"y": {**Y_TOLERANCE, "rel": 0.1}}, "tolerances.y.rel", "unknown field; allowed: rtol, atol"),
    ("file", {"y": {**Y_TOLERANCE, "rtol": "1e-3"}}, "tolerances.y.rtol", "must be a finite number"),
    ("file", {"y": {**Y_TOLERANCE, "max_error_ratio": 2}}, "tolerances.y.max_error_ratio", "must be in [0, 1.0]"),
    ("file", {"y": {**Y_TOLERANCE, "int_tolerance": -1}}, "tolerances.y.int_tolerance", "must be >= 0"),
    ("file", {"z": Y_TOLERANCE}, "tolerances.z", "fake_norm has no output 'z'; its outputs: y, rstd"),
    ("file", {"y": 0.01}, "tolerances.y", "must be a JSON object"),
    ("file", [Y_TOLERANCE], "tolerances", "must be a JSON object"),
    ("level", {"y": {"rtol": 0.01}}, "tolerances.y.reason", "missing"),
    ("level", {"x_int8": Y_TOLERANCE}, "tolerances.x_int8", "fake_norm has no output 'x_int8'"),
])
def test_tolerance_errors_name_file_case_and_field(tmp_path, where, entry, field, fragment):
    document = per_output_document()
    if where == "file":
        document["tolerances"] = {**document["tolerances"], **entry} if isinstance(entry, dict) else entry
    else:
        document["levels"][0]["tolerances"] = entry
    path = write(tmp_path, document)
    errors = errors_of(path, make_spec(path, output_names=("y", "rstd")))
    case = "" if where == "file" else "case 'level0': "
    assert any(e.startswith(f"{path}: {case}field '{field}': ") and fragment in e for e in errors), errors
    if isinstance(entry, dict):  # a bad entry still covers its output: one problem, one error
        assert len(errors) == 1, errors


def test_levels_need_a_default_for_outputs_without_an_entry(tmp_path):
    document = per_output_document()
    del document["tolerances"]["rstd"]
    path = write(tmp_path, document)
    assert errors_of(path, make_spec(path, output_names=("y", "rstd"))) == [
        f"{path}: case 'level0': field 'tolerances': output(s) rstd have no tolerance: add tolerances.<output> "
        "with a reason, or the level's rtol and atol"]
    assert load_cases(path, make_spec(path))  # output_names not declared: the runner checks at run time


@pytest.mark.parametrize("changes, field, fragment", [
    ({"atol": 0.01}, "rtol", "missing (atol and rtol give the level's default bounds together)"),
    ({"int_tolerance": 1}, "int_tolerance", "only with the level's rtol and atol (a default for outputs without "
                                            "an entry); put it in tolerances.<output> instead"),
])
def test_default_bounds_come_together(tmp_path, changes, field, fragment):
    path = write(tmp_path, per_output_document(**changes))
    assert errors_of(path, make_spec(path, output_names=("y", "rstd"))) == [
        f"{path}: case 'level0': field '{field}': {fragment}"]


def test_every_shipped_operator_states_each_output_tolerance_with_a_reason():
    """No shipped level falls back to a level default: each output has its own entry."""
    for name in ops.OP_NAMES:
        spec = ops.get_op(name)
        assert spec.output_names, f"{name}: SPEC.output_names is not declared"
        for case in load_cases(spec.cases_path, spec):
            for output in spec.output_names:
                tolerance = case.tolerance(output)
                assert tolerance.source != LEVEL_DEFAULT and tolerance.reason, (name, case.id, output)


# ------------------------------------------------------------------ issue 9 regressions
def test_unknown_attribute_is_an_error_when_the_operator_declares_its_attributes(tmp_path):
    path = write(tmp_path, with_level(attrs={"epsilon": 1e-6}))
    assert errors_of(path, make_spec(path, attr_names=("eps",))) == [
        f"{path}: case 'level0': field 'attrs.epsilon': unknown attribute of fake_norm; allowed: eps"]
    assert load_cases(path, make_spec(path))  # attr_names=None: not declared, not checked


@pytest.mark.parametrize("seed, ok", [(2**64 - 1, True), (2**64, False), (-1, False)])
def test_seed_must_fit_torch_generators(tmp_path, seed, ok):
    path = write(tmp_path, with_level(seed=seed))
    if ok:
        assert load_cases(path)[0].seed == seed
        torch.Generator().manual_seed(seed)  # the range is torch's own
    else:
        [error] = errors_of(path)
        assert error.startswith(f"{path}: case 'level0': field 'seed': must be")


def test_cases_above_the_byte_budget_are_errors(tmp_path, monkeypatch):
    """Issue 9: a [290000, 7168] case passed validation and allocated 8 GB per input."""
    monkeypatch.setenv("PTOGYM_CASE_MAX_BYTES", str(3 * 10**9))
    path = write(tmp_path, with_level(inputs={"x": {"shape": [290000, 7168], "dtype": "bfloat16"},
                                              "gamma": {"shape": [7168], "dtype": "bfloat16"}}))
    [error] = errors_of(path)
    assert error.startswith(f"{path}: case 'level0': field 'inputs': 4.16 GB of inputs exceed the 3.00 GB budget")
    assert "PTOGYM_CASE_MAX_BYTES" in error
    monkeypatch.setenv("PTOGYM_CASE_MAX_BYTES", str(5 * 10**9))
    assert load_cases(path)
    monkeypatch.setenv("PTOGYM_CASE_MAX_BYTES", "lots")
    assert errors_of(path) == ["PTOGYM_CASE_MAX_BYTES: must be a whole number of bytes, got 'lots'"]


def test_default_budget_is_an_eighth_of_physical_memory_and_fits_every_shipped_case(monkeypatch):
    import os

    from ptogym.verify.cases import max_case_bytes

    monkeypatch.delenv("PTOGYM_CASE_MAX_BYTES", raising=False)
    assert max_case_bytes() == os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 8
    monkeypatch.setenv("PTOGYM_CASE_MAX_BYTES", str(16 * 1024**3 // 8))  # a 16 GB laptop
    for name in ops.OP_NAMES:
        assert load_cases(name)


@pytest.mark.parametrize("content, message", [
    (b'{"op": "\xff\xfe"}', "byte 8: not UTF-8 (invalid start byte)"),
    (b"[" * 100000 + b"]" * 100000, "JSON nested too deeply to read"),
], ids=["invalid-utf8", "deep-nesting"])
def test_unreadable_files_are_named(tmp_path, content, message):
    path = tmp_path / "cases.json"
    path.write_bytes(content)
    assert errors_of(path) == [f"{path}: {message}"]


def test_a_crashing_operator_check_is_reported_not_raised(tmp_path):
    path = write(tmp_path, DOCUMENT)
    errors = errors_of(path, make_spec(path, check_case=lambda case: 1 / 0))
    assert errors[0] == (f"{path}: case 'level0': field 'inputs': violates the operator's constraints: "
                         "check_case raised ZeroDivisionError: division by zero")
