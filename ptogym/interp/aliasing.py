"""Kernel arguments that share memory: pypto's CPU semantics, and the accesses a device races on.

pypto orders a kernel's tasks by the tensors they read and write; two parameters are two
tensors to it, even when the caller passed one memory for both.  Its CPU run gives each
parameter a buffer of its own, filled from the caller's memory, and writes back what the
kernel wrote (measured: probe ``alias_rows_written_by_another_iteration`` reads every row
as the caller passed it).  The interpreter does the same (``private_copies``,
``copy_back``).  On a device nothing orders the two parameters, so an element written
through one and read through the other, or read in one loop iteration and written through
the other in another, is a race: advice A-ALIAS-01.  Reading and writing one element
through two aliases in one loop iteration is an in-place update and fine (the write needs
the value read).

``SharedMemory`` follows one caller memory for the parameters over it, in units every access
covers whole (``shadow.py``: as exact as bytes, one entry per row for a kernel walking rows).  In
sanitize mode (``sanitizer.py``) the sanitizer's S-RACE-02, an error, takes A-ALIAS-01's place,
on the same grouping of arguments (``memory_groups``).
"""
from __future__ import annotations

import torch

from . import trace
from .checks import advise
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
        self.advised = False  # A-ALIAS-01 once per memory and call: its first access tells the story

    def read(self, slot: int, box: Box, iteration: int, what: str) -> None:
        units, _ = self.select(box)
        writers = view(self.writer, units)
        foreign = (writers >= 0) & (writers != slot)
        if not self.advised and bool(foreign.any()):
            self.advised = True
            other = self.names[int(writers[foreign][0])]
            advise("A-ALIAS-01", f"{what}: {int(foreign.sum()) * self.unit} byte(s) read through "
                                 f"{self.names[slot]!r} were written through {other!r}, which the caller passed over "
                                 f"the same memory: read as the caller passed them (pypto's CPU run); on a device "
                                 f"a race")
        assign(self.reader, units, slot)
        assign(self.read_in, units, iteration)

    def write(self, slot: int, box: Box, iteration: int, what: str) -> None:
        units, _ = self.select(box)
        readers = view(self.reader, units)
        foreign = (readers >= 0) & (readers != slot) & (view(self.read_in, units) != iteration)
        if not self.advised and bool(foreign.any()):
            self.advised = True
            other = self.names[int(readers[foreign][0])]
            advise("A-ALIAS-01", f"{what}: {int(foreign.sum()) * self.unit} byte(s) written through "
                                 f"{self.names[slot]!r} were read through {other!r} in another loop iteration, and "
                                 f"the caller passed both over the same memory: on a device a race (pypto's CPU run "
                                 f"reads the caller's values, as here)")
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


def private_copies(args: list, aliases: dict) -> list:
    """``args`` with each aliased argument replaced by a copy of its own (pypto's CPU run:
    one buffer per parameter, filled from the caller's memory)."""
    copies = [arg.clone() if index in aliases else arg for index, arg in enumerate(args)]
    for index in aliases:
        trace.note_private_copy(copies[index], args[index])
    return copies


def copy_back(aliases: dict, originals: list, copies: list) -> None:
    """Write what the kernel wrote through each aliased parameter into the caller's memory,
    parameter by parameter in order.  The caller's memory is untouched until now (every
    parameter over it works on its copy), so an element whose copy differs from it, bit for
    bit, is one the kernel wrote; all masks are taken before the first write-back.  (On the
    elements' bits as integers: a select, not masked indexing, which cost qwen3_pre_attn
    ~4 ms a call on its 2 MB caches.)"""
    changed = {index: _bits(copies[index]) != _bits(originals[index]) for index in aliases}
    for index, mask in changed.items():
        target = _bits(originals[index])
        target.copy_(torch.where(mask, _bits(copies[index]), target))


_INT_OF_SIZE = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _bits(t: torch.Tensor) -> torch.Tensor:
    """``t``'s elements as integers of the same width (its bits, NaN payloads included)."""
    return t.view(_INT_OF_SIZE[t.element_size()])
