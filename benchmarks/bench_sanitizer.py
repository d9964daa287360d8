"""Sanitizer cost: each operator's largest non-slow case level (the most input bytes) run on the
interpreter plain and under ``sanitize()``, side by side in one process.

    python benchmarks/bench_sanitizer.py [OP...] [--repeat 3] [--all-levels]

Per level: the CPU seconds of the kernel calls (plain and sanitized runs alternate, the best of
--repeat each, and of as many as 3 s of runs take for short kernels), their ratio ("time x", the
target's), the sanitized kernels' time over their time less the sanitizer's own methods, measured
in the same run ("own x": what a busy machine's noise cannot inflate), the wall-time ratio
("wall x": noisy on a shared machine), the sanitizer's
shadow memory against the bytes of the tensors it follows (the kernel's arguments and
workspaces) and its findings (each must be 0: the operators are race-free).  Targets (issue 21):
time ratio <= 3, memory ratio <= 2.  The last line says whether every level met them.
"""

import argparse
import math
import sys
import time

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


class _SanitizerClock:
    """CPU seconds spent in the sanitizer's own methods while it is installed: measured inside the
    sanitized run itself, so what other processes do to the machine cancels out of its share."""

    METHODS = ("read", "write", "finish", "bind_parameters", "bind_workspace", "enter_iteration",
               "leave_iteration", "submit_barrier")

    def __init__(self):
        self.cpu = 0.0

    def __enter__(self):
        for name in self.METHODS:
            setattr(sanitizer.Sanitizer, name, self._timed(getattr(sanitizer.Sanitizer, name)))
        return self

    def _timed(self, method):
        def timed(*args, **kwargs):
            start = time.process_time()
            try:
                return method(*args, **kwargs)
            finally:
                self.cpu += time.process_time() - start

        timed.original = method
        return timed

    def __exit__(self, *exc):
        for name in self.METHODS:
            setattr(sanitizer.Sanitizer, name, getattr(sanitizer.Sanitizer, name).original)


class _KernelClock:
    """CPU and wall seconds the backend spends in kernel calls (only those: not the inputs, the
    golden or the comparison) while it is installed.  CPU time (the process's, all threads) is
    what the ratio uses: on a shared machine other processes stretch wall time, not CPU time."""

    def __init__(self, backend):
        self.backend, self.cpu, self.wall = backend, 0.0, 0.0

    def __enter__(self):
        call = self.backend._call

        def timed_call(kernel, tensors, scalars):
            cpu, wall = time.process_time(), time.perf_counter()
            try:
                return call(kernel, tensors, scalars)
            finally:
                self.cpu += time.process_time() - cpu
                self.wall += time.perf_counter() - wall

        self.backend._call = timed_call
        return self

    def __exit__(self, *exc):
        del self.backend._call  # the class's method again


def _run_seconds(spec, case, backend, sanitized: bool):
    """(kernel CPU seconds, kernel wall seconds, sanitizer CPU seconds, findings) of one run of the case."""
    with sanitizer.sanitize("warn" if sanitized else False) as found, _KernelClock(backend) as clock, \
            _SanitizerClock() as own:
        result = run_case(spec, case, backend)
    if result.status != PASS:
        raise SystemExit(f"{spec.name} {case.id}: {result.status} {result.reason or ''}")
    return clock.cpu, clock.wall, own.cpu, found


def _input_bytes(case) -> int:
    return sum(math.prod(spec.shape) * spec.dtype.itemsize for spec in case.inputs.values())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ops", nargs="*", help="operators (default: all)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--all-levels", action="store_true", help="every non-slow level, not only the largest")
    args = parser.parse_args(argv)
    backend = get_backend("interp")
    worst_time = worst_own = worst_memory = 0.0
    total_findings = 0
    print(f"{'operator':<24} {'level':<22} {'plain s':>8} {'sanit. s':>8} {'time x':>7} {'own x':>6} {'wall x':>7} "
          f"{'memory x':>8} findings")
    for name in args.ops or ops.OP_NAMES:
        spec = ops.get_op(name)
        levels = [case for case in load_cases(spec.cases_path, spec) if not case.is_slow]
        if not args.all_levels:
            levels = [max(levels, key=_input_bytes)]
        for case in levels:
            plain = sanitized = plain_wall = sanitized_wall = math.inf
            own_share = 0.0
            attempt = spent = 0
            with _Measured() as measured:
                while attempt < args.repeat or (spent < MIN_SECONDS and attempt < MAX_ATTEMPTS):
                    cpu, wall, _, _ = _run_seconds(spec, case, backend, sanitized=False)
                    plain, plain_wall = min(plain, cpu), min(plain_wall, wall)
                    cpu, wall, own, findings = _run_seconds(spec, case, backend, sanitized=True)
                    sanitized, sanitized_wall = min(sanitized, cpu), min(sanitized_wall, wall)
                    own_share = max(own_share, own / cpu if cpu else 0.0)
                    if attempt == 0:
                        memory = measured.shadow / max(measured.followed, 1)
                    attempt, spent = attempt + 1, spent + plain_wall + wall
            ratio, own_ratio = sanitized / plain, 1 / (1 - min(own_share, 0.999))
            worst_time, worst_own = max(worst_time, ratio), max(worst_own, own_ratio)
            worst_memory = max(worst_memory, memory)
            total_findings += len(findings)
            print(f"{name:<24} {case.id:<22} {plain:8.3f} {sanitized:8.3f} {ratio:7.2f} {own_ratio:6.2f} "
                  f"{sanitized_wall / plain_wall:7.2f} {memory:8.3f} {len(findings)}", flush=True)
            for finding in findings:
                print(f"    [{finding.check_id}] {finding.describe()}")
    met = worst_time <= TIME_TARGET and worst_memory <= MEMORY_TARGET and total_findings == 0
    print(f"worst: time {worst_time:.2f}x (target {TIME_TARGET}; the sanitizer's own share alone: "
          f"{worst_own:.2f}x), memory {worst_memory:.3f}x (target {MEMORY_TARGET}); findings {total_findings}: "
          f"{'targets met' if met else 'TARGETS MISSED'}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
