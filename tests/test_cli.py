"""The command line's contract (README "Reliability"): every path ends with exactly one
verdict line and its documented exit code, argument errors are [RUN_ERROR]/2 without a
traceback, options may stand anywhere among the positionals, output files are checked
before work starts, and help/list start without importing torch or pypto."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli_helpers import assert_stops_on_signal
from ptogym.cli import MARKERS, OK_MARKER, SUBCOMMANDS, main

REPO = Path(__file__).resolve().parents[1]
VERDICTS = set(MARKERS.values()) | {OK_MARKER}


def cli(capsys, *argv) -> tuple[int, list[str], str]:
    exit_code = main(list(argv))
    captured = capsys.readouterr()
    return exit_code, captured.out.rstrip("\n").splitlines(), captured.err


def assert_one_verdict(lines: list[str], marker: str) -> None:
    assert lines and lines[-1] == marker, lines[-5:]
    assert sum(line in VERDICTS for line in lines) == 1, lines


# ------------------------------------------------------------------ argument errors
@pytest.mark.parametrize("argv, message", [
    ([], "required: COMMAND"),
    (["frobnicate"], "unknown command 'frobnicate'"),
    (["--nope", "list"], "unknown option --nope"),
    (["run"], "give an operator name or --all"),
    (["run", "inplace_add_rms_norm", "--all"], "give an operator name or --all"),
    (["run", "inplace_add_rms_norm", "--frobnicate"], "unrecognized arguments: --frobnicate"),
    (["run", "--list"], "--list needs an operator name"),
    (["run", "inplace_add_rms_norm", "level0", "--json", "/nonexistent/x.json"],
     "--json: cannot write /nonexistent/x.json: directory /nonexistent does not exist"),
    (["compare", "a.pt"], "required: expected"),
    (["compare", "a.pt", "b.pt", "--rtol", "-1"], "--rtol: must be a finite number in [0, inf], got -1.0"),
    (["compare", "a.pt", "b.pt", "--rtol", "nan"], "--rtol: must be a finite number"),
    (["compare", "a.pt", "b.pt", "--max-error-ratio", "5"], "--max-error-ratio: must be a finite number in [0, 1]"),
    (["compare", "a.pt", "b.pt", "--int-tolerance", "x"], "invalid int value: 'x'"),
    (["bench", "inplace_add_rms_norm", "--levels", "level99", "--no-sim"],
     "unknown level(s) level99 for inplace_add_rms_norm"),
    (["bench", "nonsense_op", "--no-sim"], "unknown operator(s) nonsense_op"),
    (["bench", "--repeat", "0", "--no-sim"], "--repeat: must be >= 1"),
    (["bench", "--no-sim", "--json", "/nonexistent/b.json"], "--json: cannot write"),
    (["interp", "missing.py"], "cannot open script 'missing.py'"),
    (["interp", "-m", "no_such_module_anywhere"], "no module named 'no_such_module_anywhere'"),
    (["interp", "--frobnicate"], "unknown option --frobnicate"),
])
def test_argument_errors_are_run_errors_without_traceback(capsys, argv, message):
    exit_code, lines, err = cli(capsys, *argv)
    assert exit_code == 2
    assert_one_verdict(lines, "[RUN_ERROR]")
    assert message in err and "Traceback" not in err
    assert not any(line.startswith("[1/") for line in lines)  # nothing ran before the refusal


def test_debug_shows_the_traceback(capsys):
    exit_code, lines, err = cli(capsys, "--debug", "run", "inplace_add_rms_norm", "--json", "/nonexistent/x.json")
    assert exit_code == 2 and "Traceback (most recent call last)" in err and lines == ["[RUN_ERROR]"]


def test_interp_platform_errors_name_the_option_or_variable(capsys, tmp_path, monkeypatch):
    script = tmp_path / "hello.py"
    script.write_text("print('hello')\n")
    exit_code, lines, err = cli(capsys, "interp", "--platform", "bogus", str(script))
    assert exit_code == 2 and lines == ["[RUN_ERROR]"] and "unknown platform 'bogus'" in err
    monkeypatch.setenv("PTOGYM_PLATFORM", "bogus")
    import ptogym.interp  # noqa: F401  (loads the module below)

    monkeypatch.setattr(sys.modules["ptogym.interp.platform"].platform, "_profile", None)
    exit_code, lines, err = cli(capsys, "interp", str(script))
    assert exit_code == 2 and lines == ["[RUN_ERROR]"] and "PTOGYM_PLATFORM: unknown platform 'bogus'" in err


def test_a_bad_platform_variable_does_not_break_other_commands():
    env = {**os.environ, "PTOGYM_PLATFORM": "bogus", "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "ptogym", "list"], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and proc.stdout.splitlines()[-1] == OK_MARKER, proc.stderr


# ------------------------------------------------------------------ verdicts on success
def test_options_may_stand_anywhere_among_the_positionals(capsys):
    """The op README's own command: an option before the level names."""
    exit_code, lines, _ = cli(capsys, "run", "inplace_add_rms_norm", "--backend", "interp", "level0")
    assert exit_code == 0
    assert_one_verdict(lines, "[PRECISION_PASS]")
    assert lines[0].startswith("[1/1] inplace_add_rms_norm level0 on interp ...")


def test_run_writes_json_and_ends_with_its_verdict(capsys, tmp_path):
    out = tmp_path / "result.json"
    exit_code, lines, _ = cli(capsys, "run", "--json", str(out), "inplace_add_rms_norm", "level0")
    assert exit_code == 0 and out.exists()
    assert_one_verdict(lines, "[PRECISION_PASS]")


@pytest.mark.parametrize("argv, marker", [
    (["list"], OK_MARKER),
    (["run", "inplace_add_rms_norm", "--list"], OK_MARKER),
    (["bench", "inplace_add_rms_norm", "--levels", "level0", "--no-sim", "--repeat", "1"], OK_MARKER),
])
def test_other_commands_end_with_one_verdict(capsys, argv, marker):
    exit_code, lines, _ = cli(capsys, *argv)
    assert exit_code == 0
    assert_one_verdict(lines, marker)


def test_help_exits_0_for_every_command(capsys):
    for argv in (["--help"], *([name, "--help"] for name in SUBCOMMANDS)):
        assert main(argv) == 0, argv
        out = capsys.readouterr().out
        assert "usage" in out.lower() and "``" not in out, argv  # no raw RST markup


# ------------------------------------------------------------------ start-up cost
@pytest.mark.parametrize("argv", [["--help"], ["list"], *([name, "--help"] for name in SUBCOMMANDS)],
                         ids=lambda argv: " ".join(argv))
def test_help_and_list_do_not_import_torch_or_pypto(argv):
    """What makes them answer in well under a second (torch alone takes ~1.5 s to import)."""
    code = ("import sys, time; start = time.perf_counter(); from ptogym.cli import main; "
            f"code = main({argv!r}); heavy = sorted({{'torch', 'numpy', 'pypto'}} & set(sys.modules)); "
            "print('HEAVY', heavy, time.perf_counter() - start, file=sys.stderr); sys.exit(code)")
    proc = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(REPO)},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "HEAVY []" in proc.stderr, proc.stderr


# ------------------------------------------------------------------ interrupts
SLOW_RUN = """
import sys, time
from ptogym.ops.inplace_add_rms_norm import op
from ptogym.cli import main

def slow_launch(*args, **kwargs):  # a kernel that takes a minute
    time.sleep(60)

op.launch = slow_launch
sys.exit(main(["run", "inplace_add_rms_norm", "level0"]))
"""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupt_stops_a_run_within_2_s_with_exit_130(signum):
    started = time.monotonic()
    assert_stops_on_signal([sys.executable, "-c", SLOW_RUN], {**os.environ, "PYTHONPATH": str(REPO)}, signum,
                           ready=lambda: time.monotonic() - started > 0.3)
