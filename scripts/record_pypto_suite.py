#!/usr/bin/env python3
"""Run pypto 0.2.0's own test suite under real pypto (SIM) and under ptogym.interp.

The suite (``python/tests`` of hicann/pypto, tag r0.2.0) is read from a local mirror of
that repository at run time only and extracted to a temporary directory: none of its
code enters this project.  Each upstream test file runs in a pytest process of its own
(a failed compile can leave pypto's front end broken for later kernels), with the
plugin ``tests/pypto_suite/plugin.py``:

    record   real pypto, every jit call in SIM run mode with pypto's own interpreter
             computing the outputs on the CPU (as the pypto-sim backend does), each file
             under the shared lock /tmp/ptogym-pypto.lock (taken by the script); resumable
             (a test that was running when a file hit --timeout is recorded as timed out)
             and stopped after --budget seconds; then writes the compact fixtures
             tests/pypto_suite/fixtures/<file>.json (test ids, input digests, outputs or
             their digests, verdicts):  python3 scripts/record_pypto_suite.py record
    compare  the same files under ``ptogym interp`` (strict), each test classified against
             the fixture (``pypto_suite.suite.classify``); prints the per-file table of
             docs/fidelity.md and exits 1 when a classification differs from
             ``pypto_suite.suite.EXPECTED`` (an unexplained difference).

    ... --programs               the programs published with pypto instead (``models/``,
                                 ``examples/``: each file that defines test functions, run
                                 through them, the examples with their ``--run_mode sim``);
                                 fixtures tests/pypto_suite/program_fixtures/, the table of
                                 docs/fidelity.md "Published programs"
    ... --only 'st/test_clip*'   fnmatch pattern of upstream paths (repeatable)
    ... --mirror DIR             the git directory of the hicann/pypto mirror
"""
import argparse
import contextlib
import fcntl
import fnmatch
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from pypto_suite import suite  # noqa: E402

PYPTO_LOCK = "/tmp/ptogym-pypto.lock"


def run_files(root: Path, rels: list, side: str, log: Path, timeout: float, corpus=suite.SUITE) -> None:
    """Run upstream files in one pytest process, appending to ``log``; a test that did not
    finish (the plugin's per-test limit, the process's ``timeout`` or a crash) is recorded
    as such when the next call resumes after it."""
    done, started = suite.read_log(log)
    unfinished = [t for t in started if t not in done]
    if unfinished:
        with log.open("a") as out:
            for test in unfinished:
                out.write(json.dumps({"test": test, "outcome": "unfinished", "message": "the test did not finish: "
                                      f"over the {suite.TEST_LIMIT_S:.0f} s limit per test, or its process crashed",
                                      "seconds": 0.0, "calls": []}) + "\n")
        done, _ = suite.read_log(log)
    if (log.parent / (log.name + ".complete")).exists():
        return
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{root.parent / 'harness'}", "PTOGYM_SUITE_SIDE": side,
           "PTOGYM_SUITE_LOG": str(log), "PYTHONDONTWRITEBYTECODE": "1",
           "PTOGYM_SUITE_TEST_LIMIT_S": str(suite.TEST_LIMIT_S),
           "PTOGYM_SUITE_ARGV": " ".join(suite.PROGRAM_ARGV) if corpus is suite.PROGRAMS else ""}
    env.pop("ASCEND_HOME_PATH", None)  # pypto picks NPU run mode when CANN is configured
    command = [sys.executable, "-m", "pytest", "-q", "-p", "pypto_suite.plugin", "-p", "no:cacheprovider",
               "-o", "addopts=", "--continue-on-collection-errors", *rels, *(f"--deselect={t}" for t in done)]
    try:
        with LOCK.held(side == "pypto"):
            subprocess.run(command, cwd=root, env=env, timeout=timeout, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, start_new_session=True)
    except subprocess.TimeoutExpired:
        pass  # the next call records the test that was running
    # a session that ran to its end left <log>.complete (the plugin's pytest_sessionfinish)


class RealPyptoLock:
    """The shared lock every real-pypto run holds (/tmp/ptogym-pypto.lock), taken by the
    script itself and held across files for at most ``hold_s`` seconds at a time, so
    that others' runs interleave with a long sweep."""

    def __init__(self, hold_s: float):
        self.hold_s, self.file, self.since = hold_s, None, 0.0

    @contextlib.contextmanager
    def held(self, needed: bool):
        if needed and self.file is None:
            self.file = open(PYPTO_LOCK, "a")
            fcntl.flock(self.file, fcntl.LOCK_EX)
            self.since = time.time()
        try:
            yield
        finally:
            if self.file is not None and time.time() - self.since > self.hold_s:
                self.release()

    def release(self) -> None:
        if self.file is not None:
            fcntl.flock(self.file, fcntl.LOCK_UN)
            self.file.close()
            self.file = None


LOCK = RealPyptoLock(hold_s=1500.0)
GROUP = 6


def extract(mirror: str, dest: Path) -> Path:
    """The suite and what it imports (the root conftest.py, the test-case helpers, the
    models' utilities) at ``suite.TAG``, under ``dest/pypto``; the harness modules are
    linked from ``dest/harness`` (not this repository's tests/, whose conftest.py would
    shadow upstream's)."""
    root = dest / "pypto"
    root.mkdir()
    archive = subprocess.run(["git", "-C", mirror, "archive", suite.TAG, *suite.EXTRACTED], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(root)], input=archive, check=True)
    (root / "pytest.ini").write_text("[pytest]\nmarkers =\n    soc: target SoC\n")
    harness = dest / "harness"
    harness.mkdir()
    for package in ("pypto_suite", "conformance"):
        (harness / package).symlink_to(REPO / "tests" / package)
    return root


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["record", "compare"])
    parser.add_argument("--only", action="append", default=[])
    parser.add_argument("--programs", action="store_true", help="the published programs, not the test suite")
    parser.add_argument("--mirror", default=suite.MIRROR)
    parser.add_argument("--work", default=str(suite.WORK), help="raw logs (resumable)")
    parser.add_argument("--timeout", type=float, default=240.0, help="seconds per upstream file and run")
    parser.add_argument("--force", action="store_true", help="record: also files that have a fixture")
    parser.add_argument("--probes", nargs="*", default=[],
                        help="record: first re-record these check probes (scripts/record_check_fixtures.py) while "
                             "the lock is held")
    parser.add_argument("--reuse", action="store_true",
                        help="compare: classify the interpreter's last run again (e.g. after recording more)")
    parser.add_argument("--no-write", action="store_true",
                        help="compare: leave tests/pypto_suite/interp_verdicts.json and docs/fidelity.md alone")
    parser.add_argument("--budget", type=float, default=3000.0, help="stop starting files after this many seconds")
    args = parser.parse_args(argv)
    side = "pypto" if args.action == "record" else "interp"
    corpus = suite.PROGRAMS if args.programs else suite.SUITE
    work = corpus.work_dir(Path(args.work), side)
    work.mkdir(parents=True, exist_ok=True)
    deadline = time.time() + args.budget
    with tempfile.TemporaryDirectory(prefix="pypto-suite-") as tmp:
        root = extract(args.mirror, Path(tmp))
        files = [f for f in corpus.files(root)
                 if not args.only or any(fnmatch.fnmatch(f, p) for p in args.only)]
        if args.action == "compare":  # the interpreter is fast and keeps no broken state: one process
            if not args.reuse:
                compare_in_one_process(root, files, work, args.timeout * 8, corpus)
            return suite.report(work, args.only, write=not args.no_write, corpus=corpus)
        if args.probes:
            with LOCK.held(True):
                subprocess.run([sys.executable, str(REPO / "scripts" / "record_check_fixtures.py"), *args.probes],
                               cwd=REPO, check=False)
        return record(root, files, work, args.timeout, deadline, args.force, corpus)


def record(root: Path, files: list, work: Path, timeout: float, deadline: float, force: bool,
           corpus=suite.SUITE) -> int:
    """Real pypto over ``files``, ``GROUP`` files to a pytest process (starting one costs
    10-20 s); every test that does not pass there runs again in a fresh process of its
    file's own, because a failed compile can break pypto for the tests after it (a pass
    cannot come from that).  Files with a fixture are skipped unless ``force``."""
    # files with jit kernels first: the older `with pypto.function(...)` API needs an NPU
    ordered = sorted(files, key=lambda f: ("jit" not in (root / f).read_text(errors="replace"), f))
    todo = [rel for rel in ordered if force or not suite.fixture_path(rel, corpus).exists()]
    for start in range(0, len(todo), GROUP):
        if time.time() > deadline:
            print(f"record_pypto_suite: budget spent, {len(todo) - start} files left", flush=True)
            return 3
        group, t0 = todo[start:start + GROUP], time.time()
        log = work / f"group-{suite.fixture_name(group[0])}.jsonl"
        run_resuming(root, group, "pypto", log, timeout * len(group), corpus)
        done, _ = suite.read_log(log)
        for rel in group:
            tests = {test: r for test, r in done.items() if test.split("::")[0] == rel}
            again = [test for test, r in tests.items() if r["outcome"] not in ("passed", "skipped", "deselected")]
            if again or not tests:
                alone = work / f"{suite.fixture_name(rel)}.jsonl"
                for stale in (alone, alone.parent / (alone.name + ".complete")):
                    stale.unlink(missing_ok=True)
                run_resuming(root, [rel] if rel in again or not tests else again, "pypto", alone, timeout, corpus)
                tests.update(suite.read_log(alone)[0])
            suite.write_fixture(rel, root, tests, corpus)
            print(f"{rel}: {len(tests)} tests, {len(again)} run again alone", flush=True)
        print(f"record_pypto_suite: {len(group)} files in {time.time() - t0:.0f} s", flush=True)
    return 0


def run_resuming(root: Path, rels: list, side: str, log: Path, timeout: float, corpus=suite.SUITE) -> None:
    for _attempt in range(8):  # each attempt resumes after the test that did not finish
        run_files(root, rels, side, log, timeout, corpus)
        if (log.parent / (log.name + ".complete")).exists():
            return


def compare_in_one_process(root: Path, rels: list, work: Path, timeout: float, corpus=suite.SUITE) -> None:
    """Run ``rels`` under the interpreter afresh and split the log per upstream file."""
    log = work / "all.jsonl"
    for stale in work.glob("*.jsonl*"):
        stale.unlink()
    run_resuming(root, rels, "interp", log, timeout, corpus)
    done, _ = suite.read_log(log)
    for rel in rels:
        with (work / f"{suite.fixture_name(rel)}.jsonl").open("w") as out:
            for test, record in done.items():
                if test.split("::")[0] == rel:
                    out.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    sys.exit(main())
