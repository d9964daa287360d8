"""Verification toolkit: tolerance comparison, level-based case files, case runner.

Names load on first use (PEP 562), so importing ``ptogym.verify.runner`` for the
command line does not import torch.
"""
from __future__ import annotations

import importlib

_EXPORTS = {
    "Case": "cases", "CaseFileError": "cases", "TensorSpec": "cases", "Tolerance": "cases", "load_cases": "cases",
    "parse_dtype": "cases",
    "CompareResult": "compare", "CompositeResult": "compare", "Outlier": "compare",
    "detailed_tensor_compare": "compare",
    "CaseResult": "runner", "RunResult": "runner", "run_case": "runner", "run_cases": "runner",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
