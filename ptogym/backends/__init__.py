"""Execution backends: where a PyPTO kernel source actually runs.

Every kernel in ``ptogym/ops/<op>/kernel.py`` is written once, as a *builder*
``build(pypto, **static) -> jit kernel`` that receives the ``pypto`` namespace to
build against.  A backend decides which namespace that is and how the built kernel
is called:

========== ===================================================================
interp     ``ptogym.interp`` - our eager, strict interpreter (default)
pypto-sim  real ``pypto`` 0.2.0 on a CPU: compile + cost model (+ its interpreter)
npu        real ``pypto`` on an Ascend device through torch_npu
========== ===================================================================

Choose per call (``backend=``), per run (``--backend``) or with ``PTOGYM_BACKEND``.
"""
from __future__ import annotations

import importlib
import os

DEFAULT_BACKEND = "interp"
_MODULES = {"interp": "interp", "pypto-sim": "pypto_sim", "npu": "npu"}
_instances: dict = {}


class BackendUnavailable(RuntimeError):
    """The backend cannot run on this machine (missing package or device)."""


def names() -> list[str]:
    return list(_MODULES)


def get_backend(name: str | None = None):
    """Return the backend instance for *name* (or ``$PTOGYM_BACKEND``, or interp)."""
    name = name or os.environ.get("PTOGYM_BACKEND") or DEFAULT_BACKEND
    if name not in _MODULES:
        raise ValueError(f"backend: unknown backend {name!r}; choose one of {names()}")
    if name not in _instances:
        module = importlib.import_module(f"{__name__}.{_MODULES[name]}")
        _instances[name] = module.Backend()
    return _instances[name]
