"""Real-pypto launches in a child process, so that Ctrl-C and SIGTERM stop them at once.

pypto compiles in C++ for 1 to 35 s per call, and Python runs signal handlers only
between bytecodes: in-process, a Ctrl-C waited for the compile to end.  Here one
child per backend (started on first use with ``spawn``: it imports torch and pypto
once, ~3 s) serves launches one at a time.  The caller's tensors travel as copies in
shared memory, their values included even when nothing is computed: the cost model
reads the values a kernel reads as scalars (loop bounds, block ids; measured on
paged_attention: uninitialised copies gave random trip counts, 33.6 to 20833.7 µs for one
call) - and the computed values are copied back only when the launch computed them,
so the caller's tensors keep their addresses and stay untouched otherwise.  While the
parent waits, an interrupt kills the child, removes its run directory and re-raises.

pypto 0.2.0 can also hang: when a compile pass fails on one of its compile threads
(e.g. a cube tile past L0C), the main thread may wait for the task in
``HostMachine::WaitTaskFinish`` forever, asleep.  A compile always keeps a core busy,
so the parent watches the child's CPU time and stops a launch whose child used less
than 2 % of a core over ``$PTOGYM_SIM_STALL_S`` seconds (default 120; 0 turns the watch
off), raising ``PyptoRunError`` instead of waiting for ever.

The child dies with its parent (``PR_SET_PDEATHSIG``: a ``kill -9`` of ``ptogym`` stops
the compile at once instead of letting it finish and print a broken pipe), and while a
launch runs longer than ``$PTOGYM_PROGRESS_S`` seconds (default 10; 0 = silent) the
parent prints a progress line on stderr every as many seconds: the phase the child
reports (building, compiling, simulating), the time since the launch started and the
memory of the child's processes.
"""
from __future__ import annotations

import atexit
import contextlib
import ctypes
import functools
import importlib
import importlib.util
import multiprocessing
import os
import shutil
import signal
import sys
import time
import types
from dataclasses import asdict, dataclass
from pathlib import Path

from . import BackendUnavailable
from .base import OutputsNotComputed

_POLL_S = 0.05
ENV_STALL_S = "PTOGYM_SIM_STALL_S"
DEFAULT_STALL_S = 120.0
STALL_CPU_SHARE = 0.02
ENV_PROGRESS_S = "PTOGYM_PROGRESS_S"
DEFAULT_PROGRESS_S = 10.0
PR_SET_PDEATHSIG = 1  # linux/prctl.h
_workers: dict = {}


class WorkerStalled(Exception):
    """The worker made no progress: it used almost no CPU time for a whole window."""


def _group_stat_fields(group: int):
    """The /proc stat fields (after the command name) of every process in process group
    ``group``: the worker and what it started (g++, cmake)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):  # gone meanwhile
            continue
        if int(fields[2]) == group:
            yield fields


def _group_cpu_seconds(group: int) -> float | None:
    """CPU seconds (user + system, with reaped children's) of process group ``group``.
    None without /proc or without such a group."""
    ticks = [sum(int(value) for value in fields[11:15]) for fields in _group_stat_fields(group)]
    return sum(ticks) / os.sysconf("SC_CLK_TCK") if ticks else None


def group_rss_bytes(group: int) -> int:
    """Resident memory of process group ``group`` now (bytes; 0 without /proc)."""
    return sum(int(fields[21]) for fields in _group_stat_fields(group)) * os.sysconf("SC_PAGE_SIZE")


def seconds_from_env(variable: str, default: float) -> float:
    """``$variable`` as a number of seconds (0 = off), else ``default``."""
    raw = os.environ.get(variable, "").strip()
    try:
        return float(raw) if raw else default
    except ValueError:
        raise ValueError(f"${variable}: {raw!r} is not a number of seconds") from None


class _Progress:
    """A line on stderr every ``interval_s`` seconds of a launch: phase, elapsed, memory."""

    def __init__(self, label: str, group: int, interval_s: float):
        self.label, self.group, self.interval_s = label, group, interval_s
        self.phase = "starting"
        self.start = self.next = time.monotonic()
        self.next += interval_s

    def tick(self) -> None:
        now = time.monotonic()
        if self.interval_s <= 0 or now < self.next:
            return
        self.next = now + self.interval_s
        print(f"[{self.label}] {self.phase}: {now - self.start:.0f} s, "
              f"{group_rss_bytes(self.group) / 2**30:.2f} GB resident", file=sys.stderr, flush=True)


def die_with_parent(parent_pid: int) -> None:
    """Have the kernel SIGKILL this process when its parent dies (a ``kill -9`` of the
    parent included: no handler runs there), and exit now if it is already gone."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(1)


class _StallWatch:
    """Raises ``WorkerStalled`` from ``check`` once process group ``group`` used less
    than ``STALL_CPU_SHARE`` of a core over a window of ``window_s`` seconds."""

    def __init__(self, group: int, window_s: float):
        self.group, self.window_s = group, window_s
        self._start()

    def _start(self) -> None:
        self.since, self.cpu = time.monotonic(), _group_cpu_seconds(self.group)

    def check(self) -> None:
        if self.window_s <= 0 or time.monotonic() - self.since < self.window_s:
            return
        if self.cpu is None:  # the group did not exist yet (a new worker): watch from now
            self._start()
            return
        used = (_group_cpu_seconds(self.group) or self.cpu) - self.cpu
        if used < STALL_CPU_SHARE * self.window_s:
            raise WorkerStalled(f"its processes used {used:.1f} s of CPU in {self.window_s:.0f} s")
        self._start()


class _Worker:
    def __init__(self, backend_name: str):
        context = multiprocessing.get_context("spawn")
        self.connection, child_end = context.Pipe()
        self.backend_name = backend_name
        self.process = context.Process(target=_serve, args=(child_end, backend_name, os.getpid()), daemon=True,
                                       name=f"ptogym-{backend_name}")
        # spawn re-imports the parent's __main__ in the child: a user's script without a
        # main guard would run twice.  The worker needs nothing from it.
        main, sys.modules["__main__"] = sys.modules["__main__"], types.ModuleType("__main__")
        try:
            self.process.start()
        finally:
            sys.modules["__main__"] = main
        child_end.close()

    def call(self, request: tuple, stall_s: float = DEFAULT_STALL_S, label: str = "") -> tuple:
        try:
            self.connection.send(request)
            watch = _StallWatch(self.process.pid, stall_s)
            progress = _Progress(f"{self.backend_name} {label}".strip(), self.process.pid,
                                 seconds_from_env(ENV_PROGRESS_S, DEFAULT_PROGRESS_S))
            while True:
                while not self.connection.poll(_POLL_S):
                    if not self.process.is_alive():
                        raise EOFError
                    watch.check()
                    progress.tick()
                message = self.connection.recv()
                if message[0] != "phase":
                    return message
                progress.phase = message[1]
        except (EOFError, OSError):
            code = self.process.exitcode
            self.kill()
            raise RuntimeError(f"the pypto worker process died (exit code {code})") from None
        except WorkerStalled:
            self.kill()
            raise
        except BaseException:  # KeyboardInterrupt / SIGTERM: stop the compile now
            self.kill()
            raise

    def kill(self) -> None:
        """Stop the child and what it started (SIGTERM, then SIGKILL after 1 s, to its
        process group: pypto's g++ and cmake too) and remove its run directory."""
        from . import _pypto_runtime as rt

        for signum in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.process.pid, signum)
            except (ProcessLookupError, PermissionError):  # not (yet) a group of its own
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.process.pid, signum)
            self.process.join(1.0)
            if not self.process.is_alive():
                break
        for folder in (rt.cache_root() / "pypto-runs").glob(f"run-{self.process.pid}-*"):
            shutil.rmtree(folder, ignore_errors=True)

    def stop(self) -> None:
        try:
            self.connection.send(None)
            self.process.join(10.0)
        except (OSError, ValueError):
            pass
        self.kill()


def can_run(builder) -> bool:
    """A builder the worker can import: defined at module level outside ``__main__``."""
    return builder.__module__ != "__main__" and "<locals>" not in builder.__qualname__


@dataclass(frozen=True)
class _BuilderRef:
    """A builder by module name, module file and qualified name: the child imports
    modules that were loaded from a file under a name of their own (operator packages
    loaded by path, generated test modules) the same way, from their file."""
    module: str
    file: str | None
    qualname: str

    @classmethod
    def of(cls, builder) -> "_BuilderRef":
        code = getattr(builder, "__code__", None)
        return cls(builder.__module__, code.co_filename if code else None, builder.__qualname__)

    def resolve(self):
        module = sys.modules.get(self.module)
        if module is None:
            try:
                module = importlib.import_module(self.module)
            except ImportError:
                if self.file is None:
                    raise
                spec = importlib.util.spec_from_file_location(self.module, self.file)
                module = importlib.util.module_from_spec(spec)
                sys.modules[self.module] = module
                spec.loader.exec_module(module)
        return functools.reduce(getattr, self.qualname.split("."), module)


def launch_in_worker(backend, builder, static: dict, tensors: list, scalars: dict, compute: bool) -> dict:
    """Run ``backend``'s launch of ``builder`` in its worker; return the report fields.
    Raises what the launch raised in the worker (same type for ptogym's own errors)."""
    unique: dict[int, int] = {}
    shared, index = [], []
    for tensor in tensors:  # one shared copy per tensor object: aliased arguments stay aliased
        if id(tensor) not in unique:
            unique[id(tensor)] = len(shared)
            shared.append(tensor.clone())
        index.append(unique[id(tensor)])
    options = {"max_compute_elements": getattr(backend, "max_compute_elements", None),
               "keep_artifacts": backend.keep_artifacts, "verbose": backend.verbose,
               "cost_only_mode": backend.cost_only_mode, "full_build": backend.full_build}
    if backend.name not in _workers or not _workers[backend.name].process.is_alive():
        _workers[backend.name] = _Worker(backend.name)
    worker = _workers[backend.name]
    try:
        status, payload = worker.call((_BuilderRef.of(builder), static, shared, index, scalars, options),
                                      seconds_from_env(ENV_STALL_S, DEFAULT_STALL_S), getattr(builder, "__module__", ""))
    except WorkerStalled as stalled:
        from . import _pypto_runtime as rt

        _workers.pop(backend.name, None)
        raise rt.PyptoRunError(
            f"{backend.name}: kernel {getattr(builder, '__name__', builder)!r} made no progress ({stalled}; "
            f"pypto 0.2.0 waits for ever when one of its compile threads fails) and was stopped; "
            f"${ENV_STALL_S} sets the window") from None
    except BaseException:
        _workers.pop(backend.name, None)
        raise
    if status == "error":
        raise _rebuild_error(*payload)
    if payload["outputs_valid"]:
        for position, tensor in enumerate(tensors):
            tensor.copy_(shared[index[position]])
    return payload


def _rebuild_error(type_name: str, message: str) -> Exception:
    from . import _pypto_runtime as rt

    known = {cls.__name__: cls for cls in (OutputsNotComputed, BackendUnavailable, rt.PyptoRunError,
                                           ValueError, TypeError)}
    return known.get(type_name, RuntimeError)(message if type_name in known else f"{type_name}: {message}")


def _serve(connection, backend_name: str, parent_pid: int) -> None:
    """The child: launch requests one at a time until told to stop (None)."""
    os.setpgrp()  # Ctrl-C in a terminal reaches the parent only; it stops this group when it must
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent(parent_pid)
    import resource

    from . import _pypto_runtime as rt
    from . import get_backend

    backend = get_backend(backend_name)
    backend.isolated = False  # this process is the one that runs pypto
    backend.report_phase = lambda phase: connection.send(("phase", phase))
    try:
        while (request := connection.recv()) is not None:
            builder, static, shared, index, scalars, options = request
            for name, value in options.items():
                setattr(backend, name, value)
            try:
                backend.report_phase("building the kernel")
                report = backend.launch(builder.resolve(), static, [shared[i] for i in index], scalars)
                # ru_maxrss: KiB on Linux; this process and its reaped children (g++, cmake)
                report.extra["worker_peak_rss_bytes"] = 1024 * max(
                    resource.getrusage(who).ru_maxrss for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
                connection.send(("ok", asdict(report)))
            except Exception as error:
                connection.send(("error", (type(error).__name__, str(error))))
    except (EOFError, BrokenPipeError):  # the parent went away
        pass
    finally:
        rt.end_session()  # multiprocessing children skip atexit


@atexit.register
def stop_workers() -> None:
    """Stop every worker (at exit; ``ptogym bench`` after each case, to release the
    memory pypto keeps for every kernel it compiled)."""
    for worker in list(_workers.values()):
        worker.stop()
    _workers.clear()
