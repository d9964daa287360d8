"""``ptogym.interp`` against real pypto 0.2.0 on the differential corpus.

The default run compares the interpreter with real pypto's recorded outcomes
(fixtures/, written by scripts/record_conformance.py): the same accept/reject
verdict and bitwise-equal outputs (or the documented bound).  The ``pypto``-marked
tests run a few kernels through real pypto live.  The property tests check the
interpreter on random kernels: every outcome is a result or a named check, and a
row-independent chain gives the same bits whole or in row blocks.
"""
import importlib.util

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ptogym.backends import get_backend

from . import harness
from .cases import all_cases
from .corpus import BOUNDS, KNOWN
from .generator import DrawnChoices, random_area_spec, random_spec

CASES = all_cases()
HAVE_PYPTO = importlib.util.find_spec("pypto") is not None


def _param(name: str):
    if name in KNOWN:
        return pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=KNOWN[name]))
    return name


@pytest.fixture(scope="module")
def interp():
    return get_backend("interp")


@pytest.mark.parametrize("name", [_param(n) for n in CASES])
def test_interp_agrees_with_recorded_pypto(name, interp):
    spec = CASES[name]
    fixture = harness.load_fixture(name)
    assert fixture is not None, f"no fixture for {name}: run scripts/record_conformance.py --only {name}"
    assert fixture["spec"] == spec and fixture["inputs_sha1"] == harness.inputs_digest(spec), (
        f"fixture of {name} is stale: run scripts/record_conformance.py --only {name}")
    recorded = harness.Outcome.from_json(fixture["pypto"])
    difference = harness.compare(harness.run(interp, spec), recorded, BOUNDS.get(name))
    assert not difference, f"{name}: {difference}"


def test_fixtures_are_all_cases_and_small():
    names = {p.stem for p in harness.FIXTURES.glob("*.json")}
    assert names == set(CASES), f"orphan fixtures {sorted(names - set(CASES))}, missing {sorted(set(CASES) - names)}"
    assert sum(p.stat().st_size for p in harness.FIXTURES.glob("*.json")) < 10 * 2**20


def test_known_differences_name_real_cases():
    assert set(KNOWN) <= set(CASES) and set(BOUNDS) <= set(CASES)


def test_comparison_is_bitwise_and_nan_aware():
    import torch

    a = torch.tensor([0.0, float("nan"), 1.0])
    assert harness.bitwise_equal(a, torch.tensor([0.0, -float("nan"), 1.0]))
    assert not harness.bitwise_equal(a, torch.tensor([-0.0, float("nan"), 1.0]))
    b = a.clone()
    b[2] = torch.nextafter(b[2], torch.tensor(2.0))  # one ulp
    assert "1 of 3" in harness.compare(harness.Outcome(True, [a]), harness.Outcome(True, [b]))
    assert harness.compare(harness.Outcome(True, [a]), harness.Outcome(True, [b]), {"ulp": 1}) == ""
    b[0] = float("inf")  # non-finite positions must match whatever the bound
    assert harness.compare(harness.Outcome(True, [a]), harness.Outcome(True, [b]), {"ulp": 1e9}) != ""
    assert harness.compare(harness.Outcome(False, error="x"), harness.Outcome(True, [a])).startswith("false positive")
    encoded = harness.encode_tensor(a.to(torch.bfloat16))
    assert harness.bitwise_equal(harness.decode_tensor(encoded), a.to(torch.bfloat16))


def test_record_script_lists_and_summarises(capsys):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
    try:
        import record_conformance
    finally:
        sys.path.pop(0)
    assert record_conformance.main(["--list", "--only", "add_fp32"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "record_conformance: 1 cases, 0 to record"
    assert record_conformance.main(["--only", "no_such_case"]) == 2
    assert record_conformance.main(["--summary", "--only", "cast_fp32_int8_*"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == "record_conformance: 8 cases compared, 0 unexplained differences"  # 7 modes + saturate


# ------------------------------------------------------------------ properties of the interpreter
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.sampled_from([random_spec, random_area_spec]))
def test_random_kernels_give_a_result_or_a_named_check(interp, data, generate):
    spec = generate(DrawnChoices(data))
    outcome = harness.run(interp, spec)  # anything but a ConstraintViolation propagates and fails
    if outcome.accepted:
        assert [tuple(t.shape) for t in outcome.outputs] == [tuple(e["shape"]) for e in spec["outputs"]]
    else:
        assert outcome.error.startswith("[C-")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_row_blocks_do_not_change_the_bits(interp, data):
    """Generated chains are row-independent (elementwise ops, last-axis reductions), so
    running them in row blocks of the tile's height must give the same bits."""
    spec = random_spec(DrawnChoices(data))
    whole = {k: v for k, v in spec.items() if k not in ("loop", "dynamic")}
    whole["inputs"] = [{k: v for k, v in e.items() if k != "tiled"} for e in spec["inputs"]]
    rows = spec["inputs"][0]["shape"][0]
    whole["outputs"] = [{**spec["outputs"][0], "shape": [rows] + spec["outputs"][0]["shape"][1:]}]
    blocked = {**whole, "loop": spec["vec_tile"][0],
               "inputs": [{**e, "tiled": e["shape"][0] == rows} for e in whole["inputs"]]}
    first, second = harness.run(interp, whole), harness.run(interp, blocked)
    if first.accepted and second.accepted:
        assert harness.compare(first, second) == ""


# ------------------------------------------------------------------ live: real pypto, a few kernels
LIVE = ["rmsnorm_loop_dynamic_fp32", "cast_fp32_int8_round", "matmul_b_trans_bf16", "accumulate_column_blocks_bf16",
        "gen_007"]


@pytest.mark.pypto
@pytest.mark.skipif(not HAVE_PYPTO, reason="the real pypto package is not installed")
@pytest.mark.parametrize("name", LIVE)
def test_live_pypto_agrees_with_fixture_and_interp(name, interp):
    from ptogym.backends.pypto_sim import Backend

    spec = CASES[name]
    live = harness.run(Backend(), spec)
    recorded = harness.Outcome.from_json(harness.load_fixture(name)["pypto"])
    assert harness.compare(live, recorded) == "", "real pypto no longer gives the recorded outcome"
    assert harness.compare(harness.run(interp, spec), live, BOUNDS.get(name)) == ""
