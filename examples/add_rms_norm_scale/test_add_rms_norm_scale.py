"""add_rms_norm_scale's quick cases against its golden on the interpreter (scaffolded by `ptogym new`)."""
from pathlib import Path

import pytest

from ptogym.verify.runner import open_backend, run_case
from ptogym.workflow.package import resolve

PACKAGE = resolve(str(Path(__file__).parent))


@pytest.mark.parametrize("level", ["level0", "level1"])
def test_case_matches_golden(level):
    result = run_case(PACKAGE.spec, PACKAGE.case(level), open_backend("interp"))
    assert result.status == "PASS", result.report()
