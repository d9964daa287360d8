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


#: run-wide switches of the real-pypto backends: backend attribute -> environment variable
_SWITCHES = {"keep_artifacts": "PTOGYM_KEEP_ARTIFACTS", "verbose": "PTOGYM_VERBOSE",
             "full_build": "PTOGYM_FULL_BUILD", "no_cache": "PTOGYM_NO_CACHE"}


def configure(**switches: bool) -> None:
    """Run-wide options of the real-pypto backends, for backends already open and those
    opened later: ``keep_artifacts`` (each run's Perfetto trace and swimlane json),
    ``verbose`` (pypto's own output), ``full_build`` (compile every loop branch, as a
    device binary holds, instead of the ones the call runs) and ``no_cache`` (neither
    read nor write the simulation cache).  A switch given False leaves it as it was."""
    for attribute, enabled in switches.items():
        if enabled:
            os.environ[_SWITCHES[attribute]] = "1"
            for backend in _instances.values():
                if hasattr(backend, attribute):
                    setattr(backend, attribute, True)


def add_cli_options(parser) -> None:
    """``--keep-artifacts`` and ``--pypto-verbose`` for commands that launch kernels."""
    parser.add_argument("--keep-artifacts", action="store_true",
                        help="real-pypto backends: keep each run's Perfetto trace and swimlane json; print where")
    parser.add_argument("--pypto-verbose", action="store_true", help="real-pypto backends: show pypto's own output")
    parser.add_argument("--full-build", action="store_true",
                        help="pypto-sim: compile every loop branch (what a device binary holds), not only "
                             "those the call's shapes run")
    parser.add_argument("--no-cache", action="store_true",
                        help="pypto-sim: neither read nor write cached simulation results")


def configure_from_cli(args) -> None:
    configure(keep_artifacts=args.keep_artifacts, verbose=args.pypto_verbose, full_build=args.full_build,
              no_cache=args.no_cache)


def get_backend(name: str | None = None):
    """Return the backend instance for *name* (None: ``$PTOGYM_BACKEND`` if set and
    not empty, else interp).  Raises ValueError naming the argument or variable."""
    source = "backend"
    if name is None:
        name = os.environ.get("PTOGYM_BACKEND", "").strip() or DEFAULT_BACKEND
        source = "PTOGYM_BACKEND"
    if name not in _MODULES:
        raise ValueError(f"{source}: unknown backend {name!r}; choose one of {', '.join(names())}")
    if name not in _instances:
        module = importlib.import_module(f"{__name__}.{_MODULES[name]}")
        _instances[name] = module.Backend()
    return _instances[name]
