"""The command line under adversarial use: a program's own traceback from ``interp``,
a reader that closes the pipe, unknown advice ids, the verdict line last, each tool's
own verdict family, and the resource limits (lint's input size, loop trip counts)."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import ptogym.interp as pypto
from ptogym.cli import main
from ptogym.interp import ResourceLimitExceeded, checks

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def ptogym(*argv, env=None, **options) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ptogym", *map(str, argv)], capture_output=True, text=True,
                          env={**ENV, **(env or {})}, cwd=REPO, timeout=240, **options)


def cli(capsys, *argv) -> tuple[int, list[str], str]:
    exit_code = main([str(arg) for arg in argv])
    captured = capsys.readouterr()
    return exit_code, captured.out.rstrip("\n").splitlines(), captured.err


KERNEL = textwrap.dedent("""\
    import torch
    import pypto


    @pypto.frontend.jit()
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), y: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        for i in pypto.loop(0, STOP, 1):
            pypto.assemble(pypto.exp(x), [0, 0], y)


    def helper():
        kernel(torch.zeros(8, 64), torch.zeros(8, 64))


    helper()
    print("done")
""")


# ------------------------------------------------------------------ interp: the program's own traceback
def test_interp_shows_the_programs_traceback_trimmed_to_its_frames(tmp_path):
    script = tmp_path / "boom.py"
    script.write_text("def inner():\n    raise RuntimeError('boom')\n\n\ninner()\n")
    done = ptogym("interp", script)
    assert done.returncode == 1 and done.stdout == ""  # as `python boom.py`: no verdict of ptogym's own
    assert done.stderr.splitlines()[:5] == ["Traceback (most recent call last):",
                                            f'  File "{script}", line 5, in <module>', "    inner()",
                                            f'  File "{script}", line 2, in inner', "    raise RuntimeError('boom')"]
    assert "RuntimeError: boom" in done.stderr and "ptogym/interp" not in done.stderr and "runpy" not in done.stderr
    for argv in (["interp", "--debug", script], ["--debug", "interp", script]):  # --debug: every frame
        done = ptogym(*argv)
        assert done.returncode == 1 and "ptogym/interp/launcher.py" in done.stderr and "RuntimeError: boom" in done.stderr


def test_interp_shows_a_kernels_violation_at_the_users_line(tmp_path):
    script = tmp_path / "kernel_script.py"
    script.write_text(KERNEL.replace("STOP", "1").replace("pypto.exp(x)", "pypto.add(x, pypto.cast(x, pypto.DT_FP16))"))
    done = ptogym("interp", script)
    assert done.returncode == 1 and f"[C-API-01] {script}:9" in done.stderr
    frames = [line for line in done.stderr.splitlines() if line.startswith("  File ")]
    assert frames == [f'  File "{script}", line 16, in <module>', f'  File "{script}", line 13, in helper',
                      f'  File "{script}", line 9, in kernel']


def test_a_torch_dtype_in_an_annotation_is_a_type_error_naming_pyptos_dtype():
    # real pypto's Tensor constructor (pybind) takes a DataType only: a TypeError there too
    with pytest.raises(TypeError, match=r"pypto.Tensor\(dtype=torch.float32\): expected a pypto DataType .* "
                                        r"pypto's name for it is pypto.DT_FP32"):
        pypto.Tensor([8, 8], torch.float32)
    with pytest.raises(TypeError, match="got builtins.str"):
        pypto.Tensor([8, 8], "DT_FP32")


# ------------------------------------------------------------------ the verdict line, pipes
@pytest.mark.parametrize("argv", [["run", "--frobnicate"], ["run", "no_such_op"], ["lint", "--stage", "9", "."],
                                  ["new", "BAD"], ["stage", "no_such_op"], ["interp", "--platform"]])
def test_on_an_error_the_verdict_line_comes_last_after_its_explanation(argv):
    done = subprocess.run([sys.executable, "-m", "ptogym", *argv], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, env=ENV, cwd=REPO, timeout=240)
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 2 and len(lines) >= 2 and "Traceback" not in done.stdout
    assert lines[-1].startswith("[") and "_ERROR]" in lines[-1].split()[0], lines
    assert not any(line.startswith("[") and "_ERROR]" in line for line in lines[:-1]), lines


@pytest.mark.parametrize("argv", [["list"], ["lint", "--rules"], ["interp", "--checks"]])
def test_a_reader_that_closes_the_pipe_ends_the_command_quietly(argv):
    process = subprocess.Popen([sys.executable, "-m", "ptogym", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env=ENV, cwd=REPO)
    process.stdout.close()  # `| head -0`: every write meets a closed pipe
    error = process.stderr.read().decode()
    assert process.wait(timeout=240) == 141 and error == ""  # 128 + SIGPIPE, and no BrokenPipeError


def test_a_program_under_interp_writing_into_a_closed_pipe_ends_quietly(tmp_path):
    script = tmp_path / "chatty.py"
    script.write_text("for i in range(100000):\n    print(i)\n")
    process = subprocess.Popen([sys.executable, "-m", "ptogym", "interp", script], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, env=ENV, cwd=REPO)
    process.stdout.close()
    assert process.wait(timeout=240) == 141 and process.stderr.read() == b""


# ------------------------------------------------------------------ each tool's own verdict family
@pytest.mark.parametrize("command, target, marker", [
    ("lint", "ptogym.lint.cli.lint_paths", "[LINT_ERROR]"),
    ("new", "ptogym.workflow.scaffold.scaffold", "[NEW_ERROR]"),
    ("stage", "ptogym.workflow.stage.run_stages", "[STAGE_ERROR]"),
    ("bisect", "ptogym.workflow.bisect.run_bisect", "[BISECT_ERROR]"),
])
def test_an_unforeseen_failure_ends_in_the_tools_own_error_verdict(command, target, marker, capsys, monkeypatch):
    def broken(*_args, **_kwargs):
        raise RuntimeError("unforeseen")

    monkeypatch.setattr(target, broken)
    code, lines, err = cli(capsys, command, "x")
    assert code == 2 and lines[-1] == marker and "RuntimeError: unforeseen" in err and "Traceback" not in err


def test_argument_errors_stay_run_error_for_every_command(capsys):
    code, lines, err = cli(capsys, "lint", "--no-such-option")
    assert code == 2 and lines == ["[RUN_ERROR]"] and "unrecognized arguments" in err


# ------------------------------------------------------------------ PTOGYM_SILENCE
def test_unknown_ids_in_ptogym_silence_are_refused_naming_the_variable(tmp_path):
    with pytest.raises(ValueError, match=r"PTOGYM_SILENCE: A-NOPE not an advice id; advice ids: A-"):
        checks.silenced_by_env({"PTOGYM_SILENCE": "A-SUM-01,A-NOPE"})
    with pytest.raises(ValueError, match=r"C-TILE-03: not advice; lenient\(\) turns errors into warnings"):
        checks.silenced_by_env({"PTOGYM_SILENCE": "C-TILE-03"})
    script = tmp_path / "ok.py"
    script.write_text("print('ran')\n")
    done = ptogym("interp", script, env={"PTOGYM_SILENCE": "A-SUM-1"})
    assert done.returncode == 2 and done.stdout == "[RUN_ERROR]\n" and "PTOGYM_SILENCE: A-SUM-1" in done.stderr
    assert "ran" not in done.stdout


# ------------------------------------------------------------------ loop trip counts (L-LOOP-01, L-LOOP-02)
def _kernel(stop, nested: int = 0):
    @pypto.frontend.jit()
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), y: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        for i in pypto.loop(0, stop, 1):
            for j in pypto.loop(0, nested, 1):
                pass
        pypto.assemble(pypto.exp(x), [0, 0], y)
    return kernel


def test_a_loop_of_2_to_the_40_is_refused_before_its_first_iteration():
    # real pypto compiles it (pypto.loop builds one loop node, whatever the trip count):
    # a limit of the interpreter, not a rule of pypto, and not turned into a warning by lenient()
    x, y = torch.zeros(8, 64), torch.zeros(8, 64)
    for strictness in (False, True):
        with checks.lenient(strictness), pytest.raises(ResourceLimitExceeded) as info:
            _kernel(2 ** 40)(x, y)
        assert info.value.check_id == "L-LOOP-01" and info.value.location.endswith(f"{Path(__file__).name}:"
                                                                                    f"{_kernel.__code__.co_firstlineno + 4}")
        assert "pypto.loop(0, 1099511627776, 1): 1099511627776 iterations > 1048576" in str(info.value)
        assert "$PTOGYM_MAX_LOOP_TRIPS" in str(info.value)
    assert torch.equal(y, torch.zeros(8, 64))


def test_loop_unroll_is_bounded_too():
    @pypto.frontend.jit()
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        for i, factor in pypto.loop_unroll(0, 2 ** 40, 1, unroll_list=[4, 1]):
            pass

    with pytest.raises(ResourceLimitExceeded, match=r"\[L-LOOP-01\].*loop_unroll\(0, 1099511627776, 1"):
        kernel(torch.zeros(8, 64))


def test_the_loop_limits_are_configurable(monkeypatch):
    x, y = torch.zeros(8, 64), torch.zeros(8, 64)
    monkeypatch.setenv("PTOGYM_MAX_LOOP_TRIPS", "10")
    _kernel(10)(x, y)  # at the bound: runs
    with pytest.raises(ResourceLimitExceeded, match="11 iterations > 10"):
        _kernel(11)(x, y)
    checks.set_limit("L-LOOP-01", 20)  # the process-wide setting wins over the variable
    try:
        _kernel(20)(x, y)
    finally:
        checks.set_limit("L-LOOP-01", None)
    monkeypatch.setenv("PTOGYM_MAX_LOOP_TRIPS", "many")
    with pytest.raises(ValueError, match="PTOGYM_MAX_LOOP_TRIPS='many': use a positive integer"):
        _kernel(1)(x, y)
    with pytest.raises(ValueError, match="not a limit id"):
        checks.set_limit("C-LOOP-09", 3)


def test_nested_loops_share_one_budget_per_kernel_call(monkeypatch):
    monkeypatch.setenv("PTOGYM_MAX_KERNEL_TRIPS", "1000")
    x, y = torch.zeros(8, 64), torch.zeros(8, 64)
    _kernel(30, nested=30)(x, y)  # 30 + 900 iterations
    _kernel(30, nested=30)(x, y)  # the budget is per call
    with pytest.raises(ResourceLimitExceeded, match=r"\[L-LOOP-02\].*more than 1000 loop iterations in one call"):
        _kernel(40, nested=40)(x, y)


def test_interp_reports_a_loop_limit_at_the_users_line(tmp_path):
    script = tmp_path / "forever.py"
    script.write_text(KERNEL.replace("STOP", "2 ** 40"))
    done = ptogym("interp", script)
    assert done.returncode == 1 and "done" not in done.stdout
    assert f"ResourceLimitExceeded: [L-LOOP-01] {script}:8: pypto.loop(0, 1099511627776, 1)" in done.stderr


# ------------------------------------------------------------------ lint: input size (L-LINT-01), file kinds
def test_lint_refuses_a_file_above_its_size_limit_before_reading_it(tmp_path, capsys, monkeypatch):
    big = tmp_path / "kernel.py"
    big.write_text("x = 1\n" * 50_000)  # 300 000 bytes
    code, lines, _ = cli(capsys, "lint", tmp_path)
    assert code == 2 and lines[-1] == "[LINT_ERROR] nothing linted"
    assert f"{big}: 300000 bytes > 262144 (L-LINT-01" in lines[0] and "--max-bytes" in lines[0]
    code, lines, _ = cli(capsys, "lint", big, "--max-bytes", 400_000)
    assert code == 1 and " OL01 " in lines[1] and lines[-1].startswith("[LINT_FAIL]")  # read and linted
    monkeypatch.setenv("PTOGYM_LINT_MAX_BYTES", "1000")
    assert "300000 bytes > 1000" in cli(capsys, "lint", big)[1][0]
    code, lines, _ = cli(capsys, "lint", big, "--max-bytes", "0")
    assert code == 2 and "--max-bytes '0': use a positive number of bytes" in lines[0]


def test_lint_refuses_a_too_deeply_nested_file_as_a_lint_error(tmp_path, capsys):
    deep = tmp_path / "deep_impl.py"
    deep.write_text("x = " + "(" * 5000 + ")" * 5000 + "\n")
    code, lines, _ = cli(capsys, "lint", deep)
    assert code == 2 and lines[-1] == "[LINT_ERROR] nothing linted"


def test_lint_says_which_kind_each_file_was_linted_as(tmp_path, capsys):
    notes = tmp_path / "notes.py"  # a name lint does not take for a kernel
    notes.write_text("x = 1\n")
    code, lines, _ = cli(capsys, "lint", notes)
    assert code == 0 and lines[0] == f"{notes}: host (no kernel rules: a kernel is kernel.py or *_impl.py; " \
                                     "--kind impl lints it as one)"
    code, lines, _ = cli(capsys, "lint", notes, "--kind", "impl")
    assert code == 1 and lines[0] == f"{notes}: impl" and " OL01 " in lines[1]  # no jit function


def test_run_refuses_a_bad_interpreter_setting_before_any_case(capsys, monkeypatch):
    monkeypatch.setenv("PTOGYM_SILENCE", "A-BAD")
    code, lines, _ = cli(capsys, "run", "rms_norm", "level0")
    assert code == 2 and lines[-1] == "[RUN_ERROR]" and "PTOGYM_SILENCE: A-BAD not an advice id" in lines[-2]
    assert not any(line.startswith("[1/") for line in lines)
    monkeypatch.setenv("PTOGYM_SILENCE", "")
    monkeypatch.setenv("PTOGYM_MAX_KERNEL_TRIPS", "-3")
    code, lines, _ = cli(capsys, "run", "rms_norm", "level0")
    assert code == 2 and "PTOGYM_MAX_KERNEL_TRIPS='-3': use a positive integer" in lines[-2]


def test_lint_checks_its_json_file_before_linting(capsys):
    code, lines, _ = cli(capsys, "lint", REPO / "examples", "--json", "/nonexistent/x.json")
    assert code == 2 and lines == ["error: --json: cannot write /nonexistent/x.json: directory /nonexistent does not "
                                   "exist", "[LINT_ERROR] nothing linted"]


def test_interp_keeps_chained_exceptions_and_syntax_errors_as_python_shows_them(tmp_path):
    chained = tmp_path / "chained.py"
    chained.write_text("try:\n    {}['k']\nexcept KeyError as error:\n    raise ValueError('wrapped') from error\n")
    done = ptogym("interp", chained)
    assert done.returncode == 1 and "KeyError: 'k'" in done.stderr and "ValueError: wrapped" in done.stderr
    assert "The above exception was the direct cause" in done.stderr and "ptogym/interp" not in done.stderr
    broken = tmp_path / "broken.py"
    broken.write_text("x = (\n")
    done = ptogym("interp", broken)
    assert done.returncode == 1 and f'File "{broken}", line 1' in done.stderr and "SyntaxError" in done.stderr
