"""Which kernel each launch of a model step belongs to, and what it cost.

The model hands every operator a ``KernelClock`` as its backend.  It forwards each
launch to the backend that computes the numbers and records the launch under the
label of the operator call that made it (``with clock.kernel("linear o_proj")``).
Given a ``timing`` backend (pypto-sim) it also launches the same kernel there, on
copies of the tensors taken before the numeric launch and inside
``timing.cost_only()``: the cost model times the kernel on the very inputs the run
computed (routing, slots, lengths), while the numbers still come from the numeric
backend - pypto-sim compiles every launch, which is too slow to produce a model's
numbers.  Timing is switched on per step and layer (``clock.timed(...)``), so one
layer of one prefill and one decode step costs compiles, not the whole run.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field


@dataclass
class KernelRecord:
    """One operator call of a timed layer: its launches' simulated µs summed (None: not timed)."""

    phase: str
    layer: int
    kernel: str
    launches: int = 0
    simulated_us: float | None = None
    tasks: int | None = None
    error: str | None = None
    extra: dict = field(default_factory=dict)


class KernelClock:
    """A backend for the operators (``name`` and ``launch``, all they use)."""

    def __init__(self, backend, timing=None):
        self.backend = backend
        self.timing = timing
        self.records: list[KernelRecord] = []
        self.time_layers: set[int] = set()  # layers to time, in the first step of each phase
        self.on_timed = None  # called with (record, report or None) after each timed launch: progress lines
        self._where: tuple[str, int] | None = None  # (phase, layer) being timed
        self._current: KernelRecord | None = None

    @property
    def name(self) -> str:
        return self.backend.name

    @contextlib.contextmanager
    def timed(self, phase: str, layer: int):
        """Launches inside belong to layer ``layer`` of step ``phase``; they are timed when
        the layer is in ``time_layers`` and the phase's first step has not been timed yet."""
        done = any(r.phase == phase and r.layer == layer for r in self.records)
        enabled = self.timing is not None and layer in self.time_layers and not done
        previous, self._where = self._where, ((phase, layer) if enabled else None)
        try:
            yield
        finally:
            self._where = previous

    @contextlib.contextmanager
    def kernel(self, label: str, **extra):
        """Launches inside are the operator call ``label`` (e.g. ``"qwen3_pre_attn"``)."""
        if self._where is None:
            yield None
            return
        record = self._current = KernelRecord(*self._where, label, extra=dict(extra))
        self.records.append(record)
        try:
            yield record
        except BaseException as error:  # Ctrl-C while its launches ran: the partial sum is no kernel time
            if record.error is None:
                record.error, record.simulated_us = f"stopped by {type(error).__name__}", None
            raise
        finally:
            self._current = None

    def launch(self, builder, static: dict, tensors: list, scalars: dict | None = None):
        record = self._current
        if record is not None and record.error is None:
            self._time(record, builder, static, tensors, scalars)
        return self.backend.launch(builder, static, tensors, scalars)

    def _time(self, record: KernelRecord, builder, static, tensors, scalars) -> None:
        copies = [t.clone() if hasattr(t, "clone") else t for t in tensors]
        try:
            with self.timing.cost_only():
                report = self.timing.launch(builder, static, copies, scalars)
        except Exception as error:  # a kernel the timing backend cannot compile: the table says so
            record.error = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"[:300]
            record.simulated_us = None
            if self.on_timed:
                self.on_timed(record, None)
            return
        record.launches += 1
        if report.simulated_us is not None:
            record.simulated_us = (record.simulated_us or 0.0) + report.simulated_us
        if report.tasks is not None:
            record.tasks = (record.tasks or 0) + report.tasks
        if self.on_timed:
            self.on_timed(record, report)
