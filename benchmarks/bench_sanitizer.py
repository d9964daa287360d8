"""Sanitizer cost: each operator's largest CI case level (the most input bytes of the levels not
tagged ``slow``, which the default test run covers) run on the interpreter plain and under
``sanitize()``, side by side in one process.

    python benchmarks/bench_sanitizer.py [OP...] [--rounds N] [--all-levels] [--slow]

Per level: one sanitized run judged against the golden (it must pass, with no finding: the
operators are race-free) gives the shadow memory against the bytes of the tensors the sanitizer
follows (the kernel's arguments and workspaces); then rounds of one plain and one sanitized kernel
launch in turn (so drifts in the machine's load hit both) give the median CPU seconds of a launch
each way and their ratio ("time x", the target's), the median over sanitized launches of their
time over their time less the sanitizer's own methods ("own x": what a busy machine's noise
cannot inflate) and the ratio of median wall times ("wall x").  Targets (issue 21): time
ratio <= 3, memory ratio <= 2.  The last line says whether every level met them.
"""

import argparse
import math
import statistics
import sys
import time

import torch

from ptogym import ops
from ptogym.backends import get_backend
from ptogym.interp import sanitizer
from ptogym.verify.cases import load_cases
from ptogym.verify.runner import PASS, make_case_inputs, run_case

TIME_TARGET, MEMORY_TARGET = 3.0, 2.0
ROUND_SECONDS, MIN_ROUNDS, MAX_ROUNDS = 3.0, 5, 50  # default rounds: about 3 s of plain launches


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


def _checked(spec, case, backend) -> list:
    """One sanitized run of the case judged against its golden: its findings (it must pass)."""
    with sanitizer.sanitize("warn") as found:
        result = run_case(spec, case, backend)
    if result.status != PASS:
        raise SystemExit(f"{spec.name} {case.id}: {result.status} {result.reason or ''}")
    return found


def _launch(spec, case, backend, inputs, sanitized: bool, own: "_SanitizerClock"):
    """CPU and wall seconds of one kernel launch (inputs cloned outside the clock) and the
    sanitizer's own share of its CPU time."""
    tensors = {name: tensor.clone() for name, tensor in inputs.items()}
    with sanitizer.sanitize("warn" if sanitized else False):
        own.cpu, cpu, wall = 0.0, time.process_time(), time.perf_counter()
        spec.run(tensors, case.attrs, backend)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return cpu, wall, own.cpu / cpu if cpu else 0.0


def _medians(launches: list) -> list:
    """The medians of ``_launch``'s three figures over launches."""
    return [statistics.median(column) for column in zip(*launches)]


def _input_bytes(case) -> int:
    return sum(math.prod(spec.shape) * spec.dtype.itemsize for spec in case.inputs.values())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ops", nargs="*", help="operators (default: all)")
    parser.add_argument("--rounds", type=int,
                        help=f"plain/sanitized launch pairs (default: about {ROUND_SECONDS:g} s of plain launches, "
                             f"{MIN_ROUNDS} to {MAX_ROUNDS})")
    parser.add_argument("--all-levels", action="store_true", help="every selected level, not only the largest")
    parser.add_argument("--slow", action="store_true", help="the slow levels too (those tagged model excepted)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (default 1: a busy machine makes idle threads spin, which is CPU time)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    backend = get_backend("interp")
    worst_time = worst_own = worst_memory = 0.0
    total_findings = 0
    print(f"{'operator':<24} {'level':<22} {'plain s':>8} {'sanit. s':>8} {'time x':>7} {'own x':>6} {'wall x':>7} "
          f"{'memory x':>8} findings")
    for name in args.ops or ops.OP_NAMES:
        spec = ops.get_op(name)
        levels = [case for case in load_cases(spec.cases_path, spec)
                  if "model" not in case.tags and (args.slow or not case.is_slow)]
        if not args.all_levels:
            levels = [max(levels, key=_input_bytes)]
        for case in levels:
            with _Measured() as measured:
                findings = _checked(spec, case, backend)
            memory = measured.shadow / max(measured.followed, 1)
            inputs = make_case_inputs(spec, case, backend.device)
            with _SanitizerClock() as own:
                first = _launch(spec, case, backend, inputs, False, own)[0]
                rounds = args.rounds or max(MIN_ROUNDS, min(MAX_ROUNDS, int(ROUND_SECONDS / max(first, 1e-6))))
                plain, sanitized = [], []
                for _ in range(rounds):  # plain and sanitized launches alternate: drifts in load hit both
                    plain.append(_launch(spec, case, backend, inputs, False, own))
                    sanitized.append(_launch(spec, case, backend, inputs, True, own))
            plain_cpu, plain_wall, _ = _medians(plain)
            sanitized_cpu, sanitized_wall, own_share = _medians(sanitized)
            ratio, own_ratio = sanitized_cpu / plain_cpu, 1 / (1 - min(own_share, 0.999))
            worst_time, worst_own = max(worst_time, ratio), max(worst_own, own_ratio)
            worst_memory = max(worst_memory, memory)
            total_findings += len(findings)
            print(f"{name:<24} {case.id:<22} {plain_cpu:8.3f} {sanitized_cpu:8.3f} {ratio:7.2f} {own_ratio:6.2f} "
                  f"{sanitized_wall / plain_wall:7.2f} {memory:8.3g} {len(findings)}", flush=True)
            for finding in findings:
                print(f"    [{finding.check_id}] {finding.describe()}")
    met = worst_time <= TIME_TARGET and worst_memory <= MEMORY_TARGET and total_findings == 0
    print(f"worst: time {worst_time:.2f}x (target {TIME_TARGET}; the sanitizer's own share alone: "
          f"{worst_own:.2f}x), memory {worst_memory:.3g}x (target {MEMORY_TARGET}); findings {total_findings}: "
          f"{'targets met' if met else 'TARGETS MISSED'}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
