"""``ptogym`` command line: one sub-command per tool, each defined next to its code.

    ptogym list | run | compare | bench | interp | patterns
"""
from __future__ import annotations

import argparse
import importlib
import sys

# sub-command -> module that provides ``add_cli(subparsers)``; each module registers a
# parser whose ``func(args) -> int`` default returns the exit code.
SUBCOMMANDS = {
    "list": "ptogym.verify.runner",
    "run": "ptogym.verify.runner",
    "compare": "ptogym.verify.compare",
    "bench": "ptogym.bench",
    "interp": "ptogym.interp.launcher",
    "patterns": "ptogym.patterns.cli",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ptogym", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for module_name in dict.fromkeys(SUBCOMMANDS.values()):
        importlib.import_module(module_name).add_cli(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["interp"]:
        # Everything after the script name belongs to the script, so bypass argparse.
        from ptogym.interp.launcher import main as interp_main

        return interp_main(argv[1:])
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
