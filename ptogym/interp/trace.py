"""Record every PyPTO op result the interpreter produces, for ``ptogym bisect``.

``with recording() as ops:`` runs code and fills ``ops`` with one ``OpRecord`` per
op result (the op's public name, the kernel's file:line, the semantic label set by
``pypto.set_semantic_label`` and a copy of the result's valid data) made by the
thread that entered the block.  The hook in ``tensor.wrap`` tests one module global,
so nothing is paid when no thread records.
"""
from __future__ import annotations

import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass

from . import runtime
from .checks import _SKIP_PREFIXES

recorders: dict = {}  # thread id -> the list that thread's recording() fills; empty when none records


@dataclass
class OpRecord:
    index: int
    op: str  # public op name: add, mul, cast ...
    file: str
    line: int
    label: str | None  # pypto.set_semantic_label in force
    data: object  # torch.Tensor: a copy of the result's valid region

    @property
    def location(self) -> str:
        return f"{self.file}:{self.line}"


def record(result) -> None:
    """Append ``result`` (an op's Tensor) with the op and kernel line that made it, when
    this thread records."""
    recorder = recorders.get(threading.get_ident())
    if recorder is None:
        return
    frame, op = sys._getframe(1), "?"
    while frame is not None and frame.f_code.co_filename.startswith(_SKIP_PREFIXES):
        op = frame.f_code.co_name  # the outermost interpreter frame is the public op
        frame = frame.f_back
    file, line = (frame.f_code.co_filename, frame.f_lineno) if frame is not None else ("<unknown>", 0)
    recorder.append(OpRecord(len(recorder), op, file, line, runtime.current().semantic_label,
                             result.data.detach().clone()))


@contextmanager
def recording():
    """Record op results this thread makes inside the block into the yielded list (not
    nestable within a thread)."""
    thread = threading.get_ident()
    if thread in recorders:
        raise RuntimeError("ptogym.interp.trace.recording() is already active in this thread")
    recorders[thread] = []
    try:
        yield recorders[thread]
    finally:
        del recorders[thread]
