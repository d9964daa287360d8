"""``ptogym new OP [--modules N] [--dir D]``: scaffold an operator package.

The package works out of the box (``ptogym run OP --quick`` passes with the
placeholder kernel), so its author replaces working code module by module instead
of starting from an empty file.  ``--modules N`` also writes the cumulative staged
files ``OP_module1_impl.py`` ... ``OP_module1..N_impl.py`` with their boundary
tensor hooks for ``ptogym stage``.  Verdict: ``[NEW_OK]`` exit 0, ``[NEW_ERROR]`` exit 2.
"""
from __future__ import annotations

import argparse
import ast
import builtins
import functools
import importlib.util
import json
import keyword
import re
import site
import sys
import sysconfig
from pathlib import Path

from ptogym import ops as ops_package
from ptogym._io import atomic_directory
from ptogym.ops import OP_NAMES, OPS_DIR

from . import templates

MAX_MODULES = 9  # staged suffixes are single digits: 1, 12, ... 123456789
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


def _indent(lines, spaces: int) -> str:
    return "\n".join(" " * spaces + line for line in lines)


def _source(k: int) -> str:
    """The tensor placeholder module k doubles: x, then the previous module's boundary."""
    return "x" if k == 1 else f"module{k - 1}_out"


def _kernel_build(name: str, modules: int) -> str:
    # results named after the golden's probes: how `ptogym bisect` matches kernel ops to them
    operands = ["x_fp32"] + [_source(k) for k in range(2, modules + 1)]  # the kernel computes x in fp32
    steps = [f"module{k}_out = pypto.mul({operand}, 2.0)  # golden: scale{k}" for k, operand in enumerate(operands, 1)]
    return templates.KERNEL_BUILD.substitute(name=name, kernel_steps=_indent(steps, 12), result=f"module{modules}_out")


def package_files(op: str, modules: int, staged: bool, directory: Path) -> dict[str, str]:
    """file name -> text of the package ``op`` (written to ``directory``) with ``modules``
    placeholder modules."""
    inventory = [f"M{k} scale{k:<6} module{k}_out = {_source(k)} * 2" for k in range(1, modules + 1)]
    golden_steps = [f'h = probe("module{k}_out", h * 2.0)' for k in range(1, modules + 1)]
    files = {
        "__init__.py": templates.INIT.substitute(op=op),
        "golden.py": templates.GOLDEN.substitute(op=op, inventory=_indent(inventory, 4),
                                                 golden_steps=_indent(golden_steps, 4)),
        "kernel.py": templates.KERNEL.substitute(op=op, build=_kernel_build(op, modules)),
        "op.py": templates.OP.substitute(op=op, factor=2 ** modules),
        f"test_{op}.py": templates.TEST.substitute(op=op),
        "cases.json": json.dumps({"op": op, "required_levels": ["level0", "level1"],
                                  "tolerances": templates.CASES_TOLERANCES,
                                  "levels": list(templates.CASES_LEVELS)}, indent=2) + "\n",
    }
    staged_names = []
    if staged:
        for k in range(1, modules + 1):
            suffix = "".join(str(i) for i in range(1, k + 1))
            name = f"{op}_module{suffix}_impl.py"
            staged_names.append(name)
            files[name] = templates.STAGED.substitute(op=op, k=k, suffix=suffix, file=name, boundary=f"module{k}_out",
                                                      build=_kernel_build(f"{op}_module{suffix}", k))
    rows = [f"| M{k} | scale{k}: module{k}_out = {_source(k)} * 2 | {_source(k)} | module{k}_out | "
            f"{staged_names[k - 1] if staged else 'kernel.py'} |" for k in range(1, modules + 1)]
    files["DESIGN.md"] = templates.DESIGN.substitute(
        op=op, n=modules, complexity=0.5 * modules, module_rows="\n".join(rows),
        path="L1: staged chain (ptogym stage)" if staged else "L0: one kernel.py, verified end to end")
    files["README.md"] = templates.README.substitute(
        op=op, factor=2 ** modules, modules_flag=f" --modules {modules}" if staged else "",
        staged_rows="".join(f"| `{name}` | staged file: modules 1..{k} |\n" for k, name in enumerate(staged_names, 1)),
        dir=directory, ref=run_reference(directory))
    return files


def run_reference(target: Path) -> str:
    """What the tools take for the package at *target*: its name where this ptogym's
    registry finds it (ptogym/ops), else its directory."""
    return target.name if target.parent.resolve() == OPS_DIR.resolve() else str(target)


def scaffold(op: str, modules: int | None = None, directory: Path | None = None) -> Path:
    """Write the package and return its directory; ValueError / FileExistsError / OSError
    on bad input or a failed write, with nothing left behind."""
    if not _NAME.match(op) or keyword.iskeyword(op):
        raise ValueError(f"OP {op!r}: use a lower-case Python identifier (letters, digits, _)")
    if modules is not None and not 1 <= modules <= MAX_MODULES:
        raise ValueError(f"--modules {modules}: use 1..{MAX_MODULES} (staged file suffixes are digits)")
    parent = default_directory() if directory is None else directory
    if not parent.is_dir():
        raise ValueError(f"--dir {parent}: no such directory")
    if installed := _installed_location(parent):
        raise ValueError(f"{'--dir ' if directory is not None else ''}{parent} lies in the installed packages "
                         f"({installed}); run 'ptogym new' in your project or give --dir")
    target = parent / op
    if target.exists():
        raise FileExistsError(f"{target} already exists; pick another name or remove it")
    if clash := shadowed_name(op):
        raise ValueError(f"OP {op!r}: {clash}; pick another name")
    files = package_files(op, modules or 1, modules is not None, target)
    with atomic_directory(target) as folder:  # the package appears whole or not at all
        for name, text in files.items():
            (folder / name).write_text(text, encoding="utf-8")
    return target


def default_directory(cwd: Path | None = None) -> Path:
    """``ptogym/ops`` of the ptogym checkout the working directory lies in, else the
    working directory itself: the user's project, never the installed package."""
    cwd = Path.cwd() if cwd is None else cwd
    if _installed_location(cwd):
        return cwd  # refused by scaffold(), not walked up out of
    for folder in (cwd, *cwd.parents):
        ops_dir = folder / "ptogym" / "ops"
        if (folder / "pyproject.toml").is_file() and (ops_dir / "__init__.py").is_file():
            return ops_dir
    return cwd


def installed_roots() -> set[str]:
    """The interpreter's library and site-packages directories."""
    paths = sysconfig.get_paths()
    return {paths["purelib"], paths["platlib"], paths["stdlib"], *site.getsitepackages(), site.getusersitepackages()}


def _installed_location(directory: Path) -> str | None:
    """The installed-packages directory holding *directory*, if any."""
    resolved = directory.resolve()
    return next((root for root in sorted(installed_roots()) if resolved.is_relative_to(Path(root).resolve())), None)


def shadowed_name(op: str) -> str | None:
    """Why *op* cannot name a package, or None: the package would hide a module Python
    or ptogym imports (``inplace`` is ``ptogym/ops/inplace.py``, ``json`` the standard
    library's) or a name its own files define (``launch`` in op.py)."""
    if op in sys.stdlib_module_names or op in sys.builtin_module_names:
        return "a module of Python's standard library has that name"
    if hasattr(builtins, op):
        return "a Python built-in has that name"
    if op in OP_NAMES:
        return f"{op} is a registered operator (ptogym/ops/{op})"
    if any((OPS_DIR / f"{op}{suffix}").exists() for suffix in (".py", "")):
        return f"ptogym/ops/{op} exists and ptogym imports it"
    if op in dir(ops_package):
        return f"ptogym.ops.{op} is part of the operator registry"
    if op in _template_names():
        return f"the package's own files define {op!r}"
    try:
        found = importlib.util.find_spec(op)
    except (ImportError, ValueError):
        found = None
    if found is not None:
        return f"an installed module has that name ({found.origin or found.name})"
    return None


@functools.cache
def _template_names() -> frozenset:
    """Every module-level name the scaffold's Python files bind (imports, defs, constants)."""
    names = set()
    for name, text in package_files("placeholder_op", 2, True, OPS_DIR / "placeholder_op").items():
        if name.endswith(".py"):
            names |= {Path(name).stem}
            for node in ast.parse(text).body:
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    names |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
                elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                    names.add(node.name)
                elif isinstance(node, ast.Assign):
                    names |= {target.id for target in node.targets if isinstance(target, ast.Name)}
    return frozenset(name for name in names if "placeholder_op" not in name)


def command(args: argparse.Namespace) -> int:
    try:
        target = scaffold(args.op, args.modules, args.dir)
    except (ValueError, OSError) as error:
        print(f"error: {error}")
        print(f"[NEW_ERROR] {args.op}: nothing written")
        return 2
    for path in sorted(target.iterdir()):
        print(f"  {path}")
    print(f"[NEW_OK] {target}: {len(list(target.iterdir()))} files; next: ptogym run {run_reference(target)} --quick")
    return 0
