"""``ptogym interp [--lenient] [--sanitize[=warn]] [--platform ARCH] SCRIPT.py [ARGS...]`` or ``... -m MODULE
[ARGS...]``: run an unmodified PyPTO program with ``import pypto`` bound to the interpreter."""
from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import runpy
import sys
import traceback
import warnings

# frames left out of a program's traceback: the interpreter package (this launcher
# included), ptogym's command line and contextlib's wrappers
_INTERNAL_PREFIXES = (os.path.dirname(os.path.abspath(__file__)) + os.sep,
                      os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "cli.py"),
                      contextlib.__file__)
USAGE = ("ptogym interp [--lenient] [--sanitize[=warn]] [--platform ARCH] [--debug] (SCRIPT.py | -m MODULE) "
         "[ARGS...]\n"
         "       ptogym interp --checks          list the checks (class error, advice or limit) and their rules")


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


def _parse(argv: list[str]) -> argparse.Namespace:
    """The launcher's own options, all before the program (everything from SCRIPT.py or
    ``-m MODULE`` on belongs to it).  Raises ValueError naming a bad option."""
    options = argparse.Namespace(lenient=False, sanitize=None, platform=None, debug=False, checks=False, help=False)
    while argv and argv[0].startswith("-") and argv[0] != "-m":
        flag = argv.pop(0)
        name, _, value = flag.partition("=")
        if name == "--platform":
            if not value and (not argv or argv[0].startswith("-")):
                raise ValueError("--platform needs a value (an arch name such as DAV_2201)")
            options.platform = value or argv.pop(0)
        elif name == "--sanitize":
            if value not in ("", "error", "warn"):
                raise ValueError(f"--sanitize={value}: use --sanitize (errors) or --sanitize=warn")
            options.sanitize = value or "error"
        elif flag in ("--lenient", "--debug", "--checks"):
            setattr(options, flag[2:], True)
        elif flag in ("-h", "--help"):
            options.help = True
        else:
            raise ValueError(f"unknown option {flag}")
    return options


def main(argv: list[str], debug: bool = False) -> int:
    """Run the program named by *argv*; its exit status (1 for an uncaught exception,
    whose traceback shows the program's own frames; ``--debug``: all frames)."""
    argv = list(argv)
    try:
        options = _parse(argv)
    except ValueError as error:
        return _usage_error(str(error))
    options.debug = options.debug or debug
    if options.help:
        print(f"usage: {USAGE}")
        return 0
    if options.checks:
        return _list_checks()
    if not argv or argv[0] == "-m" and len(argv) < 2:
        return _usage_error("give a SCRIPT.py or -m MODULE")
    if argv[0] != "-m" and not os.path.isfile(argv[0]):
        return _usage_error(f"cannot open script {argv[0]!r}: no such file")
    if argv[0] == "-m" and not _module_exists(argv[1]):
        return _usage_error(f"no module named {argv[1]!r}")
    # imported only now: argument errors and --help answer without loading torch
    from ptogym.interp import checks, platform, sanitizer, set_platform  # (platform is the npuarch object)

    try:
        set_platform(options.platform or platform.npuarch)  # also validates $PTOGYM_PLATFORM
        checks.silenced_by_env()  # validates $PTOGYM_SILENCE
        sanitizer.mode_from_env()  # validates $PTOGYM_SANITIZE
    except ValueError as error:
        return _usage_error(str(error))
    bind_pypto()
    # a with-block, not a bare __enter__(): an unreferenced lenient() is undone when collected
    with checks.lenient(True) if options.lenient else contextlib.nullcontext(), _one_line_warnings(), \
            sanitizer.sanitize(options.sanitize) if options.sanitize else contextlib.nullcontext():
        if argv[0] == "-m":
            sys.argv = argv[1:]
            return _exit_code(lambda: runpy.run_module(argv[1], run_name="__main__", alter_sys=True), options.debug)
        sys.argv = argv
        sys.path.insert(0, os.path.dirname(os.path.abspath(argv[0])))
        return _exit_code(lambda: runpy.run_path(argv[0], run_name="__main__"), options.debug)


def _list_checks() -> int:
    from ptogym.cli import OK_MARKER
    from ptogym.interp import checks

    for check_id in [*checks.CHECKS, *checks.ADVICE, *checks.LIMITS, *checks.SANITIZER]:
        print(f"{check_id:<14} {checks.check_class(check_id):<9} {checks.rule_of(check_id)}")
    print(f"{OK_MARKER} {len(checks.CHECKS)} error checks, {len(checks.ADVICE)} advice, "
          f"{len(checks.LIMITS)} resource limits, {len(checks.SANITIZER)} sanitizer checks (--sanitize)")
    return 0


def _usage_error(message: str) -> int:
    """An argument problem: the message and usage on stderr, then [RUN_ERROR] last, exit 2."""
    print(f"ptogym interp: {message}\nusage: {USAGE}", file=sys.stderr, flush=True)
    print("[RUN_ERROR]", flush=True)
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


def _exit_code(run, debug: bool) -> int:
    """The program's exit status, as ``python SCRIPT.py`` would give it; an uncaught
    exception prints its traceback without the launcher's and interpreter's frames."""
    try:
        run()
    except SystemExit as exit_:
        code = exit_.code
        if code is None or isinstance(code, int):
            return code or 0
        print(code, file=sys.stderr)  # sys.exit("message"), as Python does
        return 1
    except (KeyboardInterrupt, BrokenPipeError):
        raise  # the command line's own handling: [INTERRUPTED], or a quiet exit
    except Exception as error:
        print(_user_traceback(error, debug), end="", file=sys.stderr, flush=True)
        return 1
    return 0


def _user_traceback(error: BaseException, debug: bool) -> str:
    """The traceback of *error*, chained exceptions included, as Python prints it;
    without *debug*, only the frames of the user's code (runpy, this launcher and the
    interpreter's internals removed)."""
    report = traceback.TracebackException.from_exception(error)
    trimmed = False
    pending, seen = [report], set()
    while pending:  # the exception, its __cause__ / __context__, theirs ...
        part = pending.pop()
        if id(part) in seen:
            continue
        seen.add(id(part))
        if not debug:
            kept = [frame for frame in part.stack if not _internal(frame.filename)]
            trimmed = trimmed or len(kept) < len(part.stack)
            part.stack = traceback.StackSummary.from_list(kept)
        pending += [linked for linked in (part.__cause__, part.__context__) if linked is not None]
    note = "(frames of ptogym's interpreter left out; --debug shows them)\n" if trimmed else ""
    return "".join(report.format()) + note


def _internal(filename: str) -> bool:
    return filename.startswith(_INTERNAL_PREFIXES) or filename in (runpy.__file__, "<frozen runpy>")


def add_cli(subparsers) -> None:
    """The parser documents the options (README, --help); main() reads them itself, since
    everything from the program's name on belongs to the program."""
    parser = subparsers.add_parser("interp", help="run a PyPTO program with `import pypto` bound to the interpreter",
                                   usage=USAGE)
    parser.add_argument("--lenient", action="store_true", help="constraint violations warn instead of raising")
    parser.add_argument("--sanitize", nargs="?", const="error", choices=("error", "warn"),
                        help="find races between loop iterations and reads of unwritten memory (S-* checks, "
                             "docs/sanitizer.md): errors, or warnings with =warn")
    parser.add_argument("--platform", metavar="ARCH", help="the platform profile (default: $PTOGYM_PLATFORM)")
    parser.add_argument("--checks", action="store_true", help="list every check: id, class, rule")
    parser.add_argument("-m", dest="module", metavar="MODULE", help="run a module as a program")
    parser.set_defaults(func=lambda args: main([]))
