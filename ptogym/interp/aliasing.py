"""Kernel arguments that share memory: pypto's CPU semantics, and the accesses a device races on.

pypto orders a kernel's tasks by the tensors they read and write; two parameters are two
tensors to it, even when the caller passed one memory for both.  Its CPU run gives each
parameter a buffer of its own, filled from the caller's memory, and writes back what the
kernel wrote (measured: probe ``alias_rows_written_by_another_iteration`` reads every row
as the caller passed it).  The interpreter does the same (``private_copies``,
``copy_back``).  On a device nothing orders the two parameters, so an element written
through one and read through the other, or read in one loop iteration and written through
the other in another, is a race: advice A-ALIAS-01 (``--sanitize`` reports such races as
errors).  Reading and writing one element through two aliases in one loop iteration is an
in-place update and fine (the write needs the value read).

``SharedMemory`` follows one caller memory, bytes wise, for the parameters over it.
"""
from __future__ import annotations

import torch

from .checks import advise


class SharedMemory:
    """The bytes of one caller memory that several parameters cover: who last wrote each
    byte and who read it (parameter slot, loop iteration stamp)."""

    def __init__(self, nbytes: int, device):
        self.writer = torch.full((nbytes,), -1, dtype=torch.int32, device=device)
        self.reader = torch.full((nbytes,), -1, dtype=torch.int32, device=device)
        self.read_in = torch.full((nbytes,), -1, dtype=torch.int64, device=device)
        self.names: dict[int, str] = {}
        self.advised = False  # A-ALIAS-01 once per memory and call: its first access tells the story

    def read(self, slot: int, offsets: torch.Tensor, iteration: int, what: str) -> None:
        writers = self.writer[offsets]
        foreign = (writers >= 0) & (writers != slot)
        if not self.advised and bool(foreign.any()):
            self.advised = True
            other = self.names[int(writers[foreign][0])]
            advise("A-ALIAS-01", f"{what}: {int(foreign.sum())} byte(s) read through {self.names[slot]!r} were "
                                 f"written through {other!r}, which the caller passed over the same memory: read "
                                 f"as the caller passed them (pypto's CPU run); on a device a race")
        self.reader[offsets] = slot
        self.read_in[offsets] = iteration

    def write(self, slot: int, offsets: torch.Tensor, iteration: int, what: str) -> None:
        readers = self.reader[offsets]
        foreign = (readers >= 0) & (readers != slot) & (self.read_in[offsets] != iteration)
        if not self.advised and bool(foreign.any()):
            self.advised = True
            other = self.names[int(readers[foreign][0])]
            advise("A-ALIAS-01", f"{what}: {int(foreign.sum())} byte(s) written through {self.names[slot]!r} "
                                 f"were read through {other!r} in another loop iteration, and the caller passed both "
                                 f"over the same memory: on a device a race (pypto's CPU run reads the caller's "
                                 f"values, as here)")
        self.writer[offsets] = slot


class Alias:
    """One parameter's place in a ``SharedMemory``: its slot and first byte."""

    __slots__ = ("memory", "slot", "base", "element_size", "shape")

    def __init__(self, memory: SharedMemory, slot: int, name: str, base: int, arg: torch.Tensor):
        self.memory, self.slot, self.base = memory, slot, base
        self.element_size, self.shape = arg.element_size(), tuple(arg.shape)
        memory.names[slot] = name

    def offsets(self, region) -> torch.Tensor:
        """The bytes of a region (a tuple of slices) of the parameter, in the shared memory."""
        device = self.memory.writer.device
        flat = torch.arange(_numel(self.shape), device=device).reshape(self.shape)[region].reshape(-1)
        within = torch.arange(self.element_size, device=device)
        return (self.base + flat[:, None] * self.element_size + within).reshape(-1)


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def find_aliases(names: list, args: list) -> dict:
    """``{index: Alias}`` for the arguments whose memory overlaps another's (contiguous tensors;
    meta tensors and empty ones have none)."""
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
    aliases = {}
    for group in groups:
        if len(group) < 2:
            continue
        low, high = min(s for s, _, _ in group), max(e for _, e, _ in group)
        memory = SharedMemory(high - low, args[group[0][2]].device)
        for start, _, index in group:
            aliases[index] = Alias(memory, index, names[index], start - low, args[index])
    return aliases


def private_copies(args: list, aliases: dict) -> list:
    """``args`` with each aliased argument replaced by a copy of its own (pypto's CPU run:
    one buffer per parameter, filled from the caller's memory)."""
    return [arg.clone() if index in aliases else arg for index, arg in enumerate(args)]


def copy_back(aliases: dict, originals: list, copies: list) -> None:
    """Write what the kernel wrote through each aliased parameter into the caller's memory,
    parameter by parameter in order.  The caller's memory is untouched until now (every
    parameter over it works on its copy), so an element whose copy differs from it, bit for
    bit, is one the kernel wrote; all masks are taken before the first write-back."""
    changed = {index: _bytes(copies[index]).ne(_bytes(originals[index])).any(-1).reshape(copies[index].shape)
               for index in aliases}
    for index, mask in changed.items():
        originals[index][mask] = copies[index][mask]


def _bytes(t: torch.Tensor) -> torch.Tensor:
    """Each element's bytes as a row of uint8."""
    return t.reshape(-1).view(torch.uint8).reshape(t.numel(), t.element_size())
