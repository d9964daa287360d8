"""docs/workflow.md's worked example runs as written in a fresh copy of the repository.

Every ``$ command`` of the section's text blocks runs in order, from the root of a
copy of the tracked files (``python3`` is this interpreter), and its stdout plus
``exit N`` must be what the page shows: the "worst elements" tables of failing
comparisons are shortened to ``... (N rows elided)`` on both sides and the log's
timestamps are left out of the comparison.  Commands that need real pypto (``flock``
...) are left to the ``pypto`` marked suite.

    python3 tests/test_workflow_doc.py --write   # re-run the section and paste the outputs into the page
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "workflow.md"
SECTION = ("## Worked example", "## Lint rules")
_TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d")
_TABLE_HEADER = re.compile(r"^\s+index\s+actual\s+expected")
_NEEDS_PYPTO = ("flock ",)


def section_bounds(text: str) -> tuple[int, int]:
    return text.index(SECTION[0]), text.index(SECTION[1])


def transcripts(text: str) -> list[tuple[str, str]]:
    """(command, expected output with its ``exit N`` line) of each ``$ `` line of the section."""
    start, end = section_bounds(text)
    found = []
    for block in re.findall(r"^```text\n(.*?)^```", text[start:end], flags=re.S | re.M):
        for chunk in re.split(r"^\$ ", block, flags=re.M)[1:]:
            command, _, output = chunk.partition("\n")
            found.append((command, output))
    return found


def elide(output: str) -> str:
    """The rows of each "worst elements" table replaced by one ``... (N rows elided)`` line."""
    lines, result, index = output.splitlines(), [], 0
    while index < len(lines):
        result.append(lines[index])
        index += 1
        if _TABLE_HEADER.match(result[-1]):
            rows = 0
            while index < len(lines) and lines[index].startswith("    ") and not _TABLE_HEADER.match(lines[index]):
                rows, index = rows + 1, index + 1
            result.append(f"    ... ({rows} rows elided)")
    return "".join(f"{line}\n" for line in result)


def comparable(output: str) -> str:
    return _TIMESTAMP.sub("<timestamp>", output)


def fresh_copy(target: Path) -> Path:
    """The repository's tracked files (as they are in the working tree) under *target*."""
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    for name in filter(None, tracked.decode().split("\0")):
        source = REPO / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


def run_section(root: Path, commands: list[str]) -> list[str]:
    """Run *commands* in order from *root*; each one's stdout and ``exit N``."""
    bin_dir = root / ".test-bin"
    bin_dir.mkdir(exist_ok=True)
    launcher = bin_dir / "python3"  # a script, not a symlink: a venv's interpreter finds its venv from its path
    launcher.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    launcher.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(root)}
    env.pop("PTOGYM_BACKEND", None)
    outputs = []
    for command in commands:
        done = subprocess.run(["bash", "-c", command], cwd=root, env=env, capture_output=True, text=True, timeout=300)
        assert "Traceback" not in done.stderr, (command, done.stderr)
        outputs.append(elide(done.stdout) + f"exit {done.returncode}\n")
    return outputs


def test_the_worked_example_runs_as_written_in_a_fresh_copy(tmp_path):
    steps = transcripts(PAGE.read_text(encoding="utf-8"))
    assert len(steps) >= 10 and steps[0][0] == "mkdir -p work"
    runnable = [(command, expected) for command, expected in steps if not command.startswith(_NEEDS_PYPTO)]
    root = fresh_copy(tmp_path / "clone")
    committed = {path: path.read_bytes() for path in (root / "examples").rglob("*") if path.is_file()}
    for (command, expected), actual in zip(runnable, run_section(root, [command for command, _ in runnable])):
        assert comparable(actual) == comparable(expected), f"$ {command}"
    after = {path: path.read_bytes() for path in (root / "examples").rglob("*") if path.is_file()
             if "__pycache__" not in path.parts}
    assert after == committed  # the committed package and its logs are left alone


def _write() -> None:
    """Re-run the section in a fresh copy and paste each output under its command."""
    text = PAGE.read_text(encoding="utf-8")
    steps = [(command, output) for command, output in transcripts(text) if not command.startswith(_NEEDS_PYPTO)]
    with tempfile.TemporaryDirectory() as folder:
        outputs = run_section(fresh_copy(Path(folder)), [command for command, _ in steps])
    start, end = section_bounds(text)
    section = text[start:end]
    position = 0
    for (command, old), new in zip(steps, outputs):
        at = section.index(f"$ {command}\n{old}", position)
        section = section[:at] + f"$ {command}\n{new}" + section[at + len(f"$ {command}\n{old}"):]
        position = at + len(command) + len(new)
    PAGE.write_text(text[:start] + section + text[end:], encoding="utf-8")


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit(__doc__)
    _write()
