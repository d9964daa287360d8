"""Where trials run.  Both engines run the same ``trial.execute`` (a fresh process per
trial, its timeout and memory cap); they differ only in who calls it.

* ``local``: ``workers`` threads on this machine, each waiting on one trial process;
  ``workers`` is at most the cores and at most what the memory available holds at
  ``memory_bytes`` a trial (``check_workers``).
* ``ray``: one Ray task per trial with ``num_cpus=1`` and ``memory=memory_bytes``
  resources, so Ray places trials where a core and the memory are free; ``ray.init()``
  starts a local runtime (``num_cpus=workers``) or joins ``address``.  The records come
  back to the driver, which alone writes the database.  Ray is the optional extra
  ``ptogym[cluster]``.
"""
from __future__ import annotations

import concurrent.futures
import os
from pathlib import Path

from . import trial
from .trial import TrialRequest, execute

ENGINES = ("local", "ray")


def available_memory_bytes() -> int | None:
    """MemAvailable of /proc/meminfo (None where there is none)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def check_workers(workers: int, memory_bytes: int) -> str | None:
    """Why ``workers`` local trials of ``memory_bytes`` each cannot run here, or None."""
    cores = os.cpu_count() or 1
    if workers < 1:
        return f"--workers: must be >= 1, got {workers}"
    if workers > cores:
        return f"--workers: {workers} > the {cores} cores of this machine (a trial keeps a core busy)"
    available = available_memory_bytes()
    if available is not None and workers * memory_bytes > available:
        return (f"--workers: {workers} trials x {memory_bytes / 2**30:.1f} GB (--memory-gb) > the "
                f"{available / 2**30:.1f} GB available; use fewer workers or a lower cap")
    return None


class LocalEngine:
    name = "local"

    def __init__(self, workers: int):
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ptogym-tune")

    def submit(self, request: TrialRequest) -> concurrent.futures.Future:
        return self.pool.submit(execute, request)

    def close(self, interrupted: bool = False) -> None:
        """Wait for the trials in flight; ``interrupted``: stop them first."""
        if interrupted:
            trial.STOP.set()
        try:
            self.pool.shutdown(wait=True, cancel_futures=True)
        finally:
            trial.STOP.clear()


class RayEngine:
    """Ray tasks; ``submit`` returns a concurrent Future resolved from the ObjectRef."""

    name = "ray"

    def __init__(self, workers: int, memory_bytes: int, address: str | None = None):
        try:
            import ray
        except ImportError:
            raise RuntimeError("--engine ray needs Ray: pip install 'ptogym[cluster]'") from None
        self.ray = ray
        self.started = not ray.is_initialized()
        if self.started:
            paths = [path for path in os.environ.get("PYTHONPATH", "").split(os.pathsep) if path]
            package_root = str(Path(__file__).resolve().parents[2])
            runtime_env = {"env_vars": {"PYTHONPATH": os.pathsep.join(dict.fromkeys([package_root, *paths]))}}
            if address:
                ray.init(address=address, runtime_env=runtime_env, log_to_driver=False)
            else:
                ray.init(num_cpus=workers, runtime_env=runtime_env, include_dashboard=False, log_to_driver=False)
        self.remote = ray.remote(num_cpus=1, memory=memory_bytes, max_retries=0)(execute)
        self.references: list = []

    def submit(self, request: TrialRequest) -> concurrent.futures.Future:
        reference = self.remote.remote(request)
        self.references.append(reference)
        return reference.future()

    def close(self, interrupted: bool = False) -> None:
        """``interrupted``: cancel the tasks in flight (their trial processes die with
        their Ray workers).  A runtime this engine started is shut down."""
        if interrupted:
            for reference in self.references:
                self.ray.cancel(reference, force=True)
        if self.started:
            self.ray.shutdown()


def open_engine(name: str, workers: int, memory_bytes: int, address: str | None = None):
    if name == "local":
        return LocalEngine(workers)
    if name == "ray":
        return RayEngine(workers, memory_bytes, address)
    raise ValueError(f"--engine: {name!r} is not one of {', '.join(ENGINES)}")
