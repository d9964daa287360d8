"""``ptogym.probe(name, tensor)``: mark an intermediate of a golden.

A golden calls ``probe("x_add", x_add)`` at each semantic boundary; it returns the
tensor unchanged and costs nothing, except inside ``recording_probes()``, where the
``ptogym stage`` and ``ptogym bisect`` tools collect a copy of each probed tensor in
call order (the golden's boundary tensors / checkpoint tensors).
"""
from __future__ import annotations

from contextlib import contextmanager

_probes: dict | None = None  # name -> tensor while recording, in call order


def probe(name: str, tensor):
    """Return ``tensor``; while recording, keep a copy under ``name`` (names are unique)."""
    if _probes is not None:
        if name in _probes:
            raise ValueError(f"probe {name!r} recorded twice; give each golden intermediate its own name")
        _probes[name] = tensor.detach().clone()
    return tensor


@contextmanager
def recording_probes():
    """Collect the probes the block makes into the yielded dict."""
    global _probes
    if _probes is not None:
        raise RuntimeError("recording_probes() is already active")
    _probes = {}
    try:
        yield _probes
    finally:
        _probes = None
