"""Sanitizer cost: every operator's non-slow case levels run on the interpreter plain and under
``sanitize()``, side by side in one process.

    python benchmarks/bench_sanitizer.py [OP...] [--repeat 3]

Per level: the kernel's wall time (the case's ``run`` stage, median of --repeat) plain and
sanitized, their ratio, the sanitizer's findings (each must be 0: the operators are race-free)
and its shadow memory against the bytes of the tensors it follows (the kernel's arguments and
workspaces).  Targets (issue 21), on each operator's largest such level (the one its plain run takes longest on): time ratio <= 3,
memory ratio <= 2.  The last line says whether every level met them.
"""

import argparse
import statistics
import sys

from ptogym import ops
from ptogym.backends import get_backend
from ptogym.interp import sanitizer
from ptogym.verify.cases import load_cases
from ptogym.verify.runner import PASS, run_case

TIME_TARGET, MEMORY_TARGET = 3.0, 2.0


class _Measured:
    """Shadow and followed bytes of the kernel calls sanitized while it is installed."""

    def __init__(self):
        self.shadow = self.followed = 0
        self._finish = sanitizer.Sanitizer.finish

    def __enter__(self):
        measured, finish = self, self._finish

        def counting_finish(run):
            measured.shadow += run.shadow_bytes()
            measured.followed += sum(storage.nbytes for storage in run.storages)
            finish(run)

        sanitizer.Sanitizer.finish = counting_finish
        return self

    def __exit__(self, *exc):
        sanitizer.Sanitizer.finish = self._finish


def _run_seconds(spec, case, backend, repeat: int, sanitized: bool):
    times, findings = [], []
    for _ in range(repeat):
        with sanitizer.sanitize("warn" if sanitized else False) as found:
            result = run_case(spec, case, backend)
        if result.status != PASS:
            raise SystemExit(f"{spec.name} {case.id}: {result.status} {result.reason or ''}")
        times.append(result.timings["run"])
        findings = found
    return statistics.median(times), findings


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ops", nargs="*", help="operators (default: all)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    backend = get_backend("interp")
    worst_time = worst_memory = 0.0
    total_findings = 0
    print(f"{'operator':<24} {'level':<22} {'plain s':>8} {'sanit. s':>8} {'time x':>7} {'memory x':>8} findings")
    for name in args.ops or ops.OP_NAMES:
        spec = ops.get_op(name)
        levels = [case for case in load_cases(spec.cases_path, spec) if not case.is_slow]
        rows = []
        for case in levels:
            plain, _ = _run_seconds(spec, case, backend, args.repeat, sanitized=False)
            with _Measured() as measured:
                sanitized, findings = _run_seconds(spec, case, backend, args.repeat, sanitized=True)
            rows.append((case.id, plain, sanitized, measured.shadow / max(measured.followed, 1), findings))
        largest = max(range(len(rows)), key=lambda i: rows[i][1])  # the level the plain interpreter takes longest on
        for index, (level, plain, sanitized, memory, findings) in enumerate(rows):
            if index == largest:
                worst_time, worst_memory = max(worst_time, sanitized / plain), max(worst_memory, memory)
            total_findings += len(findings)
            print(f"{name:<24} {level + (' *' if index == largest else ''):<22} {plain:8.3f} {sanitized:8.3f} "
                  f"{sanitized / plain:7.2f} {memory:8.3f} {len(findings)}", flush=True)
            for finding in findings:
                print(f"    [{finding.check_id}] {finding.describe()}")
    met = worst_time <= TIME_TARGET and worst_memory <= MEMORY_TARGET and total_findings == 0
    print(f"* the level each operator takes longest on; worst there: time {worst_time:.2f}x (target {TIME_TARGET}), "
          f"memory {worst_memory:.3f}x (target {MEMORY_TARGET}); findings {total_findings}: "
          f"{'targets met' if met else 'TARGETS MISSED'}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
