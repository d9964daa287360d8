"""The attribute names real pypto 0.2.0 has, for rule OL55.

Two sources, one format ``{"version", "top": [...], "sub": {name: [...]}}``: the
installed package when it is pypto 0.2.0 (the project's specification), else the
list recorded from it by ``scripts/gen_pypto_names.py`` (``pypto_names.json``).
"""
from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import inspect
import json
from pathlib import Path

SPEC_VERSION = "0.2.0"
RECORDED = Path(__file__).with_name("pypto_names.json")


def live_names() -> dict | None:
    """Names of the importable real pypto, or None when it is not installed."""
    if importlib.util.find_spec("pypto") is None:
        return None
    # through the backend's importer: it redirects pypto's home/log directories and
    # undoes the logging set-up pypto does on import, as every ptogym use of pypto must
    from ptogym.backends._pypto_runtime import import_pypto

    pypto = import_pypto()
    top = sorted(dir(pypto))
    # one level down: sub-modules and classes (pypto.frontend.jit, pypto.Tensor.move, pypto.DT_FP32 ...)
    sub = {name: sorted(dir(getattr(pypto, name))) for name in top if _own_namespace(getattr(pypto, name))}
    return {"version": importlib.metadata.version("pypto"), "top": top, "sub": sub}


def _own_namespace(value) -> bool:
    """pypto's own sub-modules and classes (not re-exported foreign modules like torch)."""
    if inspect.ismodule(value):
        return value.__name__.startswith("pypto")
    return inspect.isclass(value) and getattr(value, "__module__", "").startswith("pypto")


@functools.lru_cache(maxsize=1)
def known_names() -> tuple[dict, str]:
    """(names, where they came from) - the live package if it is the spec version."""
    try:
        live = live_names()
    except Exception:  # a broken install: fall back to the recording
        live = None
    if live is not None and live["version"] == SPEC_VERSION:
        return live, f"installed pypto {SPEC_VERSION}"
    recorded = json.loads(RECORDED.read_text(encoding="utf-8"))
    return recorded, f"recorded list of pypto {recorded['version']} ({RECORDED.name})"
