"""``ptogym lint``: the upstream OLxx kernel rules, checked from the source (see rules.py)."""
from .engine import DEFAULT_STAGE, Finding, LintReport, lint_paths
from .rules import NOT_CHECKED, RULES, SEVERITIES

__all__ = ["DEFAULT_STAGE", "Finding", "LintReport", "NOT_CHECKED", "RULES", "SEVERITIES", "lint_paths"]
