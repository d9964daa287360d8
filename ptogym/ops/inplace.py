"""Argument rules every operator that writes its inputs in place shares.

``check_inplace_arguments(op_name, written={...}, read={...})`` raises ValueError
naming the argument and the rule when

* a written tensor overlaps any other argument, written or read (any view, any
  stride, any dtype reinterpretation: memory is compared byte by byte);
* grad mode is on and an argument requires grad (``ptogym.atoms.host.autograd_rule``,
  the rule of every operator): a written leaf gets torch's own wording for
  ``leaf.add_()``, anything else is refused because the kernels are forward-only.

It reads nothing but shapes, strides and addresses and writes nothing, so a refusal
leaves every input bitwise unchanged.  Tensors on the ``meta`` device have no memory
and never overlap.  Read-only arguments may be strided; written ones must be
contiguous (the operator checks that, since it knows which ones it writes).
"""
from __future__ import annotations

from typing import Mapping

import torch

from ptogym.atoms.host import TORCH_LEAF_MESSAGE, autograd_rule, raise_first  # noqa: F401 - TORCH_LEAF_MESSAGE re-exported

_MAX_PROBED_ELEMENTS = 1 << 22  # above this, a span overlap is taken as an element overlap


def check_inplace_arguments(op_name: str, written: Mapping[str, torch.Tensor],
                            read: Mapping[str, torch.Tensor]) -> None:
    """Refuse overlapping memory and autograd for an in-place operator (see module doc)."""
    everything = {**written, **read}
    names = list(everything)
    for i, name in enumerate(names):
        for other in names[i + 1:]:
            if (name in written or other in written) and overlaps(everything[name], everything[other]):
                target, source = (name, other) if name in written else (other, name)
                raise ValueError(f"{source}: shares memory with {target}, which {op_name} writes in place; "
                                 f"pass a separate tensor (e.g. {source}.clone())")
    raise_first(autograd_rule(op_name, everything, written))


def overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether *a* and *b* share at least one byte of memory.

    Exact when one of them is dense (its elements fill its span, as contiguous
    tensors do); otherwise an overlap of their spans counts as one.
    """
    if a.device != b.device or a.device.type == "meta" or not a.numel() or not b.numel():
        return False
    span_a, span_b = _byte_span(a), _byte_span(b)
    if span_a[1] <= span_b[0] or span_b[1] <= span_a[0]:
        return False
    probe, region, region_span = (a, b, span_b) if a.numel() <= b.numel() else (b, a, span_a)
    if not _is_dense(region) or probe.numel() > _MAX_PROBED_ELEMENTS:
        return True
    starts = _element_offsets(probe) * probe.element_size() + probe.untyped_storage().data_ptr()
    return bool(((starts < region_span[1]) & (starts + probe.element_size() > region_span[0])).any())


def _byte_span(t: torch.Tensor) -> tuple[int, int]:
    """[first byte, past the last byte) of the memory *t*'s elements occupy."""
    low = high = t.storage_offset()
    for size, stride in zip(t.shape, t.stride()):
        if stride >= 0:
            high += (size - 1) * stride
        else:
            low += (size - 1) * stride
    base, element = t.untyped_storage().data_ptr(), t.element_size()
    return base + low * element, base + (high + 1) * element


def _is_dense(t: torch.Tensor) -> bool:
    start, end = _byte_span(t)
    return end - start == t.numel() * t.element_size()


def _element_offsets(t: torch.Tensor) -> torch.Tensor:
    """Storage offset (in elements) of every element of *t*, flattened."""
    offsets = torch.tensor(t.storage_offset(), dtype=torch.int64)
    for dim, (size, stride) in enumerate(zip(t.shape, t.stride())):
        shape = [1] * t.dim()
        shape[dim] = size
        offsets = offsets + (torch.arange(size, dtype=torch.int64) * stride).reshape(shape)
    return offsets.reshape(-1)
