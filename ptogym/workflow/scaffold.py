"""``ptogym new OP [--modules N] [--dir D]``: scaffold an operator package.

The package works out of the box (``ptogym run OP --quick`` passes with the
placeholder kernel), so its author replaces working code module by module instead
of starting from an empty file.  ``--modules N`` also writes the cumulative staged
files ``OP_module1_impl.py`` ... ``OP_module1..N_impl.py`` with their boundary
tensor hooks for ``ptogym stage``.  Verdict: ``[NEW_OK]`` exit 0, ``[NEW_ERROR]`` exit 2.
"""
from __future__ import annotations

import argparse
import json
import keyword
import re
from pathlib import Path

from ptogym.ops import OPS_DIR

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
    registered = directory.parent.resolve() == OPS_DIR.resolve()  # `ptogym run OP` finds it
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
        dir=directory, ref=op if registered else directory,
        run_cases=f"python3 -m ptogym run {op} --quick  # cases against the golden" if registered else
        f"python3 -m pytest {directory / f'test_{op}.py'}  # cases against the golden")
    return files


def scaffold(op: str, modules: int | None = None, directory: Path | None = None) -> Path:
    """Write the package and return its directory; ValueError / FileExistsError on bad input."""
    if not _NAME.match(op) or keyword.iskeyword(op):
        raise ValueError(f"OP {op!r}: use a lower-case Python identifier (letters, digits, _)")
    if modules is not None and not 1 <= modules <= MAX_MODULES:
        raise ValueError(f"--modules {modules}: use 1..{MAX_MODULES} (staged file suffixes are digits)")
    target = (directory or OPS_DIR) / op
    if target.exists():
        raise FileExistsError(f"{target} already exists; pick another name or remove it")
    files = package_files(op, modules or 1, modules is not None, target)
    target.mkdir(parents=True)
    for name, text in files.items():
        (target / name).write_text(text, encoding="utf-8")
    return target


def command(args: argparse.Namespace) -> int:
    try:
        target = scaffold(args.op, args.modules, args.dir)
    except (ValueError, OSError) as error:
        print(f"error: {error}")
        print(f"[NEW_ERROR] {args.op}: nothing written")
        return 2
    for path in sorted(target.iterdir()):
        print(f"  {path}")
    run_name = args.op if args.dir is None else str(target)
    next_step = f"ptogym run {args.op} --quick" if args.dir is None else f"ptogym stage {run_name}"
    print(f"[NEW_OK] {target}: {len(list(target.iterdir()))} files; next: {next_step}")
    return 0
