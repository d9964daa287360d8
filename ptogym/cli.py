"""ptogym command line: one sub-command per tool, each defined next to its code.

    ptogym list | run | compare | bench | interp | lint | new | stage | bisect | patterns | model | tune

Every command ends with exactly one verdict line on stdout and its exit code:

    [PRECISION_PASS] 0   (run, compare, model) every output within tolerance
    [OK]             0   (list, bench) done
    [PRECISION_FAIL] 1   (run, compare, model) an output out of tolerance
    [RUN_ERROR]      2   anything that could not run: bad arguments included
    [PRECISION_PASS_LENIENT] 3  (run) within tolerance, but judged in lenient mode
                         (PTOGYM_LENIENT=1, lenient()): constraint checks were downgraded
    [INTERRUPTED]    130 Ctrl-C or SIGTERM

lint, new, stage, bisect, patterns and tune have their own verdict families (ERROR_MARKERS
for their errors).  No user error prints a traceback (``--debug`` shows one).  A
reader that closes stdout early (``ptogym list | head -1``) ends the command quietly,
exit 141 (128 + SIGPIPE).  ``ptogym interp`` hands the exit status of the script it
runs back unchanged.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import os
import signal
import sys
import traceback
from pathlib import Path

# sub-command -> module that provides ``add_cli(subparsers)``; each module registers a
# parser whose ``func(args) -> int`` default returns the exit code.  Only the chosen
# command's module is imported, so ``--help`` and ``list`` start without torch.
SUBCOMMANDS = {
    "list": "ptogym.verify.runner",
    "run": "ptogym.verify.runner",
    "compare": "ptogym.verify.compare_cli",
    "bench": "ptogym.bench",
    "interp": "ptogym.interp.launcher",
    "lint": "ptogym.lint.cli",
    "new": "ptogym.workflow.cli",
    "stage": "ptogym.workflow.cli",
    "bisect": "ptogym.workflow.cli",
    "patterns": "ptogym.patterns.cli",
    "model": "ptogym.models.cli",
    "tune": "ptogym.tune.cli",
}
# one-line help shown by ``ptogym --help`` without importing every command's module
SUMMARIES = {
    "list": "list the operators",
    "run": "run an operator's case levels and judge them against the golden",
    "compare": "compare saved outputs against a saved reference",
    "bench": "interpreter vs golden wall time, simulated device time, GB/s",
    "interp": "run a PyPTO program with 'import pypto' bound to the interpreter",
    "lint": "check PyPTO kernels against the OLxx rules",
    "new": "scaffold an operator package (optionally with staged module files)",
    "stage": "verify the staged module files one by one against the golden",
    "bisect": "find the first kernel op whose result diverges from the golden",
    "patterns": "the pattern library: list, show and graph the atom and skeleton cards",
    "model": "a whole Qwen3 / Qwen3-MoE on the gym's kernels against transformers",
    "tune": "search an operator's build parameters on the cost model (Optuna, local or Ray)",
}
EXIT_LENIENT = 3  # passed with constraint checks downgraded (lenient mode): not a plain pass
MARKERS = {0: "[PRECISION_PASS]", 1: "[PRECISION_FAIL]", 2: "[RUN_ERROR]", EXIT_LENIENT: "[PRECISION_PASS_LENIENT]",
           130: "[INTERRUPTED]"}
OK_MARKER = "[OK]"
# the tools with their own verdicts: the error line when one fails in a way it did not report itself
ERROR_MARKERS = {"lint": "[LINT_ERROR]", "new": "[NEW_ERROR]", "stage": "[STAGE_ERROR]", "bisect": "[BISECT_ERROR]",
                 "patterns": "[PATTERNS_ERROR]", "tune": "[TUNE_ERROR]"}
EXIT_INTERRUPTED = 130


def worst_exit(codes, default: int = 0) -> int:
    """The exit code of several verdicts: an error (2) before a failure (1) before a
    lenient pass (3) before a pass (0); ``default`` when there are none."""
    codes = set(codes)
    if not codes:
        return default
    return next((code for code in (2, 1, EXIT_LENIENT) if code in codes), 0)


def lenient_exit(exit_code: int, leniency) -> int:
    """A pass earned with downgraded checks (``leniency.lenient``) is EXIT_LENIENT, never 0."""
    return EXIT_LENIENT if exit_code == 0 and leniency is not None and leniency.lenient else exit_code


class UsageError(Exception):
    """A command-line argument is wrong: ``[RUN_ERROR]``, exit 2, no traceback."""


class _Parser(argparse.ArgumentParser):
    """argparse that raises UsageError instead of printing usage and exiting 2 itself."""

    def error(self, message):
        raise UsageError(f"{message} (see '{self.prog} --help')")


def check_writable(path: str, option: str) -> None:
    """Raise UsageError unless *path* can be written; checked before any work starts
    (creates nothing, so a refused run leaves no empty file behind)."""
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    if target.is_dir():
        raise UsageError(f"{option}: {path} is a directory")
    if not folder.is_dir():
        raise UsageError(f"{option}: cannot write {path}: directory {folder} does not exist")
    if not os.access(folder, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise UsageError(f"{option}: cannot write {path}: permission denied")


def add_sanitize_option(parser) -> None:
    """``--sanitize`` / ``--sanitize=warn``: run the kernels under ptogym.interp's sanitizer."""
    parser.add_argument("--sanitize", nargs="?", const="error", choices=("error", "warn"), default=None,
                        help="interp backend: find races between loop iterations and reads of unwritten memory "
                             "(S-* ids, docs/sanitizer.md); an error, or with =warn a warning and no plain pass")


def sanitizing(args, backend: str | None = None):
    """The context that applies ``--sanitize`` (a null one without it).  UsageError when
    the kernels would not run on the interpreter, the only backend that sees every access."""
    mode = getattr(args, "sanitize", None)
    if mode is None:
        return contextlib.nullcontext()
    chosen = backend or os.environ.get("PTOGYM_BACKEND", "").strip() or "interp"
    if chosen != "interp":
        raise UsageError(f"--sanitize: the kernels run on backend {chosen!r}; only the interp backend sees every "
                         f"access (use --backend interp)")
    from ptogym.interp.sanitizer import sanitize

    return sanitize(mode)


def verdict(exit_code: int, precision: bool = True) -> str:
    """The verdict line for *exit_code*; commands that judge no precision say [OK] on success."""
    return MARKERS[exit_code] if precision or exit_code else OK_MARKER


def _top_parser(commands) -> _Parser:
    parser = _Parser(prog="ptogym", description=__doc__.split("\n\n")[0],
                     epilog="Every command ends with one verdict line; see 'ptogym CMD --help'.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True, parser_class=_Parser)
    for name in commands:
        sub.add_parser(name, help=SUMMARIES.get(name, f"see 'ptogym {name} --help'"), add_help=False)
    return parser


def _command_parser(command: str) -> argparse.ArgumentParser:
    """The chosen command's own parser, its module imported now (and no other)."""
    sub = _Parser(prog="ptogym").add_subparsers(dest="command", parser_class=_Parser)
    importlib.import_module(SUBCOMMANDS[command]).add_cli(sub)
    parser = sub.choices[command]
    parser.add_argument("--debug", action="store_true", help="show tracebacks of errors")
    return parser


def _load_without_package_init(module_name: str):
    """Import *module_name* from its file without running its package's ``__init__``
    first: ``ptogym.interp``'s imports torch (1.5 s) while its launcher needs nothing
    for ``--help`` or an argument error (it imports the package itself to run)."""
    if module_name in sys.modules:
        return sys.modules[module_name]
    package, _, leaf = module_name.rpartition(".")
    spec = importlib.util.find_spec(package.partition(".")[0])
    path = Path(spec.origin).parent.joinpath(*package.split(".")[1:], f"{leaf}.py")
    module_spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_name] = module
    module_spec.loader.exec_module(module)
    return module


class _State:
    """What main() needs to know when a command fails: --debug, and the command's verdict family."""

    debug = False
    error_marker = MARKERS[2]


def _dispatch(argv: list[str], state: _State) -> int:
    global_options = []
    while argv and argv[0].startswith("-"):
        global_options.append(argv.pop(0))
    state.debug = "--debug" in global_options
    if not argv or any(option in ("-h", "--help") for option in global_options):
        _top_parser(SUBCOMMANDS).parse_args(global_options + argv[:1])  # prints help or raises UsageError
    if unknown := [option for option in global_options if option != "--debug"]:
        raise UsageError(f"unknown option {unknown[0]} before the command (see 'ptogym --help')")
    command, rest = argv[0], argv[1:]
    if command not in SUBCOMMANDS:
        raise UsageError(f"unknown command {command!r}; choose one of {', '.join(SUBCOMMANDS)}")
    if command == "interp":  # everything after the script name belongs to the script
        return _load_without_package_init(SUBCOMMANDS[command]).main(rest, debug=state.debug)
    state.debug = state.debug or "--debug" in rest
    args = _command_parser(command).parse_intermixed_args(rest)  # options may stand among positionals
    state.error_marker = ERROR_MARKERS.get(command, MARKERS[2])  # argparse's refusals above stay [RUN_ERROR]
    return args.func(args)


@contextlib.contextmanager
def _interrupt_on_sigterm():
    """SIGTERM ends a command as Ctrl-C does: clean-up, [INTERRUPTED], exit 130.
    The previous handler comes back afterwards (main() is also called in-process)."""
    def handler(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(list(sys.argv[1:] if argv is None else argv))
    except BrokenPipeError:
        return _reader_gone()


def _main(argv: list[str]) -> int:
    state = _State()
    try:
        with _interrupt_on_sigterm():
            exit_code = _dispatch(argv, state)
        sys.stdout.flush()  # a reader that went away shows here, not in Python's flush at exit
        return exit_code
    except SystemExit as exit_:  # --help (exit 0) or a command that exits itself
        return exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 2)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr, flush=True)
        print(MARKERS[EXIT_INTERRUPTED], flush=True)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        raise
    except Exception as error:  # UsageError, or anything a command did not turn into a verdict
        if state.debug:
            traceback.print_exc()
        prefix = "" if isinstance(error, UsageError) else f"{type(error).__name__}: "
        print(f"error: {prefix}{error}", file=sys.stderr, flush=True)  # the explanation, then the verdict last
        print(state.error_marker, flush=True)
        return 2


def _reader_gone() -> int:
    """stdout's reader closed the pipe (``ptogym list | head -1``): stop quietly with
    128 + SIGPIPE, as a program the signal ends; later writes (Python's flush at exit
    included) go to /dev/null instead of raising again."""
    with contextlib.suppress(OSError, ValueError):  # stdout without a file descriptor (captured in-process)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 128 + signal.SIGPIPE


if __name__ == "__main__":
    sys.exit(main())
