#!/usr/bin/env python3
"""Record real pypto 0.2.0's outcome of every conformance case as a fixture file.

Each case (tests/conformance: the hand-written corpus and a fixed-seed sample of
generated kernels) runs through the pypto-sim backend - pypto's compiler and its
own graph interpreter computing the outputs on this CPU - and its outcome (outputs,
or the rejection with pypto's error text) goes to tests/conformance/fixtures/
<case>.json.  The tests compare ``ptogym.interp`` against these files.

Real pypto is slow and memory-hungry (~0.4 s and ~23 MB per kernel, never freed), so
the script records what is missing or stale and stops after ``--budget`` seconds;
run it again to continue.  A rejection can leave pypto's front end in a state that
fails every later kernel, so after each rejection the script restarts itself (a
fresh process, the same deadline) before the next case.  Always under the shared lock:

    flock /tmp/ptogym-pypto.lock timeout 170 python3 scripts/record_conformance.py
    ... --only 'cast_*'        re-record a subset (fnmatch pattern, repeatable)
    ... --force                re-record even fixtures that are up to date
    ... --list                 list the cases and whether their fixture is current
    ... --summary              compare ptogym.interp with the fixtures: the numbers in docs/fidelity.md

Exit codes: 0 all fixtures current (--summary: no unexplained difference), 1 an
unexplained difference (--summary), 2 no case matches --only, 3 cases left to record.
"""
import argparse
import fnmatch
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from conformance import harness  # noqa: E402
from conformance.cases import all_cases  # noqa: E402


DEADLINE_ENV = "PTOGYM_RECORD_DEADLINE"  # carried across the restarts after rejections


def is_current(name: str, spec: dict) -> bool:
    fixture = harness.load_fixture(name)
    return fixture is not None and fixture["spec"] == spec and fixture["inputs_sha1"] == harness.inputs_digest(spec)


def summary(patterns) -> int:
    """Count the cases by how ptogym.interp's outcome compares with the recorded one."""
    import collections
    import warnings

    from conformance.corpus import BOUNDS, KNOWN
    from ptogym.backends import get_backend

    interp = get_backend("interp")
    counts = collections.Counter()
    for name, spec in select(all_cases(), patterns).items():
        recorded = harness.Outcome.from_json(harness.load_fixture(name)["pypto"])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mine = harness.run(interp, spec)
        group = {"gen": "generated", "area": "areas"}.get(name.split("_", 1)[0], "corpus")
        if name in KNOWN:
            kind = "known difference"
        elif harness.compare(mine, recorded, BOUNDS.get(name)):
            kind = "UNEXPLAINED difference"
        elif not recorded.accepted:
            kind = "both reject"
        elif all(harness.bitwise_equal(a, b) for a, b in zip(mine.outputs, recorded.outputs)):
            kind = "bitwise equal"
        else:
            kind = f"within bound {sorted(BOUNDS[name])[0]}"
        counts[group, kind] += 1
    for (group, kind), n in sorted(counts.items()):
        print(f"{group:9} {kind:28} {n}")
    unexplained = sum(n for (_, kind), n in counts.items() if kind.startswith("UNEXPLAINED"))
    print(f"record_conformance: {sum(counts.values())} cases compared, {unexplained} unexplained differences")
    return 1 if unexplained else 0


def select(cases: dict, patterns) -> dict:
    if not patterns:
        return cases
    return {n: s for n, s in cases.items() if any(fnmatch.fnmatch(n, p) for p in patterns)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", default=[], help="fnmatch pattern of case names (repeatable)")
    parser.add_argument("--force", action="store_true", help="re-record fixtures that are already current")
    parser.add_argument("--budget", type=float, default=150.0, help="stop starting new cases after this many seconds")
    parser.add_argument("--list", action="store_true", help="list cases and fixture state, record nothing")
    parser.add_argument("--summary", action="store_true", help="interp vs fixtures, counted by outcome")
    args = parser.parse_args(argv)

    if args.only and not select(all_cases(), args.only):
        print(f"record_conformance: no case matches {args.only}")
        return 2
    if args.summary:
        return summary(args.only)
    cases = select(all_cases(), args.only)
    todo = {n: s for n, s in cases.items() if args.force or not is_current(n, s)}
    if args.list:
        for name in cases:
            print(f"{'stale' if name in todo else 'ok   '} {name}")
        print(f"record_conformance: {len(cases)} cases, {len(todo)} to record")
        return 0 if not todo else 3

    from ptogym.backends.pypto_sim import Backend

    deadline = float(os.environ.get(DEADLINE_ENV) or time.time() + args.budget)
    sim = Backend()
    done = 0
    for name, spec in todo.items():
        if time.time() > deadline:
            break
        t0 = time.perf_counter()
        outcome = harness.run(sim, spec)
        harness.save_fixture(name, spec, outcome, time.perf_counter() - t0)
        done += 1
        verdict = "accepted" if outcome.accepted else "rejected: " + outcome.error.splitlines()[0][:100]
        print(f"{name}: {verdict} ({time.perf_counter() - t0:.1f} s)", flush=True)
        if not outcome.accepted and done < len(todo):
            os.environ[DEADLINE_ENV] = str(deadline)
            os.execv(sys.executable, [sys.executable, __file__, *(argv if argv is not None else sys.argv[1:])])
    left = len(todo) - done
    print(f"record_conformance: recorded {done} in this process, {left} left")
    return 3 if left else 0


if __name__ == "__main__":
    sys.exit(main())
