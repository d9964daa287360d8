"""``ptogym compare ACTUAL EXPECTED``: ``detailed_tensor_compare`` on saved outputs.

Kept apart from ``compare`` so that the command line starts without torch and numpy;
they load when the command runs.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ptogym.cli import MARKERS, UsageError


class UnreadableInput(Exception):
    """A saved output file could not be loaded."""


def load_saved(path: str | Path) -> Any:
    """Load a tensor (or nested outputs) saved as .pt, .npy or .safetensors."""
    import numpy as np
    import torch

    path = Path(path)
    suffix = path.suffix.lower()
    try:
        if suffix == ".pt":
            return torch.load(path, map_location="cpu", weights_only=True)
        if suffix == ".npy":
            return np.load(path, allow_pickle=False)
        if suffix == ".safetensors":
            return _load_safetensors(path)
    except UnreadableInput:
        raise
    except Exception as error:  # every loader failure means the same thing here
        raise UnreadableInput(f"{path}: cannot read: {type(error).__name__}: {error}") from error
    raise UnreadableInput(f"{path}: unsupported file type {suffix!r}; use .pt, .npy or .safetensors")


def _load_safetensors(path: Path) -> dict:
    try:
        from safetensors.torch import load_file
    except ImportError as error:
        raise UnreadableInput(f"{path}: reading .safetensors needs the 'safetensors' package "
                              "(pip install safetensors)") from error
    return load_file(path)


def _compare_command(args: argparse.Namespace) -> int:
    from .compare import check_tolerances, detailed_tensor_compare

    tolerances = dict(rtol=args.rtol, atol=args.atol, max_error_ratio=args.max_error_ratio,
                      int_tolerance=args.int_tolerance)
    try:
        check_tolerances(**tolerances)
    except ValueError as error:
        option, _, rule = str(error).partition(": ")
        raise UsageError(f"--{option.replace('_', '-')}: {rule}") from None
    try:
        actual, expected = load_saved(args.actual), load_saved(args.expected)
        result = detailed_tensor_compare(actual, expected, args.name, **tolerances)
    except (UnreadableInput, TypeError) as error:
        print(f"error: {error}", file=sys.stderr)
        print(MARKERS[2])
        return 2
    print(result.report())
    if result.all_close and not result.compared_elements:  # empty tensors only: a PASS would be unearned
        print("nothing compared: every tensor is empty")
    exit_code = 0 if result.all_close and result.compared_elements else 1
    print(MARKERS[exit_code])
    return exit_code


def add_cli(subparsers) -> None:
    parser = subparsers.add_parser(
        "compare", help="compare saved outputs against a saved reference",
        description="Compare ACTUAL against the reference EXPECTED (.pt, .npy, .safetensors). "
                    "The last line is [PRECISION_PASS] (exit 0), [PRECISION_FAIL] (exit 1: an element out of "
                    "tolerance, a structure mismatch, or nothing compared: no tensor or only empty ones) or "
                    "[RUN_ERROR] (exit 2: an input cannot be read, or an option is invalid).")
    parser.add_argument("actual", help="saved kernel output")
    parser.add_argument("expected", help="saved reference output")
    parser.add_argument("--rtol", type=float, default=1e-3, help="relative tolerance >= 0 (default 1e-3)")
    parser.add_argument("--atol", type=float, default=1e-3, help="absolute tolerance >= 0 (default 1e-3)")
    parser.add_argument("--name", default=None, help="name shown in the report")
    parser.add_argument("--max-error-ratio", type=float, default=0.0,
                        help="pass while at most this share (0..1) of elements is out of tolerance")
    parser.add_argument("--int-tolerance", type=int, default=0,
                        help="allowed |difference| when both sides are integer tensors")
    parser.set_defaults(func=_compare_command)
