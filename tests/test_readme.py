"""Every code block of README.md runs as a test.

* ``python`` blocks are executed (each in a fresh namespace);
* ``bash`` blocks: ``python3 -m ptogym ...`` commands run in-process and must pass;
  install and test-suite commands must be exactly what CI (``.ci/run``) runs;
* ``text`` blocks listing ``ptogym`` commands: each command exists and its ``--help``
  works; other text blocks are sample output, checked for the commands they name.
"""
from __future__ import annotations

import re
import runpy
import shlex
from pathlib import Path

import pytest

from ptogym.cli import SUBCOMMANDS, _command_parser, main

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
CI_SCRIPT = (REPO / ".ci" / "run").read_text(encoding="utf-8")
BLOCKS = [(match.group(1), match.group(2), README[:match.start()].count("\n") + 1)
          for match in re.finditer(r"^```(\w*)\n(.*?)^```", README, flags=re.S | re.M)]


def _params(language: str) -> list:
    return [pytest.param(code, id=f"README.md:{line}") for lang, code, line in BLOCKS if lang == language]


def test_the_readme_has_code_blocks_of_known_languages():
    assert BLOCKS and {language for language, _, _ in BLOCKS} <= {"python", "bash", "text"}


_FILE_NAME = re.compile(r"^# (?P<name>\w+\.py):")


def _python_blocks() -> list[tuple[str, str]]:
    """(file name, code) of each python block: the name its first line gives
    (``# kernel.py: ...``), else readme_block<N>.py."""
    blocks = [code for language, code, _ in BLOCKS if language == "python"]
    named = [(_FILE_NAME.match(code), code) for code in blocks]
    return [(match["name"] if match else f"readme_block{index}.py", code) for index, (match, code) in enumerate(named)]


def test_python_blocks_run_in_order_beside_each_other(tmp_path, monkeypatch):
    """Each block is a real file (kernels are parsed from their source) in one folder,
    so a later block imports an earlier one (``from kernel import build``)."""
    monkeypatch.syspath_prepend(str(tmp_path))
    for name, code in _python_blocks():
        (tmp_path / name).write_text(code)
        runpy.run_path(str(tmp_path / name), run_name="__main__")


def test_the_readme_kernel_is_lint_clean(tmp_path, capsys):
    kernels = [(name, code) for name, code in _python_blocks() if name == "kernel.py" or name.endswith("_impl.py")]
    assert kernels, "the README shows a kernel file"
    for name, code in kernels:
        (tmp_path / name).write_text(code)
        assert main(["lint", str(tmp_path / name)]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert lines[0] == f"{tmp_path / name}: impl" and lines[-1].startswith("[LINT_PASS]"), lines


def _commands_block() -> str:
    return next(code for language, code, _ in BLOCKS if language == "text" and code.startswith("ptogym list"))


@pytest.mark.parametrize("command", sorted(SUBCOMMANDS))
def test_the_commands_list_names_every_option_argparse_has(command):
    """README's Commands block against each command's parser: the same options, none
    missing and none stale (--help and --debug, which every command has, aside)."""
    documented = set()
    for line in _commands_block().splitlines():
        words = line.split()
        if words[:2] == ["ptogym", command]:
            documented |= {word.strip("[]|.,").split("=")[0].split("[")[0] for word in words[2:]
                           if word.lstrip("[").startswith("-")}
    parser = _command_parser(command)
    options = {option for action in parser._actions for option in action.option_strings if option.startswith("-")}
    long_options = {option for option in options if option.startswith("--") or option == "-m"}
    assert documented - {"--debug"} == long_options - {"--help", "--debug"}


def _commands(code: str) -> list[list[str]]:
    """Each shell command of a block (``&&`` splits one line into two), ``-q`` left out
    (CI installs quietly; that changes nothing else)."""
    commands = []
    for line in code.splitlines():
        for part in line.split("&&"):
            if part.strip() and not part.strip().startswith("#"):
                commands.append([word for word in shlex.split(part) if word != "-q"])
    return commands


@pytest.mark.parametrize("code", _params("bash"))
def test_bash_blocks_are_what_ci_runs_and_ptogym_commands_pass(code, capsys):
    ci_commands = _commands(CI_SCRIPT)
    for command in _commands(code):
        if command[:3] == ["python3", "-m", "ptogym"]:
            exit_code = main(command[3:])
            lines = capsys.readouterr().out.splitlines()
            assert exit_code == 0 and lines[-1] in ("[PRECISION_PASS]", "[OK]"), lines[-5:]
        else:
            assert command in ci_commands, f"{' '.join(command)!r} is not run by .ci/run"


@pytest.mark.parametrize("code", _params("text"))
def test_text_blocks_name_real_commands(code, capsys):
    for line in code.splitlines():
        if not line.startswith("ptogym "):
            continue
        command = line.split()[1]
        assert command in SUBCOMMANDS, line
        assert main([command, "--help"]) == 0, line
        assert "usage" in capsys.readouterr().out.lower()


def test_ci_runs_the_quick_start_and_leaves_the_slow_levels_to_demand():
    """CI stays under 20 minutes: the README's two commands, and the slow levels (~40 min) on
    demand with the command the README gives."""
    assert "python3 -m pytest -q -m 'slow and not model'" in README
    assert [c for c in _commands(CI_SCRIPT) if c[:3] == ["python3", "-m", "pytest"]] == [["python3", "-m", "pytest"]]
