"""Record every PyPTO op result the interpreter produces, for ``ptogym bisect``.

``with recording() as ops:`` runs code and fills ``ops`` with one ``OpRecord`` per
op result (the op's public name, the kernel's file:line, the semantic label set by
``pypto.set_semantic_label``, the records of its tensor operands and a copy of the
result's valid data), and ``ops.writes`` with one ``WriteRecord`` per tile written
into memory (assemble, move, ``out[...] =``): which record it came from and which
storage it went to, made by the thread that entered the block.  Together they are the kernel's dataflow: which value fed which
op, and which values reached the outputs.  The hooks test one module global, so
nothing is paid when no thread records.
"""
from __future__ import annotations

import sys
import threading
import weakref
from contextlib import contextmanager
from dataclasses import dataclass

from . import runtime
from .checks import _SKIP_PREFIXES

recorders: dict = {}  # thread id -> the Trace that thread's recording() fills; empty when none records


@dataclass
class OpRecord:
    index: int
    op: str  # public op name: add, mul, cast ...
    file: str
    line: int
    label: str | None  # pypto.set_semantic_label in force
    data: object  # torch.Tensor: a copy of the result's valid region
    inputs: tuple = ()  # indices of the records whose results this op read

    @property
    def location(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass
class WriteRecord:
    index: int  # how many op results were recorded before it (its place in execution order)
    op: str  # assemble, move, __setitem__, element
    file: str
    line: int
    source: int | None  # index of the record written, None for a tile that is no op result (a view)
    storage: int  # data_ptr of the untyped storage written into


class Trace(list):
    """The OpRecords, in execution order, and the WriteRecords (``.writes``)."""

    def __init__(self):
        super().__init__()
        self.writes: list[WriteRecord] = []
        self._results: dict[int, tuple] = {}  # id(Tensor) -> (weakref, record index)
        self._pending = None  # (record, Tensor) whose data is copied once its op has finished
        self.stands_for: dict[int, int] = {}  # storage of an aliased parameter's private copy -> the caller's

    def index_of(self, tensor) -> int | None:
        entry = self._results.get(id(tensor))
        return entry[1] if entry is not None and entry[0]() is tensor else None

    def settle(self) -> None:
        """Copy the data of the last result: its op may adjust it after wrapping (dtype)."""
        if self._pending is not None:
            record, tensor = self._pending
            record.data = tensor.data.detach().clone()
            self._pending = None


def _user_site():
    """(public op name, its frame, the user's file, line) of the current interpreter call."""
    frame, op, op_frame = sys._getframe(2), "?", None
    while frame is not None and frame.f_code.co_filename.startswith(_SKIP_PREFIXES):
        op, op_frame = frame.f_code.co_name, frame  # the outermost interpreter frame is the public op
        frame = frame.f_back
    file, line = (frame.f_code.co_filename, frame.f_lineno) if frame is not None else ("<unknown>", 0)
    return op, op_frame, file, line


def _operands(frame) -> list:
    """The values of a call's parameters, lists and tuples flattened."""
    if frame is None:
        return []
    code = frame.f_code
    count = code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & 0x04)  # + *args
    values, found = [frame.f_locals.get(name) for name in code.co_varnames[:count]], []
    while values:
        value = values.pop()
        if isinstance(value, (list, tuple)):
            values.extend(value)
        else:
            found.append(value)
    return found


def record(result) -> None:
    """Append ``result`` (an op's Tensor) with the op, kernel line and operands that made it."""
    trace = recorders.get(threading.get_ident())
    if trace is None:  # another thread records
        return
    op, op_frame, file, line = _user_site()
    trace.settle()
    inputs = sorted({i for value in _operands(op_frame) if value is not result
                     for i in [trace.index_of(value)] if i is not None})
    entry = OpRecord(len(trace), op, file, line, runtime.current().semantic_label, None, tuple(inputs))
    trace.append(entry)
    trace._results[id(result)] = (weakref.ref(result), entry.index)
    trace._pending = (entry, result)


def note_write(source, destination, op: str) -> None:
    """A tile ``source`` written into ``destination``'s memory."""
    trace = recorders.get(threading.get_ident())
    if trace is None:  # another thread records
        return
    _, _, file, line = _user_site()
    trace.settle()
    storage = destination.data.untyped_storage().data_ptr()
    trace.writes.append(WriteRecord(len(trace), op, file, line, trace.index_of(source),
                                    trace.stands_for.get(storage, storage)))


def note_private_copy(copy, original) -> None:
    """``copy`` is the private buffer of a parameter over ``original``'s memory (aliasing.py):
    writes into it are writes into the caller's tensor, which it is copied back into."""
    trace = recorders.get(threading.get_ident())
    if trace is not None:
        trace.stands_for[copy.untyped_storage().data_ptr()] = original.untyped_storage().data_ptr()


@contextmanager
def recording():
    """Record op results this thread makes inside the block into the yielded Trace (not
    nestable within a thread)."""
    thread = threading.get_ident()
    if thread in recorders:
        raise RuntimeError("ptogym.interp.trace.recording() is already active in this thread")
    recorders[thread] = Trace()
    try:
        yield recorders[thread]
    finally:
        recorders[thread].settle()
        recorders[thread]._results.clear()
        del recorders[thread]
