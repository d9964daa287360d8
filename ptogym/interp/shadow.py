"""Shadow arrays over the bytes of one memory, one entry per *unit*: a run of bytes every access
so far covered whole.

A memory starts as one unit; an access that cuts a unit refines them all (the gcd of the
access's offset, strides and run length), so a kernel walking rows keeps one entry per row,
and the elements of a unit share their whole history: checks on units are as exact as checks
on bytes.  ``Box`` describes the bytes an access covers; ``UnitShadow.select`` turns it into
the units it covers: a slice where they are contiguous, else a ``Strided`` view (an index tensor
only for scattered rows).  A-ALIAS-01 (``aliasing.py``) and the
sanitizer (``sanitizer.py``) keep their state this way.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass
class Box:
    """A set of bytes of a memory: ``origin`` plus, per axis, ``(extent, stride)`` in bytes,
    each run ``run`` bytes long; or the rows ``rows`` (an index tensor) of ``run`` bytes,
    ``axes[0][1]`` apart."""

    origin: int
    axes: tuple  # ((extent, stride), ...), bytes
    run: int
    rows: torch.Tensor | None = None

    def granule(self) -> int:
        """The largest unit that divides every run boundary of the box."""
        return math.gcd(self.origin, self.run, *(stride for extent, stride in self.axes if extent > 1))

    def units(self, unit: int):
        """The units of the box: a slice when they are contiguous, a Strided view when they are not,
        an index tensor for rows."""
        per_run = self.run // unit
        if self.rows is not None:
            starts = self.origin // unit + self.rows * (self.axes[0][1] // unit)
            if per_run == 1:
                return starts
            return (starts[:, None] + torch.arange(per_run, device=starts.device)).reshape(-1)
        axes = [(extent, stride // unit) for extent, stride in self.axes if extent > 1]
        start, count = self.origin // unit, per_run * math.prod(extent for extent, _ in axes)
        if per_run + sum((extent - 1) * stride for extent, stride in axes) == count:
            return slice(start, start + count)
        return Strided(start, tuple(e for e, _ in axes) + (per_run,), tuple(s for _, s in axes) + (1,))

    def contains(self, unit: int, index: int) -> bool:
        selection = self.units(unit)
        if isinstance(selection, slice):
            return selection.start <= index < selection.stop
        return bool((indices(selection, None) == index).any())


@dataclass(frozen=True)
class Strided:
    """Units ``offset + sum(i_k * strides[k])`` for ``i_k < sizes[k]`` (the last stride 1): a
    strided view of a shadow array, so a box with gaps costs no index tensor."""

    offset: int
    sizes: tuple
    strides: tuple


def box_of(base: int, element_size: int, shape, region) -> Box | None:
    """The bytes of ``region`` (slices) of a contiguous tensor of ``shape`` whose first byte is
    ``base``; None when the region is empty."""
    extents = [r.stop - r.start for r in region]
    if not extents:  # a rank-0 tensor: its one element
        return Box(base, (), element_size)
    if min(extents) <= 0:
        return None
    strides, step = [], element_size
    for n in reversed(shape):
        strides.append(step)
        step *= n
    strides.reverse()
    origin = base + sum(r.start * s for r, s in zip(region, strides))
    return Box(origin, tuple(zip(extents[:-1], strides[:-1])), extents[-1] * element_size)


def rows_box(base: int, row_bytes: int, rows: torch.Tensor) -> Box:
    """The bytes of rows ``rows`` of a contiguous [-1, row] tensor whose first byte is ``base``."""
    return Box(base, ((rows.numel(), row_bytes),), row_bytes, rows.to(torch.long))


class UnitShadow:
    """Shadow arrays (attributes named in ``ARRAYS``, None until allocated) over ``nbytes`` bytes."""

    ARRAYS: tuple = ()

    def __init__(self, nbytes: int, device):
        self.nbytes, self.device = nbytes, device
        self.unit = max(nbytes, 1)
        for name in self.ARRAYS:
            setattr(self, name, None)

    def new_array(self, fill: int, dtype=torch.int32, columns: int | None = None) -> torch.Tensor:
        """One entry per unit, or with ``columns`` a row of that many entries per unit."""
        shape = (self.nbytes // self.unit,) + (() if columns is None else (columns,))
        return torch.full(shape, fill, dtype=dtype, device=self.device)

    def select(self, box: Box):
        """``(units, factor)``: the units ``box`` covers, refining every unit into ``factor``
        smaller ones first where the box cuts them (factor 1: no refinement)."""
        granule = math.gcd(self.unit, box.granule())
        factor = self.unit // granule
        if factor > 1:
            self.unit = granule
            for name in self.ARRAYS:
                array = getattr(self, name)
                if array is not None:
                    setattr(self, name, array.repeat_interleave(factor, dim=0))
        return box.units(self.unit), factor

    def shadow_bytes(self) -> int:
        return sum(array.numel() * array.element_size() for name in self.ARRAYS
                   for array in [getattr(self, name)] if array is not None)


def view(array: torch.Tensor, selection) -> torch.Tensor:
    """The entries of a shadow array a selection covers: a view (slices, Strided) or a copy
    (an index tensor); ``indices(selection)`` lists their units in the same order, flattened.
    An array with a row per unit gives those rows (a trailing axis)."""
    if isinstance(selection, Strided):
        if array.dim() == 1:
            return array.as_strided(selection.sizes, selection.strides, array.storage_offset() + selection.offset)
        columns = array.shape[1]
        return array.as_strided(selection.sizes + (columns,), tuple(s * columns for s in selection.strides) + (1,),
                                array.storage_offset() + selection.offset * columns)
    return array[selection]


def assign(array: torch.Tensor, selection, value) -> None:
    """``array``'s entries at ``selection`` set to ``value`` (a number or a tensor shaped like view())."""
    if isinstance(selection, torch.Tensor):
        array[selection] = value
    elif isinstance(value, torch.Tensor):
        view(array, selection).copy_(value)
    else:
        view(array, selection).fill_(value)


def indices(selection, device) -> torch.Tensor:
    """The units of a selection as a flat index tensor, in view()'s order."""
    if isinstance(selection, slice):
        return torch.arange(selection.start, selection.stop, device=device)
    if isinstance(selection, Strided):
        index = torch.full((), selection.offset, dtype=torch.long, device=device)
        for size, stride in zip(selection.sizes, selection.strides):
            index = index[..., None] + torch.arange(size, device=device) * stride
        return index.reshape(-1)
    return selection


def scaled(selection, factor: int):
    """A selection of units in units ``factor`` times smaller."""
    if isinstance(selection, slice):
        return slice(selection.start * factor, selection.stop * factor)
    if isinstance(selection, Strided):
        return Strided(selection.offset * factor, selection.sizes[:-1] + (selection.sizes[-1] * factor,),
                       tuple(stride * factor for stride in selection.strides[:-1]) + (1,))
    return (selection[:, None] * factor + torch.arange(factor, device=selection.device)).reshape(-1)
