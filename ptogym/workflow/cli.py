"""Command lines of the workflow tools: ``ptogym new``, ``stage``, ``bisect``.

Only the parsers live here, so ``ptogym CMD --help`` and argument errors start
without torch; each tool's module is imported when the command runs.
"""
from __future__ import annotations

import importlib
from pathlib import Path

from ptogym import backends
from ptogym.cli import add_sanitize_option


def _run(module: str):
    def run(args) -> int:
        return importlib.import_module(f"ptogym.workflow.{module}").command(args)
    return run


def add_cli(subparsers) -> None:
    _add_new(subparsers)
    _add_stage(subparsers)
    _add_bisect(subparsers)


def _add_new(subparsers) -> None:
    new = subparsers.add_parser(
        "new", help="scaffold an operator package that passes its quick cases",
        description="Write ptogym/ops/OP (or DIR/OP); last line [NEW_OK] (exit 0) or [NEW_ERROR] (exit 2).")
    new.add_argument("op", help="operator name (a lower-case identifier)")
    new.add_argument("--modules", type=int, metavar="N", help="also write the staged files of N modules")
    new.add_argument("--dir", type=Path, help="parent directory (default: ptogym/ops)")
    new.set_defaults(func=_run("scaffold"))


def _add_stage(subparsers) -> None:
    stage = subparsers.add_parser(
        "stage", help="verify the cumulative module files against the golden's boundary tensors",
        description="Run <op>_module1_impl.py, <op>_module12_impl.py ... in order; last line "
                    "[STAGE_PASS] (exit 0), [STAGE_FAIL] (exit 1), [STAGE_ERROR] (exit 2) or "
                    "[STAGE_PASS_LENIENT] (exit 3: passed with checks downgraded by PTOGYM_LENIENT).")
    stage.add_argument("op", help="operator name or operator package directory")
    stage.add_argument("--level", help="case id (default: the first quick case)")
    stage.add_argument("--from", dest="start", type=int, default=1, metavar="K",
                       help="resume at module K: earlier modules keep their logged PASS only on the same file "
                            "contents, level, backend and lenient mode, else they run again")
    stage.add_argument("--backend", default=None, help=f"one of {', '.join(backends.names())} (default: interp)")
    stage.add_argument("--log-dir", type=Path, help="where stage_log.md/.json go (default: <op dir>/verification)")
    add_sanitize_option(stage)
    backends.add_cli_options(stage)
    stage.set_defaults(func=_run("stage"))


def _add_bisect(subparsers) -> None:
    bisect = subparsers.add_parser(
        "bisect", help="find the first kernel op whose result diverges from a golden probe",
        description="Compare every output of the kernel and every ptogym.probe intermediate of the golden with "
                    "the interpreter's dataflow trace; last line [BISECT_FOUND] (exit 1), [BISECT_CLEAN] (exit 0), "
                    "[BISECT_ERROR] (exit 2) or [BISECT_CLEAN_LENIENT] (exit 3: with checks downgraded by "
                    "PTOGYM_LENIENT).")
    bisect.add_argument("op", help="operator name or operator package directory")
    bisect.add_argument("level", nargs="?", help="case id (default: the first quick case)")
    bisect.add_argument("--module", type=int, metavar="K",
                        help="bisect the staged file of module K instead of kernel.py")
    add_sanitize_option(bisect)
    bisect.set_defaults(func=_run("bisect"))
