"""The sanitizer: races between loop iterations and reads of unwritten memory (docs/sanitizer.md).

A PyPTO kernel becomes a task graph.  pypto orders two accesses to one memory only when
they lie in one *segment* (one loop iteration's straight-line code, or code between
loops), when a ``submit_before_loop`` barrier lies between them, or when a read follows
the last write of the same tensor (pypto stitches each consumer to the last producer of
the tensor it reads).  Everything else may run at once on a device, so

* S-RACE-01: two segments write one element, different values, the later one not having read
  it through the tensor it writes (a read-modify-write chain is ordered, a second plain write
  is not, a write of the value already there is harmless);
* S-RACE-02: an element written through one parameter and read through another over the
  same caller memory, or read through one and written through another in a later segment;
* S-UNINIT-01: a read of an element of a ``pypto.tensor`` workspace, or of an output (a
  parameter whose first access is a write), that nothing has written yet.

Shadow state lives per *storage* (one caller memory, all parameters over it; or one
workspace): the last writer of every unit of it, and for storages several parameters
share, per slot the last two segments that read it since that write; int32 ``segment << 4 | slot``
stamps for writers, segments for readers.  A unit
is a run of bytes every access so far covers whole (an access that splits one refines
them all), so a kernel walking rows keeps one entry per row.  An access takes the least and
the greatest stamp of the units it covers first: where one stamp covers them all (a workspace
or a row written whole, the common case) the checks are comparisons of Python ints; else they
are a handful of torch ops over those units, with no Python loop over elements.

``sanitize()`` (or ``PTOGYM_SANITIZE=1`` / ``=warn``) turns it on; the findings of a
kernel call are collected while it runs and reported when it returns: the first of them
raises ``ConstraintViolation`` naming the count of all (``mode="warn"``: one
``ConstraintWarning`` per finding, counted as downgraded checks: no plain verdict).
"""
from __future__ import annotations

import contextlib
import os
import threading
from dataclasses import dataclass, field

import torch

from . import checks, runtime
from .shadow import Box, UnitShadow, assign, box_of, indices, rows_box, scaled, view

MODES = ("error", "warn")
_SLOT_BITS = 4
_SLOT_MASK = (1 << _SLOT_BITS) - 1
_NEVER = -1


def mode_from_env(environ=os.environ) -> str | None:
    """``PTOGYM_SANITIZE``: unset/""/0 off, 1/error errors, warn warnings; ValueError naming it else."""
    text = environ.get("PTOGYM_SANITIZE", "").strip().lower()
    if text in ("", "0"):
        return None
    if text in ("1", "error"):
        return "error"
    if text == "warn":
        return "warn"
    raise ValueError(f"PTOGYM_SANITIZE={text!r}: use 1 (or error), warn, or 0")


class _ThreadState(threading.local):
    mode = None  # set per thread by sanitize(); None defers to PTOGYM_SANITIZE
    findings = None  # the list sanitize() yields, filled by the kernels this thread runs


_state = _ThreadState()


def active_mode() -> str | None:
    """The sanitize mode of this thread: sanitize()'s, else PTOGYM_SANITIZE's (None: off)."""
    if _state.mode is not None:
        return _state.mode or None  # "" is sanitize(False): off whatever the variable says
    return mode_from_env()


@contextlib.contextmanager
def sanitize(mode: str | bool = "error"):
    """Sanitize the kernels this thread runs inside the block; yields the list of their
    ``Finding``s.  ``mode``: "error" (the default: a kernel call with findings raises
    ConstraintViolation), "warn" (warnings), False (off inside the block)."""
    if mode is True:
        mode = "error"
    if mode is not False and mode not in MODES:
        raise ValueError(f"sanitize(mode={mode!r}): use one of {', '.join(MODES)} or False")
    saved = _state.mode, _state.findings
    _state.mode, _state.findings = mode or "", []
    try:
        yield _state.findings
    finally:
        _state.mode, _state.findings = saved


@dataclass
class Access:
    """One side of a finding: where the kernel made it, through which tensor, in which iteration."""

    location: str  # kernel file:line
    tensor: str  # parameter or pypto.tensor name
    iteration: str  # the loop indices of its segment, e.g. "LOOP_ROWS row=8", or "outside any loop"
    kind: str  # "read", "write" or "allocation"


@dataclass
class Finding:
    """One sanitizer finding of a kernel call: the id, the two accesses (file:line, tensor,
    loop indices), the first conflicting element and how many elements conflict in all."""

    check_id: str
    first: Access  # the earlier access (S-UNINIT-01: where the memory came from)
    second: Access  # the access that conflicts with it
    element: list  # the first conflicting element, an index into the second access's tensor
    count: int = 0  # conflicting elements, over every occurrence of this pair of sites
    occurrences: int = 0

    def describe(self) -> str:
        what = {"S-RACE-01": "write/write race", "S-RACE-02": "read/write race through aliased memory",
                "S-UNINIT-01": "read of unwritten memory"}[self.check_id]
        first, second = self.first, self.second
        if self.check_id == "S-UNINIT-01":
            origin = "allocated" if first.kind == "allocation" else "the kernel's output, passed in"
            return (f"{what}: {second.tensor}{self.element} read at {second.location} ({second.iteration}) before "
                    f"anything wrote it ({first.tensor} {origin} at {first.location}); {self.count} element(s) in "
                    f"all, {self.occurrences} read(s)")
        return (f"{what}: {second.tensor}{self.element} {second.kind} at {second.location} ({second.iteration}) "
                f"conflicts with the {first.kind} through {first.tensor} at {first.location} ({first.iteration}); "
                f"{self.count} conflicting element(s) in all, {self.occurrences} access(es)")


def _stamp(segment: int, slot: int) -> int:
    return segment << _SLOT_BITS | slot


class Storage(UnitShadow):
    """Shadow state of one memory, per unit: ``writer`` (last write) and, where several parameters
    share it, ``readers``: per slot the last segment that read the unit since that write and the
    latest one before it (``_NEVER`` for none)."""

    ARRAYS = ("writer", "readers")

    def __init__(self, nbytes: int, device, kind: str, site: str, iteration: str):
        super().__init__(nbytes, device)
        self.kind, self.site, self.iteration = kind, site, iteration
        self.names: list[str] = []
        self.output: bool | None = None  # parameters: whether the first access was a write
        self.log: list = []  # (segment, slot, kind, location, Box): where past accesses were made (reports)
        if kind == "local":  # a workspace is checked from the start: nothing is written yet
            self.writer = self.new_array(_NEVER)

    @property
    def aliased(self) -> bool:
        return len(self.names) > 1

    def ensure_writer(self) -> torch.Tensor:
        if self.writer is None:
            self.writer = self.new_array(_NEVER)
        return self.writer


@dataclass
class Place:
    """A parameter's or workspace's place in its Storage (``StorageRecord.shadow``)."""

    storage: Storage
    slot: int
    base: int  # first byte in the storage
    element_size: int
    name: str

    def box(self, shape, region) -> Box | None:
        """The bytes of ``region`` (absolute slices of a tensor of ``shape``), None if empty."""
        return box_of(self.base, self.element_size, shape, region)

    def element_of(self, unit_index: int, shape) -> list:
        """The index, in this tensor of ``shape``, of the first element of a unit."""
        offset = max(0, (unit_index * self.storage.unit - self.base) // self.element_size)
        index = []
        for n in reversed(shape):
            index.append(offset % n if n else 0)
            offset //= max(n, 1)
        return index[::-1]


@dataclass
class Sanitizer:
    """One kernel call's sanitizer: its segments and the findings so far."""

    mode: str
    segment: int = -1
    barrier: int = 0  # the first segment after the last submit_before_loop barrier
    fresh: bool = True  # a loop boundary was crossed: the next access starts a segment
    path: list = field(default_factory=list)  # (loop name, index label, value) of the enclosing iterations
    iterations: list = field(default_factory=list)  # per segment: its loop indices, described
    reads: dict = field(default_factory=dict)  # (id(storage), slot) -> unit selections read in this segment
    storages: list = field(default_factory=list)
    findings: dict = field(default_factory=dict)
    preds: dict = field(default_factory=dict)  # segment -> the earlier segments it read values or memory of

    # --- segments ------------------------------------------------------------------
    def enter_iteration(self, loop: str, label: str, value: int) -> None:
        self.path.append((loop, label, value))
        self.fresh = True

    def leave_iteration(self) -> None:
        self.path.pop()
        self.fresh = True

    def submit_barrier(self) -> None:
        """``submit_before_loop``: everything before is done before anything after starts."""
        self.barrier = self.segment + 1
        self.fresh = True

    def _current(self) -> int:
        if self.fresh:
            self.segment += 1
            self.fresh = False
            self.reads.clear()
            self.iterations.append(self.where())
        return self.segment

    def where(self) -> str:
        """The loop indices of the code running now."""
        return ", ".join(f"{loop} {label}={value}" for loop, label, value in self.path) or "outside any loop"

    def depend(self, tag) -> None:
        """The running segment reads a value computed by the segment ``tag`` names (``produced()``)."""
        token, segment = tag
        if token == id(self):
            current = self._current()
            if segment != current:
                self.preds.setdefault(current, set()).add(segment)

    def _follows(self, earlier: int, later: int) -> bool:
        """Whether segment ``later`` read, directly or through other segments, what ``earlier`` computed."""
        pending, seen = [later], {later}
        while pending:
            for segment in self.preds.get(pending.pop(), ()):
                if segment == earlier:
                    return True
                if segment > earlier and segment not in seen:
                    seen.add(segment)
                    pending.append(segment)
        return False

    # --- storages --------------------------------------------------------------------
    def bind_parameters(self, names: list, args: list, records: list) -> None:
        """Give every parameter its Place: those over one caller memory share a Storage."""
        from .aliasing import memory_groups

        site = checks.user_location()
        for low, high, members in memory_groups(args):
            storage = Storage(high - low, args[members[0][1]].device, "param", site, "outside any loop")
            self.storages.append(storage)
            for start, index in members:
                slot = min(len(storage.names), _SLOT_MASK)
                storage.names.append(names[index])
                records[index].shadow = Place(storage, slot, start - low, args[index].element_size(), names[index])

    def bind_workspace(self, record, data: torch.Tensor) -> None:
        storage = Storage(data.numel() * data.element_size(), data.device, "local", checks.user_location(),
                          self.where())
        storage.names.append(record.name)
        self.storages.append(storage)
        record.shadow = Place(storage, 0, 0, data.element_size(), record.name)

    # --- accesses --------------------------------------------------------------------
    def _selection(self, place: Place, box: Box):
        storage = place.storage
        selection, factor = storage.select(box)
        if factor > 1:  # the read selections of this segment, in the new units
            for key, selections in self.reads.items():
                if key[0] == id(storage):
                    selections[:] = [scaled(s, factor) for s in selections]
        return selection

    def read(self, record, region) -> None:
        place = record.shadow
        storage = place.storage
        if storage.writer is None and not storage.aliased and storage.output is not None:
            return  # an input nothing writes, already accessed: nothing to check or record
        box = place.box(record.shape, region)
        if box is None:
            return
        if storage.output is None:
            storage.output = False
        if storage.writer is None and not storage.aliased:
            return  # an input nothing writes: nothing to check
        segment = self._current()
        selection = self._selection(place, box)
        writer = view(storage.ensure_writer(), selection)
        low, high = _span(writer)
        if low < 0 and (storage.kind == "local" or storage.output):
            self._uninitialised(record, place, selection, writer < 0)
        if storage.aliased:
            if high >= _stamp(self.barrier, 0) and not (low == high and low & _SLOT_MASK == place.slot):
                foreign = (writer >= _stamp(self.barrier, 0)) & ((writer & _SLOT_MASK) != place.slot)
                if bool(foreign.any()):
                    self._conflict("S-RACE-02", record, place, selection, foreign, writer, "read", "write")
            self._record_read(storage, selection, place.slot, segment)
            storage.log.append((segment, place.slot, "read", checks.user_location(), box))
        if low == high:  # one writer (the common case: a workspace or a row written whole)
            if low >= 0 and low & _SLOT_MASK == place.slot and low >> _SLOT_BITS != segment:
                self.preds.setdefault(segment, set()).add(low >> _SLOT_BITS)
        elif high >= 0:
            ordered = (writer >= 0) & ((writer & _SLOT_MASK) == place.slot) & ((writer >> _SLOT_BITS) != segment)
            if bool(ordered.any()):  # a read of what earlier segments wrote: this one follows them
                self.preds.setdefault(segment, set()).update((writer[ordered] >> _SLOT_BITS).unique().tolist())
        self.reads.setdefault((id(storage), place.slot), []).append(selection)

    def write(self, record, region=None, rows: torch.Tensor | None = None, same=None) -> None:
        """A write of ``region`` (absolute slices), or of ``rows`` of a [-1, last dim] view.
        ``same()``, called only when an earlier segment's write conflicts: the elements where the
        value written equals the value there (another write of the same value is no race: the
        result does not depend on their order)."""
        place = record.shadow
        if rows is not None:
            box = rows_box(place.base, record.shape[-1] * place.element_size, rows)
        else:
            box = place.box(record.shape, region)
        if box is None:
            return
        storage = place.storage
        if storage.output is None:
            storage.output = True
        segment = self._current()
        selection = self._selection(place, box)
        writer = view(storage.ensure_writer(), selection)
        low, high = _span(writer)
        if high >= _stamp(self.barrier, 0) and not (low == high and self._ordered_after(low, place, selection)):
            earlier = (writer >= _stamp(self.barrier, 0)) & ((writer >> _SLOT_BITS) != segment)
            if bool(earlier.any()):
                earlier = earlier.reshape(-1) & ~self._read_here(storage, place.slot, selection, writer.reshape(-1))
            if same is not None and bool(earlier.any()):
                earlier &= ~_per_unit(same(), storage.unit, place.element_size, earlier.numel())
            if bool(earlier.any()):  # an earlier writer this segment follows through values it read is ordered
                writers = writer.reshape(-1) >> _SLOT_BITS
                for other in (writers[earlier]).unique().tolist():
                    if self._follows(other, segment):
                        earlier &= writers != other
            if bool(earlier.any()):
                self._conflict("S-RACE-01", record, place, selection, earlier, writer, "write", "write")
        if storage.readers is not None:
            self._check_readers(record, place, selection, segment)
        assign(storage.writer, selection, _stamp(segment, place.slot))
        storage.log.append((segment, place.slot, "write", checks.user_location(), box))

    @staticmethod
    def _record_read(storage: Storage, selection, slot: int, segment: int) -> None:
        """Segment ``segment`` reads ``selection`` through ``slot``: it becomes those units' last
        reader through that slot, the one it replaces their latest reader before it."""
        if storage.readers is None:
            storage.readers = storage.new_array(_NEVER, columns=2 * (min(len(storage.names), _SLOT_MASK + 1)))
        rows = view(storage.readers, selection)
        last, before = rows[..., 2 * slot], rows[..., 2 * slot + 1]
        low, high = _span(last)
        if low == high == segment:
            return
        if low == high:
            before.fill_(low)
        else:
            before.copy_(torch.where(last != segment, last, before))
        last.fill_(segment)
        if isinstance(selection, torch.Tensor):  # rows is a copy there
            assign(storage.readers, selection, rows)

    def _check_readers(self, record, place: Place, selection, segment: int) -> None:
        """A write through ``place`` after reads of the same units through other parameters since
        their last write: each read in another segment after the barrier is S-RACE-02.  Per slot the
        last reader and the latest one before it are known, so the latest read in another segment
        than this one is exact whichever slot read first.  The units' readers then start afresh."""
        storage = place.storage
        rows = view(storage.readers, selection)
        latest = _span(rows)[1]
        if latest < 0:
            return  # not read since the last write
        if latest >= self.barrier:
            for slot in range(rows.shape[-1] // 2):
                if slot == place.slot:
                    continue
                last, before = rows[..., 2 * slot], rows[..., 2 * slot + 1]
                low, high = _span(last)
                if high < self.barrier:
                    continue
                if low == high == segment:
                    if _span(before)[1] < self.barrier:
                        continue
                    reader = before
                else:
                    reader = torch.where(last == segment, before, last)
                foreign = reader >= self.barrier
                if bool(foreign.any()):
                    self._conflict("S-RACE-02", record, place, selection, foreign, reader << _SLOT_BITS | slot,
                                   "write", "read")
        assign(storage.readers, selection, _NEVER)

    def _ordered_after(self, stamp: int, place: Place, selection) -> bool:
        """Whether a write of ``selection`` through ``place`` is ordered after the one earlier write
        ``stamp`` of all of it: in this segment, or read whole here through the same tensor
        (read-modify-write), or a segment this one follows through values it read."""
        segment = stamp >> _SLOT_BITS
        if segment == self.segment:
            return True
        if stamp & _SLOT_MASK == place.slot and any(
                _covers(read, selection) for read in self.reads.get((id(place.storage), place.slot), ())):
            return True
        return self._follows(segment, self.segment)

    def _read_here(self, storage: Storage, slot: int, selection, writer: torch.Tensor) -> torch.Tensor:
        """Units this segment read through ``slot`` that ``slot`` wrote last: a
        read-modify-write, which pypto orders after the earlier write."""
        mask = torch.zeros_like(writer, dtype=torch.bool)
        read = self.reads.get((id(storage), slot))
        if not read:
            return mask
        units = indices(selection, writer.device)
        for earlier in read:
            if isinstance(earlier, slice):
                mask |= (units >= earlier.start) & (units < earlier.stop)
            else:
                mask |= torch.isin(units, indices(earlier, units.device))
        return mask & ((writer & _SLOT_MASK) == slot)

    # --- findings --------------------------------------------------------------------
    def _uninitialised(self, record, place: Place, selection, unwritten: torch.Tensor) -> None:
        storage = place.storage
        units = indices(selection, unwritten.device)[unwritten.reshape(-1)]
        origin = Access(storage.site, storage.names[0], storage.iteration,
                        "allocation" if storage.kind == "local" else "argument")
        here = Access(checks.user_location(), place.name, self.iterations[self.segment], "read")
        self._note("S-UNINIT-01", origin, here, place.element_of(int(units.min()), record.shape),
                   self._elements(units.numel(), place))

    def _conflict(self, check_id: str, record, place: Place, selection, mask: torch.Tensor, stamps: torch.Tensor,
                  kind: str, earlier_kind: str) -> None:
        storage = place.storage
        mask = mask.reshape(-1)
        units = indices(selection, mask.device)[mask]
        first = int(units.argmin())
        unit, stamp = int(units[first]), int(stamps.reshape(-1)[mask][first])
        segment, slot = stamp >> _SLOT_BITS, stamp & _SLOT_MASK
        location = "<unknown>"
        for seg, s, what, where, box in reversed(storage.log):  # the last write, or the first read, of that segment
            if seg < segment or (location != "<unknown>" and earlier_kind == "write"):
                break
            if seg == segment and s == slot and what == earlier_kind and box.contains(storage.unit, unit):
                location = where
        earlier = Access(location, storage.names[slot], self.iterations[segment], earlier_kind)
        here = Access(checks.user_location(), place.name, self.iterations[self.segment], kind)
        self._note(check_id, earlier, here, place.element_of(unit, record.shape), self._elements(units.numel(), place))

    @staticmethod
    def _elements(units: int, place: Place) -> int:
        return max(1, units * place.storage.unit // place.element_size)

    def _note(self, check_id: str, first: Access, second: Access, element: list, count: int) -> None:
        key = (check_id, first.location, second.location, first.tensor, second.tensor)
        finding = self.findings.get(key)
        if finding is None:
            finding = self.findings[key] = Finding(check_id, first, second, element)
        finding.count += count
        finding.occurrences += 1

    def finish(self) -> None:
        """Report this call's findings: raise on the first (mode error) or warn on each."""
        findings = list(self.findings.values())
        if _state.findings is not None:
            _state.findings.extend(findings)
        if not findings:
            return
        if self.mode == "warn":
            for finding in findings:
                checks.downgrade(checks.ConstraintViolation(finding.check_id, finding.describe(),
                                                            finding.second.location))
            return
        first = findings[0]
        more = "" if len(findings) == 1 else "; also " + "; ".join(
            f"[{f.check_id}] {f.second.location}: {f.describe()}" for f in findings[1:])
        checks.violation(first.check_id, first.describe() + more, first.second.location)

    def shadow_bytes(self) -> int:
        return sum(storage.shadow_bytes() for storage in self.storages)


_LISTED = 64  # up to this many entries, Python's min/max of tolist() is faster than torch's aminmax()


def _span(stamps: torch.Tensor) -> tuple[int, int]:
    """The least and the greatest stamp among a shadow array's entries, as Python ints.  Where they
    are equal, every check of an access is a comparison of ints: no torch op, whose dispatch (a few
    µs each, about 15 per access) is what a small access costs."""
    if stamps.numel() <= _LISTED:
        values = stamps.reshape(-1).tolist()
        return min(values), max(values)
    low, high = stamps.aminmax()
    return int(low), int(high)


def _covers(outer, inner) -> bool:
    """Whether the units of selection ``outer`` include all of ``inner``'s (False where that takes
    more than comparing two slices: the caller then checks unit by unit)."""
    return (isinstance(outer, slice) and isinstance(inner, slice)
            and outer.start <= inner.start and inner.stop <= outer.stop)


def _per_unit(elements: torch.Tensor, unit: int, element_size: int, units: int) -> torch.Tensor:
    """Per unit of a selection, whether ``elements`` (a bool mask over the region, row-major) holds
    for all of its elements; all False where units are not whole elements."""
    if unit % element_size or elements.numel() * element_size != units * unit:
        return torch.zeros(units, dtype=torch.bool, device=elements.device)
    return elements.reshape(units, unit // element_size).all(1)


active = 0  # kernel calls being sanitized now, in any thread (op results are tagged only then)
_active_lock = threading.Lock()


def start(run: runtime.KernelRun) -> None:
    """Attach a Sanitizer to a kernel call when this thread sanitizes."""
    global active
    mode = active_mode()
    run.sanitizer = Sanitizer(mode) if mode else None
    if run.sanitizer is not None:
        with _active_lock:
            active += 1


def stop(run: runtime.KernelRun) -> None:
    global active
    if run.sanitizer is not None:
        with _active_lock:
            active -= 1


def produced():
    """The tag of an op result computed now: the running sanitizer and segment (None when this
    thread's kernel is not sanitized)."""
    watch = runtime.current().sanitizer
    return None if watch is None else (id(watch), watch._current())


def poison(data: torch.Tensor) -> None:
    """Fill an uninitialised workspace with a value no kernel computes by accident: NaN for
    floats (as always), the type's minimum for integers, True for bools."""
    if data.dtype.is_floating_point:
        data.fill_(float("nan"))
    elif data.dtype == torch.bool:
        data.fill_(True)
    else:
        data.fill_(torch.iinfo(data.dtype).min)

