"""``ptogym interp [--lenient] [--platform ARCH] SCRIPT.py [ARGS...]`` or ``... -m MODULE [ARGS...]``:
run an unmodified PyPTO program with ``import pypto`` bound to the interpreter."""
from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import runpy
import sys
import warnings

USAGE = ("ptogym interp [--lenient] [--platform ARCH] (SCRIPT.py | -m MODULE) [ARGS...]\n"
         "       ptogym interp --checks          list the checks (class error or advice) and their rules")


def bind_pypto() -> None:
    """Make ``import pypto`` (and its sub-modules kernels use) resolve to ptogym.interp."""
    import ptogym.interp as interp
    from ptogym.interp import experimental, frontend

    sys.modules["pypto"] = interp
    sys.modules["pypto.frontend"] = frontend
    sys.modules["pypto.experimental"] = experimental
    sys.modules.update(interp.PYPTO_MODULES)


def _one_line_warning(message, category, filename, lineno, line=None) -> str:
    """Warnings of a launched program on one line each (the source line is noise here)."""
    return f"{filename}:{lineno}: {category.__name__}: {message}\n"


def main(argv: list[str]) -> int:
    options = argparse.Namespace(lenient=False, platform=None)
    while argv and argv[0].startswith("-") and argv[0] != "-m":
        flag = argv.pop(0)
        if flag == "--lenient":
            options.lenient = True
        elif flag == "--platform" and argv:
            options.platform = argv.pop(0)
        elif flag in ("-h", "--help"):
            print(f"usage: {USAGE}")
            return 0
        elif flag == "--checks":
            from ptogym.interp import checks

            for check_id in [*checks.CHECKS, *checks.ADVICE]:
                print(f"{check_id:<14} {checks.check_class(check_id):<7} {checks.rule_of(check_id)}")
            return 0
        else:
            return _usage_error(f"unknown option {flag}")
    if not argv or argv[0] == "-m" and len(argv) < 2:
        return _usage_error("give a SCRIPT.py or -m MODULE")
    if argv[0] != "-m" and not os.path.isfile(argv[0]):
        return _usage_error(f"cannot open script {argv[0]!r}: no such file")
    if argv[0] == "-m" and not _module_exists(argv[1]):
        return _usage_error(f"no module named {argv[1]!r}")
    # imported only now: argument errors and --help answer without loading torch
    from ptogym.interp import checks, platform, set_platform  # (platform is the npuarch object)

    try:
        set_platform(options.platform or platform.npuarch)  # also validates $PTOGYM_PLATFORM
    except ValueError as error:
        return _usage_error(str(error))
    bind_pypto()
    # a with-block, not a bare __enter__(): an unreferenced lenient() is undone when collected
    with checks.lenient(True) if options.lenient else contextlib.nullcontext(), _one_line_warnings():
        if argv[0] == "-m":
            sys.argv = argv[1:]
            return _exit_code(lambda: runpy.run_module(argv[1], run_name="__main__", alter_sys=True))
        sys.argv = argv
        sys.path.insert(0, os.path.dirname(os.path.abspath(argv[0])))
        return _exit_code(lambda: runpy.run_path(argv[0], run_name="__main__"))


def _usage_error(message: str) -> int:
    """An argument problem: the message and usage on stderr, [RUN_ERROR] and exit 2."""
    print(f"ptogym interp: {message}\nusage: {USAGE}", file=sys.stderr)
    print("[RUN_ERROR]")
    return 2


def _module_exists(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a parent package that is missing or broken
        return False


@contextlib.contextmanager
def _one_line_warnings():
    previous = warnings.formatwarning
    warnings.formatwarning = _one_line_warning
    try:
        yield
    finally:
        warnings.formatwarning = previous


def _exit_code(run) -> int:
    try:
        run()
    except SystemExit as exit_:
        code = exit_.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    return 0


def add_cli(subparsers) -> None:
    parser = subparsers.add_parser("interp", help="run a PyPTO program with `import pypto` bound to the interpreter",
                                   usage=USAGE)
    parser.set_defaults(func=lambda args: main([]))
