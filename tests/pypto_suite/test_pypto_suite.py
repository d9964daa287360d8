"""pypto 0.2.0's own test suite and its published programs as differential corpora
(docs/fidelity.md, "pypto's own test suite" and "Published programs").

The upstream tests are not part of this project (another licence), so the default run
checks what can be checked without them: the fixtures recorded from real pypto are
compact and hold no code, the interpreter's recorded verdicts cover every recorded test,
no CPU-runnable test is left unexplained, and docs/fidelity.md shows the table those
verdicts give.  Where the hicann/pypto mirror is present, the slow test re-runs every
upstream test file under the interpreter and requires the same verdicts (a fix or a
regression anywhere changes one and fails it).
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from pypto_suite import records, suite

REPO = Path(__file__).resolve().parents[2]
FIXTURE_KEYS = {"file", "tag", "source_sha1", "pypto_version", "tests"}
TEST_KEYS = {"outcome", "message", "calls"}
CALL_KEYS = {"kernel", "inputs_sha1", "outputs", "error", "log"}


CORPORA = pytest.mark.parametrize("corpus", list(suite.CORPORA.values()), ids=list(suite.CORPORA))


def _require_recording(corpus) -> None:
    """Shown as skipped, with the command, until real pypto's run of the corpus is recorded."""
    if not list(corpus.fixtures.glob("*.json")):
        pytest.skip(f"pypto's {corpus.name} corpus not recorded yet: scripts/record_pypto_suite.py record"
                    f"{' --programs' * (corpus.name == 'programs')}, then compare")


@CORPORA
def test_fixtures_are_compact_and_hold_no_upstream_code(corpus):
    _require_recording(corpus)
    paths = sorted(corpus.fixtures.glob("*.json"))
    assert sum(p.stat().st_size for p in paths) <= suite.FIXTURE_BUDGET_BYTES
    for path in paths:
        data = json.loads(path.read_text())
        assert set(data) == FIXTURE_KEYS, path
        assert data["tag"] == suite.TAG and data["pypto_version"] == "0.2.0", path
        for test, record in data["tests"].items():
            assert test.startswith(data["file"] + "::") or test == data["file"], test
            assert set(record) == TEST_KEYS and len(record["message"]) <= 600, test
            for call in record["calls"]:
                assert set(call) <= CALL_KEYS and len(call["inputs_sha1"]) == 40, test


@CORPORA
def test_every_recorded_test_has_a_verdict_and_no_difference_is_unexplained(corpus):
    _require_recording(corpus)
    fixtures, verdicts = suite.load_fixtures(corpus), suite.load_verdicts(corpus)
    assert set(verdicts) == set(fixtures)
    for rel, fixture in fixtures.items():
        assert set(verdicts[rel]) == set(fixture["tests"]), rel
        for test, (category, _) in verdicts[rel].items():
            assert (category == "not CPU-runnable") == (fixture["tests"][test]["outcome"] != "passed"), test
    assert suite.unexplained(verdicts) == []
    for test, reason in suite.EXPECTED.items():
        assert reason, test


@CORPORA
def test_docs_show_the_recorded_table(corpus):
    _require_recording(corpus)
    assert suite.docs_table(corpus) == suite.table(suite.load_verdicts(corpus)), \
        f"docs/fidelity.md is stale: run scripts/record_pypto_suite.py compare{' --programs' * (corpus.name == 'programs')}"


def test_a_false_rejection_is_classified_as_a_difference():
    """The classifier itself: what a rejection, a changed output and a match turn into."""
    call = {"kernel": "k", "inputs_sha1": "0" * 40, "outputs": [{"dtype": "float32", "shape": [2], "sha1": "a" * 40}]}
    passed = {"outcome": "passed", "message": "", "calls": [call]}
    rejected = {"outcome": "failed", "message": "ConstraintViolation: [C-TILE-03] ...", "calls": []}
    assert suite.classify(passed, passed) == ("bitwise", "1 jit calls")
    assert suite.classify(passed, rejected)[0] == "difference"
    def with_output(output):
        return {**passed, "calls": [{**call, "outputs": [output]}]}

    digest = {**call["outputs"][0], "abs_sum": 1000.0, "nonfinite": 0}
    rounded = with_output({**digest, "sha1": "b" * 40, "abs_sum": 1000.0001})
    assert suite.classify(with_output(digest), rounded)[0] == "within tolerance"
    assert suite.classify(with_output(digest), with_output({**digest, "sha1": "b" * 40}))[0] == "within tolerance"
    for far in ({**digest, "sha1": "b" * 40, "abs_sum": 1001.0}, {**call["outputs"][0], "sha1": "b" * 40}):
        assert suite.classify(with_output(digest), with_output(far))[0] == "difference"  # no bound: not tolerated
    whole = records.harness.encode_tensor(torch.full((4,), 40.0))
    near, far = (records.harness.encode_tensor(torch.full((4,), value)) for value in (40.0001, 36000.0))
    assert suite.classify(with_output(whole), with_output(near))[0] == "within tolerance"
    assert suite.classify(with_output(whole), with_output(far))[0] == "difference"
    assert suite.classify(rejected, passed)[0] == "not CPU-runnable"


@pytest.mark.slow
@CORPORA
@pytest.mark.skipif(not os.path.isdir(suite.MIRROR), reason=f"the hicann/pypto mirror is not at {suite.MIRROR}")
def test_interpreter_still_gives_the_recorded_verdicts(tmp_path, corpus):
    """Every upstream file of the corpus under ptogym.interp again (5-10 minutes each), against the fixtures."""
    _require_recording(corpus)
    script = REPO / "scripts" / "record_pypto_suite.py"
    programs = ["--programs"] if corpus is suite.PROGRAMS else []
    done = subprocess.run([sys.executable, str(script), "compare", *programs, "--work", str(tmp_path), "--no-write"],
                          capture_output=True, text=True, timeout=1500, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    fresh = suite.compare_all(corpus.work_dir(tmp_path, "interp"), (), corpus)
    recorded = suite.load_verdicts(corpus)
    assert {rel: {t: c for t, (c, _) in tests.items()} for rel, tests in fresh.items()} == \
        {rel: {t: c for t, (c, _) in tests.items()} for rel, tests in recorded.items()}
