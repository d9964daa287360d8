"""Verification toolkit: tolerance comparison, level-based case files, case runner."""
from __future__ import annotations

from .cases import Case, CaseFileError, TensorSpec, load_cases, parse_dtype
from .compare import CompareResult, CompositeResult, Outlier, detailed_tensor_compare
from .runner import CaseResult, RunResult, run_case, run_cases

__all__ = [
    "Case",
    "CaseFileError",
    "CaseResult",
    "CompareResult",
    "CompositeResult",
    "Outlier",
    "RunResult",
    "TensorSpec",
    "detailed_tensor_compare",
    "load_cases",
    "parse_dtype",
    "run_case",
    "run_cases",
]
