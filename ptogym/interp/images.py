"""Images of tensors that nothing has written since: a weight is converted to fp32 once
(and its int8 K-chunk norms computed once, ``ops/matmul``), not on every token block
(or call) that multiplies with it.

``converted(t, dtype)`` returns ``t.to(dtype)``, bit for bit, and ``derived(t, kind,
compute)`` returns ``compute(t)``, each reusing an earlier result for the same view
(storage, offset, shape, strides, dtype) and the same dtype or ``kind`` while the
tensor's version counter - shared by every view of a storage and bumped by every
in-place write, the interpreter's ``assemble`` included - is unchanged.  An entry holds
only a weak reference to the tensor at the root of the view chain: when the caller
drops that tensor the entry goes, so a storage freed and reused cannot be mistaken for
the old one.  Small tensors are converted directly (a lookup costs more); the images
kept are bounded to ``$PTOGYM_INTERP_IMAGE_MB`` (default 1024) megabytes, least
recently used first out.  Callers must not write into an image.
"""
from __future__ import annotations

import os
import threading
import weakref
from collections import OrderedDict

import torch

MIN_ELEMENTS = 1 << 16  # below this a conversion is cheaper than keeping it
_LIMIT_BYTES = int(float(os.environ.get("PTOGYM_INTERP_IMAGE_MB", "1024")) * 2**20)
_images: OrderedDict = OrderedDict()  # key -> (weakref to the root tensor, version, image)
_bytes = 0
_lock = threading.RLock()  # a weakref callback may run inside a locked section (GC)


def _root(t: torch.Tensor) -> torch.Tensor:
    while t._base is not None:
        t = t._base
    return t


def _drop(key) -> None:
    global _bytes
    entry = _images.pop(key, None)
    if entry is not None:
        _bytes -= entry[2].numel() * entry[2].element_size()


def converted(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``t.to(dtype)``, reused while ``t`` is unchanged (see the module docstring)."""
    if t.dtype == dtype:
        return t
    return derived(t, dtype, lambda source: source.to(dtype))


def derived(t: torch.Tensor, kind, compute) -> torch.Tensor:
    """``compute(t)`` (a tensor that depends on ``t``'s values alone, ``kind`` naming
    the computation), reused while ``t`` is unchanged (see the module docstring)."""
    global _bytes
    if t.numel() < MIN_ELEMENTS or t.requires_grad or t.is_inference():
        return compute(t)
    key = (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), t.stride(), t.dtype, kind, t.device)
    root, version = _root(t), t._version
    with _lock:
        entry = _images.get(key)
        if entry is not None and entry[0]() is root and entry[1] == version:
            _images.move_to_end(key)
            return entry[2]
    image = compute(t)
    size = image.numel() * image.element_size()
    if size > _LIMIT_BYTES:
        return image
    with _lock:
        _drop(key)
        _images[key] = (weakref.ref(root, lambda _, key=key: _release(key)), version, image)
        _bytes += size
        while _bytes > _LIMIT_BYTES:
            _drop(next(iter(_images)))
    return image


def _release(key) -> None:
    """The root tensor of an entry was collected: its image goes too."""
    with _lock:
        entry = _images.get(key)
        if entry is not None and entry[0]() is None:
            _drop(key)


def clear() -> None:
    """Forget every image (tests; freeing memory)."""
    global _bytes
    with _lock:
        _images.clear()
        _bytes = 0
