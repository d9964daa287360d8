"""What every backend provides; the ops call only this."""
from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator


@dataclass
class LaunchReport:
    """What one kernel launch tells besides its outputs.

    outputs_valid is False when the backend ran the kernel but could not produce
    numbers (real pypto's cost model alone leaves outputs untouched).  Such a report
    only ever leaves ``BackendBase.launch`` inside ``backend.cost_only()``; anywhere
    else the launch raises ``OutputsNotComputed`` instead.
    """

    backend: str
    wall_s: float
    outputs_valid: bool = True
    simulated_us: float | None = None
    tasks: int | None = None
    cores: int | None = None
    artifacts: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class OutputsNotComputed(RuntimeError):
    """The backend could run the kernel but not compute its outputs (a cost-only
    launch outside ``backend.cost_only()``): the caller's tensors are unchanged."""


class BackendBase:
    """Builds kernels against ``self.pypto`` (cached per builder and static params)
    and launches them on torch tensors living on ``self.device``."""

    name = "base"

    def __init__(self):
        self._kernels: dict = {}
        self._compile_lock = threading.Lock()  # concurrent first calls build a kernel once
        self.last_report: LaunchReport | None = None
        self.cost_only_mode = False

    @contextlib.contextmanager
    def cost_only(self) -> Iterator[None]:
        """Launches inside may return reports with ``outputs_valid=False`` (timings
        only, outputs untouched or garbage) instead of raising; backends that can skip
        computing the numbers do so."""
        previous, self.cost_only_mode = self.cost_only_mode, True
        try:
            yield
        finally:
            self.cost_only_mode = previous

    @property
    def pypto(self):  # the namespace kernels are built against
        raise NotImplementedError

    @property
    def device(self):
        import torch

        return torch.device("cpu")

    def check_available(self) -> None:
        """Raise ``BackendUnavailable`` with the reason when this backend cannot run."""

    def compile(self, builder: Callable, **static) -> Callable:
        key = (builder.__module__, builder.__qualname__, tuple(sorted(static.items())))
        kernel = self._kernels.get(key)
        if kernel is None:
            with self._compile_lock:
                kernel = self._kernels.get(key)
                if kernel is None:
                    self.check_available()
                    kernel = self._kernels[key] = builder(self.pypto, **static)
        return kernel

    def launch(self, builder: Callable, static: dict, tensors: list, scalars: dict | None = None) -> LaunchReport:
        """Build (cached) and run ``builder(pypto, **static)`` with ``tensors`` then ``scalars``;
        on meta tensors nothing is built or run (shape-only results, every backend alike).

        Raises ``OutputsNotComputed`` - before compiling where the backend knows in
        advance - when the outputs would not be computed, unless in ``cost_only()``.
        """
        if any(t.device.type == "meta" for t in tensors if hasattr(t, "device")):
            # meta tensors carry shapes only: the outputs the caller allocated are the result
            return LaunchReport(backend=self.name, wall_s=0.0, extra={"compute": "meta tensors: shapes only"})
        if not self.cost_only_mode:
            self._check_computes_outputs(tensors)
        kernel = self.compile(builder, **static)
        start = time.perf_counter()
        self._call(kernel, tensors, scalars or {})
        report = self.last_report = self._report(time.perf_counter() - start)
        if not report.outputs_valid and not self.cost_only_mode:
            raise OutputsNotComputed(f"{self.name}: the kernel ran but its outputs were not computed "
                                     f"({report.extra.get('compute', 'no numbers')}); "
                                     "outputs_valid=False never reaches a caller as a result")
        return report

    def _check_computes_outputs(self, tensors: list) -> None:
        """Raise ``OutputsNotComputed`` when a launch on *tensors* would not compute its outputs."""

    def _call(self, kernel, tensors, scalars):
        kernel(*tensors, **scalars)

    def _report(self, wall_s: float) -> LaunchReport:
        return LaunchReport(backend=self.name, wall_s=wall_s)
