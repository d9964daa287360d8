"""Every registered operator's case levels as parametrized tests.

Ids are ``<op>-<case id>`` (``pytest -k inplace_add_rms_norm``); cases tagged "slow"
carry ``pytest.mark.slow``, model shapes also tagged "model" ``pytest.mark.model`` (CI
leaves them out: minutes and GBs each); ``--quick`` keeps the quick-tagged ones.  Every level runs
with warnings as errors, each kernel site's advice shown afresh: the gym's own kernels
raise no advice (A-OUT-01 ...) and no warning at all on the interpreter.  An operator
whose module or case file cannot be loaded yields one failing ``<op>-collect`` test
rather than a collection crash or a silent skip.
"""
from __future__ import annotations

import warnings

import pytest

from ptogym import ops
from ptogym.interp import checks
from ptogym.verify.cases import load_cases
from ptogym.verify.runner import PASS, run_case


def _op_case_params(quick: bool) -> list:
    params = []
    for name in ops.OP_NAMES:
        try:
            spec = ops.get_op(name)
            cases = load_cases(spec.cases_path, spec)
        except Exception as error:  # reported by the test itself, see module docstring
            problem = f"operator {name!r} cannot be collected: {type(error).__name__}: {error}"
            params.append(pytest.param((None, None, problem), id=f"{name}-collect"))
            continue
        params += [
            pytest.param((spec, case, None), id=f"{name}-{case.id}",
                         marks=[pytest.mark.slow] * case.is_slow + [pytest.mark.model] * ("model" in case.tags))
            for case in cases if case.is_quick or not quick
        ]
    return params


def pytest_generate_tests(metafunc):
    if "op_case" in metafunc.fixturenames:
        metafunc.parametrize("op_case", _op_case_params(metafunc.config.getoption("--quick")))


def test_op_case(op_case, ptogym_backend, monkeypatch):
    spec, case, problem = op_case
    if problem:
        pytest.fail(problem, pytrace=False)
    monkeypatch.setattr(checks, "_advised", set())  # advice already shown elsewhere in this process shows again
    with warnings.catch_warnings():
        if ptogym_backend.name == "interp":
            warnings.simplefilter("error")
        else:  # real pypto's own warnings are not the gym's
            warnings.simplefilter("error", checks.ConstraintWarning)
        result = run_case(spec, case, ptogym_backend)
    if result.status != PASS:
        pytest.fail(result.report(verbose=True), pytrace=False)
