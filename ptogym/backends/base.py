"""What every backend provides; the ops call only this."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass
class LaunchReport:
    """What one kernel launch tells besides its outputs.

    outputs_valid is False when the backend ran the kernel but could not produce
    numbers (real pypto's cost model alone leaves outputs untouched).
    """

    backend: str
    wall_s: float
    outputs_valid: bool = True
    simulated_us: float | None = None
    tasks: int | None = None
    cores: int | None = None
    artifacts: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class BackendBase:
    """Builds kernels against ``self.pypto`` (cached per builder and static params)
    and launches them on torch tensors living on ``self.device``."""

    name = "base"

    def __init__(self):
        self._kernels: dict = {}
        self.last_report: LaunchReport | None = None

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
        if key not in self._kernels:
            self.check_available()
            self._kernels[key] = builder(self.pypto, **static)
        return self._kernels[key]

    def launch(self, builder: Callable, static: dict, tensors: list, scalars: dict | None = None) -> LaunchReport:
        """Build (cached) and run ``builder(pypto, **static)`` with ``tensors`` then ``scalars``."""
        kernel = self.compile(builder, **static)
        start = time.perf_counter()
        self._call(kernel, tensors, scalars or {})
        self.last_report = self._report(time.perf_counter() - start)
        return self.last_report

    def _call(self, kernel, tensors, scalars):
        kernel(*tensors, **scalars)

    def _report(self, wall_s: float) -> LaunchReport:
        return LaunchReport(backend=self.name, wall_s=wall_s)
