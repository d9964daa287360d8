"""The API-completion ops against real pypto 0.2.0, without running it.

Every case of ``api_op_cases`` was run through real pypto (pypto-sim backend: its
compiler and its own interpreter) by ``scripts/record_api_fixtures.py``; the
fixture holds, per case, its inputs and either pypto's outputs, or that pypto
rejected the kernel, or that pypto accepted it but its cost model has no timing
for the op (then no numbers come out, and the interpreter is checked against an
independent torch reference written from pypto's documented formula instead).

Outputs must be bitwise equal, except the reductions listed in ``REDUCTION_ULPS``
(pypto sums in another order: at most two ulps of the result apart).
"""
import importlib.util
import math
import sys
from pathlib import Path

import pytest
import torch

import ptogym.interp as pypto
from api_op_cases import CASES, builder
from interp_helpers import assert_same

FIXTURE = Path(__file__).parent / "fixtures" / "api_ops.pt"
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
RECORDED = torch.load(FIXTURE)
REDUCTION_ULPS = {"var_fp32": 2, "var_fp32_keepdim": 2, "methods_fp32": 2}
REJECTIONS = (pypto.ConstraintViolation, RuntimeError, ValueError, TypeError, NotImplementedError)


def _run(case, inputs):
    outputs = case.empty_outputs()
    builder(case)(pypto)(*[t.clone() for t in inputs], *outputs)
    return outputs


def _triangle(a, keep):
    row, col = torch.meshgrid(torch.arange(a.shape[0]), torch.arange(a.shape[1]), indexing="ij")
    return torch.where(keep(row, col), a, torch.zeros_like(a))


# torch references for the ops pypto accepts but cannot time (so produced no numbers)
REFERENCES = {
    "bitwise_and_int32": lambda a, b: torch.bitwise_and(a, b),
    "bitwise_and_int16_scalar": lambda a: torch.bitwise_and(a, 6),
    "bitwise_and_int8": lambda a, b: torch.bitwise_and(a, b),
    "bitwise_or_int32": lambda a, b: torch.bitwise_or(a, b),
    "bitwise_or_int16_scalar": lambda a: torch.bitwise_or(a, 6),
    "bitwise_xor_int32": lambda a, b: torch.bitwise_xor(a, b),
    "bitwise_xor_int16_scalar": lambda a: torch.bitwise_xor(a, 6),
    "bitwise_left_shift_int16": lambda a, b: torch.bitwise_left_shift(a, b),
    "bitwise_right_shift_int16_scalar": lambda a: torch.bitwise_right_shift(a, 2),
    "hypot_fp32": lambda a, b: torch.sqrt(a.double() ** 2 + b.double() ** 2).float(),
    "copysign_fp32": lambda a, b: torch.where(torch.signbit(b), -a.abs(), a.abs()),
    "cbrt_fp32": lambda a: torch.where(torch.signbit(a), -1.0, 1.0) * torch.pow(a.abs(), 1.0 / 3.0),
    "gcd_int32": lambda a, b: torch.tensor([math.gcd(int(x), int(y)) for x, y in zip(a.flatten(), b.flatten())],
                                           dtype=a.dtype).reshape(a.shape),
    "lrelu_fp32": lambda a: torch.where(a > 0, a, a * 0.2),
    "prelu_fp32": lambda a, w: torch.clamp(a, min=0) + w * torch.clamp(a, max=0),
    "expand_exp_dif_fp32": lambda a, b: torch.exp(a - b),
    "expand_exp_dif_row": lambda a, b: torch.exp(a - b),
    "tril_fp32": lambda a: _triangle(a, lambda row, col: col <= row),
    "tril_fp32_diag": lambda a: _triangle(a, lambda row, col: col <= row - 3),
    "triu_fp32_diag": lambda a: _triangle(a, lambda row, col: col >= row + 2),
    "tril_int32": lambda a: _triangle(a, lambda row, col: col <= row + 1),
    "gathermask_fp32": lambda a: a[:, 0::2],
}
# gcd of torch agrees with math.gcd; hypot/cbrt are held to 1 ulp of the fp64 formula
REFERENCE_ULPS = {"hypot_fp32": 1, "cbrt_fp32": 2}


def _kind(name):
    entry = RECORDED[name]
    return "outputs" if "outputs" in entry else entry["stage"]


def test_every_case_is_recorded_from_the_current_source():
    assert set(RECORDED) == set(CASES), "re-run scripts/record_api_fixtures.py"
    stale = [n for n, case in CASES.items() if RECORDED[n]["code"] != case.code]
    assert not stale, f"cases changed since recording: {stale}"
    assert {n for n in CASES if _kind(n) == "cost-model"} == set(REFERENCES)


def _assert_within_ulps(got, ref, ulps):
    gap = (got.double() - ref.double()).abs()
    spacing = torch.nextafter(ref.abs(), torch.full_like(ref, math.inf)) - ref.abs()
    assert bool((gap <= ulps * spacing.double()).all()), f"max gap {gap.max().item()}"


@pytest.mark.parametrize("name", [n for n in CASES if _kind(n) == "outputs"])
def test_matches_real_pypto(name):
    entry = RECORDED[name]
    got = _run(CASES[name], entry["inputs"])
    for out, ref in zip(got, entry["outputs"]):
        if name in REDUCTION_ULPS:
            _assert_within_ulps(out, ref, REDUCTION_ULPS[name])
        else:
            assert_same(out, ref)


@pytest.mark.parametrize("name", [n for n in CASES if _kind(n) == "rejected"])
def test_rejects_what_real_pypto_rejects(name):
    with pytest.raises(REJECTIONS):
        _run(CASES[name], RECORDED[name]["inputs"])


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_accepted_but_untimed_ops_match_their_formula(name):
    inputs = RECORDED[name]["inputs"]
    got, = _run(CASES[name], inputs)
    ref = REFERENCES[name](*inputs).to(got.dtype)
    if name in REFERENCE_ULPS:
        _assert_within_ulps(got, ref, REFERENCE_ULPS[name])
    else:
        assert_same(got, ref)


def test_rejection_names_the_rule_and_the_kernel_line():
    with pytest.raises(pypto.ConstraintViolation) as caught:
        _run(CASES["pad_value_one"], RECORDED["pad_value_one"]["inputs"])
    assert caught.value.check_id == "C-API-06" and "0, inf or -inf" in caught.value.details
    assert caught.value.location.endswith("api_case_pad_value_one.py:5")


# a small live sample: real pypto still produces what the fixture holds
@pytest.mark.pypto
@pytest.mark.skipif(importlib.util.find_spec("pypto") is None, reason="the real pypto package is not installed")
@pytest.mark.parametrize("name", ["cumsum_fp32_dim1", "topk_fp32", "scalar_div_s_reverse_fp32", "pad_value_one"])
def test_fixture_is_what_real_pypto_does_now(name):
    import record_api_fixtures

    live = record_api_fixtures.record(CASES[name])
    if "outputs" in RECORDED[name]:
        for now, recorded in zip(live["outputs"], RECORDED[name]["outputs"]):
            assert_same(now, recorded)
    else:
        assert live.get("stage") == RECORDED[name]["stage"]
