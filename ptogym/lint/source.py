"""One parsed Python file and the facts the lint rules ask about it.

Kernels here are *builders* (``def build(pypto, ...)`` returning a jit function) as
well as upstream-style modules doing ``import pypto``; either way the PyPTO
namespace is a name, ``pypto`` (or an alias the file imports it as).

The *graph* of a jit kernel is the jit function plus every function of the same
file it calls by name, transitively: that code runs inside pypto's parser.
"""
from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

TILE_SETTERS = ("set_vec_tile_shapes", "set_cube_tile_shapes")
LOOP_CALLS = ("loop", "loop_unroll")
_STAGED_IMPL = re.compile(r"^(?P<op>.+)_module(?P<k>\d+)_impl$")
_FINAL_IMPL = re.compile(r"^(?P<op>.+)_impl$")


def dotted(node: ast.AST) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def walk_body(function: ast.AST):
    """Every node inside ``function`` except the bodies of functions/classes nested in it."""
    stack = list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))


KINDS = ("impl", "golden", "test", "host")  # the rules' targets; "impl" is a kernel


def file_kind(path: Path) -> str:
    """impl (a kernel), golden, test or host (anything else: op.py, wrappers, tools)."""
    stem = path.stem
    if stem == "golden" or stem.endswith("_golden"):
        return "golden"
    if stem.startswith("test_") or stem.endswith("_test"):
        return "test"
    if stem == "kernel" or stem.endswith("_impl"):
        return "impl"
    return "host"


@dataclass
class Source:
    path: Path
    text: str
    tree: ast.Module
    kind: str
    pypto_aliases: set = field(default_factory=lambda: {"pypto"})

    @classmethod
    def parse(cls, path: Path, kind: str | None = None) -> "Source":
        """*path* parsed, its kind from its name unless *kind* is given."""
        text = path.read_text(encoding="utf-8")
        source = cls(path, text, ast.parse(text, filename=str(path)), kind or file_kind(path))
        for node in ast.walk(source.tree):
            if isinstance(node, ast.Import):
                source.pypto_aliases |= {a.asname for a in node.names if a.name == "pypto" and a.asname}
        return source

    def comment_matches(self, pattern: re.Pattern) -> dict[int, re.Match]:
        """line -> the match of ``pattern`` in that line's comment (real comments, not strings)."""
        found = {}
        for token in tokenize.generate_tokens(io.StringIO(self.text).readline):
            match = pattern.search(token.string) if token.type == tokenize.COMMENT else None
            if match:
                found[token.start[0]] = match
        return found

    # --- the PyPTO namespace ------------------------------------------------------
    def pypto_attr(self, node: ast.AST) -> str | None:
        """For ``pypto.a.b`` (any alias) return "a.b", else None."""
        name = dotted(node)
        if name is None or "." not in name:
            return None
        root, rest = name.split(".", 1)
        return rest if root in self.pypto_aliases else None

    def pypto_call(self, node: ast.AST, *names: str) -> str | None:
        """The pypto function a Call calls ("loop", "frontend.jit" ...), optionally one of ``names``."""
        if not isinstance(node, ast.Call):
            return None
        attr = self.pypto_attr(node.func)
        if attr is None or (names and attr not in names):
            return None
        return attr

    def calls(self, function: ast.AST, *names: str):
        """pypto calls inside ``function`` (not nested defs), optionally only ``names``."""
        return [node for node in walk_body(function) if self.pypto_call(node, *names)]

    # --- functions ----------------------------------------------------------------
    @cached_property
    def functions(self) -> dict[str, list[ast.FunctionDef]]:
        table: dict[str, list] = {}
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                table.setdefault(node.name, []).append(node)
        return table

    def is_jit(self, function: ast.FunctionDef) -> bool:
        for decorator in function.decorator_list:
            target = decorator.func if isinstance(decorator, ast.Call) else decorator
            attr = self.pypto_attr(target)
            if attr in ("frontend.jit", "jit"):
                return True
        return False

    @cached_property
    def jit_functions(self) -> list[ast.FunctionDef]:
        return [f for group in self.functions.values() for f in group if self.is_jit(f)]

    def callees(self, function: ast.AST) -> list[ast.FunctionDef]:
        """Functions of this file that ``function`` calls by plain name."""
        found = []
        for node in walk_body(function):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                found.extend(self.functions.get(node.func.id, ()))
        return found

    def graph(self, jit: ast.FunctionDef) -> list[ast.FunctionDef]:
        """The jit function and everything of this file it reaches by calls."""
        seen, order, todo = set(), [], [jit]
        while todo:
            function = todo.pop()
            if id(function) in seen:
                continue
            seen.add(id(function))
            order.append(function)
            todo.extend(self.callees(function))
        return order

    @cached_property
    def graph_functions(self) -> list[ast.FunctionDef]:
        """Every function that runs inside some jit kernel of the file, each once."""
        unique = {}
        for jit in self.jit_functions:
            unique.update((id(f), f) for f in self.graph(jit))
        return list(unique.values())

    @cached_property
    def wrappers(self) -> list[ast.FunctionDef]:
        """Layer K host wrappers: functions named ``*_wrapper``."""
        return [f for group in self.functions.values() for f in group
                if f.name.endswith("_wrapper") and not self.is_jit(f)]

    def staged_name(self) -> tuple[str, str] | None:
        """(op, expected wrapper name) for ``<op>_module<k>_impl.py`` / ``<op>_impl.py`` files."""
        match = _STAGED_IMPL.match(self.path.stem)
        if match:
            return match["op"], f"{match['op']}_module{match['k']}_wrapper"
        match = _FINAL_IMPL.match(self.path.stem)
        if match:
            return match["op"], f"{match['op']}_wrapper"
        return None

    def constant_assignments(self) -> dict[str, ast.AST]:
        """name -> value for single-name assignments anywhere in the file (last one wins)."""
        table = {}
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                table[node.targets[0].id] = node.value
        return table
