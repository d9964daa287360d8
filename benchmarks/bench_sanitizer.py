"""Sanitizer cost: each operator's largest non-slow case level (the most input bytes) run on the
interpreter plain and under ``sanitize()``, side by side in one process.

    python benchmarks/bench_sanitizer.py [OP...] [--repeat 3] [--all-levels]

Per level: the kernel's wall time (the case's ``run`` stage; plain and sanitized runs alternate,
the best of --repeat each, and of as many as 3 s of runs take for short kernels, so a busy
machine's stalls do not make the ratio), their ratio, the sanitizer's
shadow memory against the bytes of the tensors it follows (the kernel's arguments and
workspaces) and its findings (each must be 0: the operators are race-free).  Targets (issue 21):
time ratio <= 3, memory ratio <= 2.  The last line says whether every level met them.
"""

import argparse
import math
import sys

from ptogym import ops
from ptogym.backends import get_backend
from ptogym.interp import sanitizer
from ptogym.verify.cases import load_cases
from ptogym.verify.runner import PASS, run_case

TIME_TARGET, MEMORY_TARGET = 3.0, 2.0
MIN_SECONDS, MAX_ATTEMPTS = 3.0, 30  # short kernels run until both sides took 3 s: one stall is no ratio


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


def _run_seconds(spec, case, backend, sanitized: bool):
    with sanitizer.sanitize("warn" if sanitized else False) as found:
        result = run_case(spec, case, backend)
    if result.status != PASS:
        raise SystemExit(f"{spec.name} {case.id}: {result.status} {result.reason or ''}")
    return result.timings["run"], found


def _input_bytes(case) -> int:
    return sum(math.prod(spec.shape) * spec.dtype.itemsize for spec in case.inputs.values())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ops", nargs="*", help="operators (default: all)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--all-levels", action="store_true", help="every non-slow level, not only the largest")
    args = parser.parse_args(argv)
    backend = get_backend("interp")
    worst_time = worst_memory = 0.0
    total_findings = 0
    print(f"{'operator':<24} {'level':<22} {'plain s':>8} {'sanit. s':>8} {'time x':>7} {'memory x':>8} findings")
    for name in args.ops or ops.OP_NAMES:
        spec = ops.get_op(name)
        levels = [case for case in load_cases(spec.cases_path, spec) if not case.is_slow]
        if not args.all_levels:
            levels = [max(levels, key=_input_bytes)]
        for case in levels:
            plain = sanitized = math.inf
            attempt = spent = 0
            with _Measured() as measured:
                while attempt < args.repeat or (spent < MIN_SECONDS and attempt < MAX_ATTEMPTS):
                    seconds = _run_seconds(spec, case, backend, sanitized=False)[0]
                    plain = min(plain, seconds)
                    sanitized_seconds, findings = _run_seconds(spec, case, backend, sanitized=True)
                    sanitized = min(sanitized, sanitized_seconds)
                    if attempt == 0:
                        memory = measured.shadow / max(measured.followed, 1)
                    attempt, spent = attempt + 1, spent + seconds + sanitized_seconds
            worst_time, worst_memory = max(worst_time, sanitized / plain), max(worst_memory, memory)
            total_findings += len(findings)
            print(f"{name:<24} {case.id:<22} {plain:8.3f} {sanitized:8.3f} {sanitized / plain:7.2f} {memory:8.3f} "
                  f"{len(findings)}", flush=True)
            for finding in findings:
                print(f"    [{finding.check_id}] {finding.describe()}")
    met = worst_time <= TIME_TARGET and worst_memory <= MEMORY_TARGET and total_findings == 0
    print(f"worst: time {worst_time:.2f}x (target {TIME_TARGET}), memory {worst_memory:.3f}x (target "
          f"{MEMORY_TARGET}); findings {total_findings}: {'targets met' if met else 'TARGETS MISSED'}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
