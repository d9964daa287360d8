"""Kernel arguments that share memory: which accesses make the result depend on scheduling.

pypto orders a kernel's tasks by the tensors they read and write; two parameters are two
tensors to it, even when the caller passed one memory for both.  So where an element is
written through one parameter and read through another, nothing orders the two on a
device (a race), and pypto's own CPU run gives other numbers than this eager, in-order
interpreter (measured: probe ``alias_rows_written_by_another_iteration``).  C-ALIAS-01
names such an access; reading and writing the same element through two aliases in one
loop iteration stays allowed (an in-place update: the write needs the value read).

``SharedMemory`` follows one caller memory for the parameters over it, in units every access
covers whole (``shadow.py``: as exact as bytes, one entry per row for a kernel walking rows).  In
sanitize mode (``sanitizer.py``) the sanitizer's S-RACE-02 takes C-ALIAS-01's place, on
the same grouping of arguments (``memory_groups``).
"""
from __future__ import annotations

import torch

from .checks import violation
from .shadow import Box, UnitShadow, assign, box_of, view


class SharedMemory(UnitShadow):
    """The bytes of one caller memory that several parameters cover: who last wrote each
    unit of it and who read it (parameter slot, loop iteration stamp)."""

    ARRAYS = ("writer", "reader", "read_in")

    def __init__(self, nbytes: int, device):
        super().__init__(nbytes, device)
        self.writer, self.reader = self.new_array(-1), self.new_array(-1)
        self.read_in = self.new_array(-1, torch.int64)
        self.names: dict[int, str] = {}

    def read(self, slot: int, box: Box, iteration: int, what: str) -> None:
        units, _ = self.select(box)
        writers = view(self.writer, units)
        foreign = (writers >= 0) & (writers != slot)
        if bool(foreign.any()):
            other = self.names[int(writers[foreign][0])]
            violation("C-ALIAS-01", f"{what}: {int(foreign.sum()) * self.unit} byte(s) read through "
                                    f"{self.names[slot]!r} were written through {other!r}, which the caller passed "
                                    f"over the same memory: pypto does not order the two (the result depends on "
                                    f"scheduling)")
        assign(self.reader, units, slot)
        assign(self.read_in, units, iteration)

    def write(self, slot: int, box: Box, iteration: int, what: str) -> None:
        units, _ = self.select(box)
        readers = view(self.reader, units)
        foreign = (readers >= 0) & (readers != slot) & (view(self.read_in, units) != iteration)
        if bool(foreign.any()):
            other = self.names[int(readers[foreign][0])]
            violation("C-ALIAS-01", f"{what}: {int(foreign.sum()) * self.unit} byte(s) written through "
                                    f"{self.names[slot]!r} were read through {other!r} in another loop iteration, "
                                    f"and the caller passed both over the same memory: pypto does not order the two "
                                    f"(the result depends on scheduling)")
        assign(self.writer, units, slot)


class Alias:
    """One parameter's place in a ``SharedMemory``: its slot and first byte."""

    __slots__ = ("memory", "slot", "base", "element_size", "shape")

    def __init__(self, memory: SharedMemory, slot: int, name: str, base: int, arg: torch.Tensor):
        self.memory, self.slot, self.base = memory, slot, base
        self.element_size, self.shape = arg.element_size(), tuple(arg.shape)
        memory.names[slot] = name

    def box(self, region) -> Box | None:
        """The bytes of a region (a tuple of slices) of the parameter, in the shared memory."""
        return box_of(self.base, self.element_size, self.shape, region)


def memory_groups(args: list) -> list:
    """``[(low, high, [(start, index), ...]), ...]``: the arguments grouped by overlapping
    memory (byte spans of contiguous tensors; meta tensors and empty ones have none)."""
    spans = []
    for index, arg in enumerate(args):
        if arg.is_meta or arg.numel() == 0:  # no memory to share
            continue
        start = arg.untyped_storage().data_ptr() + arg.storage_offset() * arg.element_size()
        spans.append((start, start + arg.numel() * arg.element_size(), index))
    groups: list[list] = []
    for span in sorted(spans):
        if groups and span[0] < max(end for _, end, _ in groups[-1]):
            groups[-1].append(span)
        else:
            groups.append([span])
    return [(min(s for s, _, _ in group), max(e for _, e, _ in group), [(s, i) for s, _, i in group])
            for group in groups]


def find_aliases(names: list, args: list) -> dict:
    """``{index: Alias}`` for the arguments whose memory overlaps another's."""
    aliases = {}
    for low, high, members in memory_groups(args):
        if len(members) < 2:
            continue
        memory = SharedMemory(high - low, args[members[0][1]].device)
        for start, index in members:
            aliases[index] = Alias(memory, index, names[index], start - low, args[index])
    return aliases
