"""ptogym lint: every rule fires on its fixture (exactly on the lines marked
``# expect <ID>``) and stays silent on the clean fixtures; noqa, stages, severities,
the CLI contract, and the repository's own kernels."""
from __future__ import annotations

import importlib.util
import json
import re
from collections import Counter
from pathlib import Path

import pytest

from ptogym.lint import RULES, lint_paths
from ptogym.lint.cli import rules_text
from ptogym.lint.pypto_names import known_names, live_names
from ptogym.lint.rules import NOT_CHECKED

FIXTURES = Path(__file__).parent / "fixtures" / "lint"
OPS_DIR = Path(__file__).parents[1] / "ptogym" / "ops"
_EXPECT = re.compile(r"# expect ((?:OL\d\d|NOQA)(?: (?:OL\d\d|NOQA))*)")


def _expected(directory: Path, rule_id: str) -> Counter:
    counts = Counter()
    for path in directory.glob("*.py"):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            match = _EXPECT.search(line)
            if match:
                counts[(path.name, number)] += match[1].split().count(rule_id)
    return +counts


def _lint(*paths, **options):
    return lint_paths([str(p) for p in paths], **options)


@pytest.mark.parametrize("rule_id", sorted([*RULES, "NOQA"]))
def test_rule_fires_exactly_on_marked_lines(rule_id):
    directory = FIXTURES / "fire" / rule_id
    assert directory.is_dir(), f"rule {rule_id} has no firing fixture"
    select = [rule_id, "OL06"] if rule_id == "NOQA" else [rule_id]
    report = _lint(directory, select=select)
    found = Counter((Path(f.path).name, f.line) for f in report.findings if f.rule == rule_id)
    assert found == _expected(directory, rule_id), "\n".join(map(str, report.findings))
    assert found, f"{rule_id} fixture produced no finding"


@pytest.mark.parametrize("rule_id", sorted([*RULES, "NOQA"]))
def test_rule_silent_on_clean_fixtures(rule_id):
    report = _lint(FIXTURES / "clean", select=[rule_id])
    assert report.findings == []
    assert report.exit_code == 0


def test_finding_names_rule_severity_location_and_fix():
    report = _lint(FIXTURES / "fire" / "OL02", select=["OL02"])
    first = report.findings[0]
    assert (first.rule, first.severity, first.line, first.col) == ("OL02", "S1", 5, 9)
    assert str(first).startswith(f"{first.path}:5:9: OL02 [S1] parameter 'out' rebound")
    assert "fix: write `out[:] = value`" in str(first)


def test_stage_awareness_multi_value_unroll_allowed_when_tuning():
    fixture = FIXTURES / "fire" / "OL56"
    assert _lint(fixture, select=["OL56"], stage=5).findings
    assert _lint(fixture, select=["OL56"], stage=7).findings == []


def test_failing_severity_threshold():
    fixture = FIXTURES / "fire" / "OL47"  # S3 only
    assert _lint(fixture, select=["OL47"]).exit_code == 0
    assert _lint(fixture, select=["OL47"], fail_on="S3").exit_code == 1


def test_noqa_with_reason_suppresses_only_its_line(tmp_path):
    kernel = tmp_path / "kernel.py"
    source = (FIXTURES / "fire" / "OL06" / "kernel.py").read_text()
    kernel.write_text(source.replace("# expect OL06", "# ptogym: noqa OL06 a build-time constant"))
    report = _lint(kernel, select=["OL06", "NOQA"])
    assert report.findings == []
    assert report.suppressed[0]["reason"] == "a build-time constant"
    kernel.write_text(source.replace("# expect OL06", "# ptogym: noqa OL02 wrong rule"))
    assert {f.rule for f in _lint(kernel, select=["OL02", "OL06", "NOQA"]).findings} == {"OL06", "NOQA"}


def test_every_rule_is_documented():
    text = rules_text()
    for rule_id in [*RULES, *NOT_CHECKED, "NOQA"]:
        assert re.search(rf"^{rule_id} ", text, re.M), rule_id
    assert not set(RULES) & set(NOT_CHECKED)


def test_recorded_pypto_names_match_the_installed_package():
    if importlib.util.find_spec("pypto") is None:
        pytest.skip("real pypto not installed")
    live = live_names()
    if live["version"] != "0.2.0":
        pytest.skip(f"installed pypto is {live['version']}; the recorded list is of the 0.2.0 specification")
    recorded = json.loads((Path(__file__).parents[1] / "ptogym" / "lint" / "pypto_names.json").read_text())
    assert recorded["top"] == live["top"], "re-run scripts/gen_pypto_names.py"
    names, origin = known_names()
    assert "empty" not in names["top"] and "zeros" in names["top"] and "jit" in names["sub"]["frontend"]


def test_repository_kernels_are_lint_clean():
    """CI gate: every file under ptogym/ops/ is clean, or silenced with a reasoned noqa."""
    report = _lint(OPS_DIR)
    assert report.exit_code == 0, "\n".join(map(str, report.failing()))
    assert all(entry["reason"] for entry in report.suppressed)


# ------------------------------------------------------------------ CLI contract
def _cli(capsys, *argv):
    from ptogym.lint.cli import add_cli
    import argparse

    parser = argparse.ArgumentParser(prog="ptogym")
    add_cli(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["lint", *argv])
    code = args.func(args)
    lines = capsys.readouterr().out.strip().splitlines()
    return code, lines


def test_cli_exit_codes_and_verdict_line(capsys, tmp_path):
    code, lines = _cli(capsys, str(FIXTURES / "clean"))
    assert code == 0 and lines[-1].startswith("[LINT_PASS] 5 file(s)")
    code, lines = _cli(capsys, str(FIXTURES / "fire" / "OL02"), "--select", "ol02", "--json", str(tmp_path / "r.json"))
    assert code == 1 and lines[-1].startswith("[LINT_FAIL]") and len(lines) == 4  # kind, 2 findings, verdict
    assert lines[0] == f"{FIXTURES / 'fire' / 'OL02' / 'kernel.py'}: impl"
    document = json.loads((tmp_path / "r.json").read_text())
    assert document["exit_code"] == 1 and document["findings"][0]["rule"] == "OL02"
    assert document["kinds"] == {str(FIXTURES / "fire" / "OL02" / "kernel.py"): "impl"}
    for argv in ([str(tmp_path / "missing.py")], ["--select", "OL99", str(FIXTURES / "clean")], []):
        code, lines = _cli(capsys, *argv)
        assert code == 2 and lines[-1].startswith("[LINT_ERROR]")
    bad = tmp_path / "kernel.py"
    bad.write_text("def broken(:\n")
    code, lines = _cli(capsys, str(bad))
    assert code == 2 and "SyntaxError" in lines[0]
    code, lines = _cli(capsys, "--rules")
    assert code == 0 and lines[-1].startswith("[LINT_RULES]")


@pytest.mark.skipif(importlib.util.find_spec("pypto") is None, reason="real pypto not installed")
def test_ol57_follows_real_pypto_parser():
    """OL57's basis in pypto 0.2.0's parser: it has no visitor for `while` (a jit kernel
    with one is rejected as unsupported), while `for` is parsed (range, list/tuple or a
    pypto iterator) - which is why the repository's for-over-a-tuple carries a noqa."""
    from ptogym.backends._pypto_runtime import import_pypto

    import_pypto()
    from pypto.frontend.parser.parser import Parser

    assert not hasattr(Parser, "_visit_while") and hasattr(Parser, "_visit_for")
