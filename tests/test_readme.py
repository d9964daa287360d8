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

from ptogym.cli import SUBCOMMANDS, main

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
CI_SCRIPT = (REPO / ".ci" / "run").read_text(encoding="utf-8")
BLOCKS = [(match.group(1), match.group(2), README[:match.start()].count("\n") + 1)
          for match in re.finditer(r"^```(\w*)\n(.*?)^```", README, flags=re.S | re.M)]


def _params(language: str) -> list:
    return [pytest.param(code, id=f"README.md:{line}") for lang, code, line in BLOCKS if lang == language]


def test_the_readme_has_code_blocks_of_known_languages():
    assert BLOCKS and {language for language, _, _ in BLOCKS} <= {"python", "bash", "text"}


@pytest.mark.parametrize("code", _params("python"))
def test_python_blocks_run(code, tmp_path):
    script = tmp_path / "readme_block.py"  # a real file: kernels are parsed from their source
    script.write_text(code)
    runpy.run_path(str(script), run_name="__main__")


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


def test_the_slow_command_the_readme_gives_is_run_by_ci():
    assert "python3 -m pytest -q -m slow" in README
    assert ["python3", "-m", "pytest", "-m", "slow"] in _commands(CI_SCRIPT)
