"""The golden function inventory (seed rule 19) and the kernel lines implementing it.

golden.py's module docstring lists every mathematical operation, one per line,
with the module that implements it::

    Golden function inventory:
        M1 add       x_add = x1 + x2
        M2 rsqrt     rstd = 1 / sqrt(mean(x_add^2) + eps)

(the list ends at the first blank line).  A kernel marks the line that implements
an entry with a trailing ``# golden: add`` comment (several: ``# golden: add, cast``);
the marked line must call pypto.  A module file k must mark every entry of
modules 1..k; an unmarked entry is a stage failure.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from ptogym.lint.source import Source

_HEADER = "Golden function inventory:"
_ENTRY = re.compile(r"^\s*M(?P<module>\d+)\s+(?P<name>[A-Za-z_][\w.]*)\s*(?P<text>.*)$")
_MARK = re.compile(r"#\s*golden:\s*(?P<names>[\w.]+(?:\s*,\s*[\w.]+)*)")


@dataclass(frozen=True)
class Entry:
    module: int
    name: str
    text: str


@dataclass(frozen=True)
class Check:
    entry: Entry
    location: str | None  # file:line of the marking kernel line, None when unmarked
    problem: str | None = None

    @property
    def ok(self) -> bool:
        return self.location is not None and self.problem is None

    def line(self) -> str:
        mark = "OK " if self.ok else "MISSING" if self.location is None else "BAD"
        where = self.location or "no `# golden:` mark"
        problem = f"  ({self.problem})" if self.problem else ""
        return f"  [{mark}] M{self.entry.module} {self.entry.name:<14} {where}{problem}"


def read_inventory(golden_path: Path) -> list[Entry]:
    """Entries of the golden's inventory; ValueError when the header or an entry is malformed."""
    doc = ast.get_docstring(ast.parse(golden_path.read_text(encoding="utf-8"))) or ""
    lines = doc.splitlines()
    if _HEADER not in (line.strip() for line in lines):
        raise ValueError(f"{golden_path}: the module docstring has no '{_HEADER}' section")
    start = [line.strip() for line in lines].index(_HEADER) + 1
    entries = []
    for line in lines[start:]:
        if not line.strip():
            break
        match = _ENTRY.match(line)
        if match is None:
            raise ValueError(f"{golden_path}: inventory line {line.strip()!r} is not 'M<k> <name> <maths>'")
        entries.append(Entry(int(match["module"]), match["name"], match["text"].strip()))
    if not entries:
        raise ValueError(f"{golden_path}: the golden function inventory is empty")
    return entries


def _marks(kernel: Source) -> dict[str, list[int]]:
    marks: dict[str, list[int]] = {}
    for line, match in kernel.comment_matches(_MARK).items():
        for name in re.split(r"\s*,\s*", match["names"]):
            marks.setdefault(name, []).append(line)
    return marks


def _pypto_call_lines(kernel: Source) -> set[int]:
    """Lines on which a pypto.<op>(...) call sits (any line of a multi-line call)."""
    return {line for node in ast.walk(kernel.tree) if kernel.pypto_call(node)
            for line in range(node.lineno, (node.end_lineno or node.lineno) + 1)}


def check_inventory(entries: list[Entry], kernel_path: Path, up_to_module: int) -> list[Check]:
    """One Check per entry of modules 1..up_to_module against the marks in ``kernel_path``."""
    kernel = Source.parse(kernel_path)
    marks, call_lines = _marks(kernel), _pypto_call_lines(kernel)
    checks = []
    for entry in (e for e in entries if e.module <= up_to_module):
        lines = marks.get(entry.name, [])
        if not lines:
            checks.append(Check(entry, None))
            continue
        location = f"{kernel_path.name}:{lines[0]}"
        problem = None if lines[0] in call_lines else "the marked line calls no pypto op"
        checks.append(Check(entry, location, problem))
    return checks
