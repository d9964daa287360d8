"""Record full-build ``pypto-sim`` figures of operator levels into
``tests/fixtures/full_builds_pypto.json``, the reference the reduced builds are held to.

    flock /tmp/ptogym-pypto.lock python3 scripts/record_full_builds.py [--levels L ...] [--budget S] [OP ...]

A full build compiles every loop branch of a kernel (what a device binary holds); the
reduced build that ``pypto-sim`` uses for a call compiles only the loops the call's
shapes run.  For each case this runs both (cache bypassed, fresh worker per case),
records the full build's simulated µs, kernel µs, tasks, cores and - where pypto's
interpreter computes them (``PTOGYM_SIM_MAX_ELEMENTS``) - the outputs' digests, and
prints whether the reduced build matched.  Default levels: every operator's level0;
``--levels all`` takes every level.  Entries already recorded are kept (re-recorded
with ``--force``); the file is rewritten atomically after each case.  ``--budget``
stops starting new cases after that many seconds.
"""
import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]


def main(argv=None) -> int:
    from sim_builds import COMPARED, FIXTURE, case_figures, load_fixture

    from ptogym.backends._pypto_worker import stop_workers
    from ptogym.backends.pypto_sim import Backend
    from ptogym.ops import OP_NAMES, get_op
    from ptogym.verify.cases import load_cases

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ops", nargs="*", default=list(OP_NAMES))
    parser.add_argument("--levels", nargs="+", default=["level0"], help="case ids, or 'all'")
    parser.add_argument("--budget", type=float, default=0, help="seconds after which no new case starts (0: none)")
    parser.add_argument("--force", action="store_true", help="re-record entries already in the fixture")
    args = parser.parse_args(argv)
    fixture, backend, start, mismatches = load_fixture(), Backend(), time.monotonic(), 0
    for name in args.ops:
        spec = get_op(name)
        for case in load_cases(spec.cases_path, spec):
            if args.levels != ["all"] and case.id not in args.levels:
                continue
            if case.id in fixture.get(name, {}) and not args.force:
                continue
            if args.budget and time.monotonic() - start > args.budget:
                print(f"budget of {args.budget:.0f} s spent; stopping before {name} {case.id}", flush=True)
                return 1 if mismatches else 0
            try:
                full = case_figures(spec, case, backend, full_build=True)
                stop_workers()
                reduced = case_figures(spec, case, backend, full_build=False)
            except (NotImplementedError, RuntimeError) as refusal:  # e.g. a mode pypto-sim cannot run
                print(f"{name} {case.id}: not simulated ({type(refusal).__name__}: {str(refusal)[:200]})", flush=True)
                continue
            finally:
                stop_workers()
            same = all(full[key] == reduced[key] for key in COMPARED) and full.get("outputs") == reduced.get("outputs")
            mismatches += not same
            print(f"{name} {case.id}: full {full['simulated_us']:.3f} us {full['tasks']} tasks in {full['wall_s']} s, "
                  f"reduced {reduced['simulated_us']:.3f} us {reduced['tasks']} tasks in {reduced['wall_s']} s: "
                  f"{'identical' if same else 'DIFFERENT'}" + (" (outputs compared)" if "outputs" in full else ""),
                  flush=True)
            fixture.setdefault(name, {})[case.id] = {
                key: value for key, value in full.items() if key != "build"} | {"reduced_wall_s": reduced["wall_s"]}
            temporary = FIXTURE.with_suffix(f".tmp{os.getpid()}")
            temporary.write_text(json.dumps(fixture, indent=1, sort_keys=True) + "\n")
            os.replace(temporary, FIXTURE)
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
