"""Differential conformance of ``ptogym.interp`` against real pypto 0.2.0 (see harness.py)."""
