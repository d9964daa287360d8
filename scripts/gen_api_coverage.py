"""Which public names of pypto 0.2.0 ``ptogym.interp`` implements, and why the others
raise NotImplementedError; writes ``docs/api-coverage.md``.

    python3 scripts/gen_api_coverage.py           # rewrite docs/api-coverage.md
    python3 scripts/gen_api_coverage.py --check   # exit 1 if it is out of date

Public names are those a kernel can reach: the ``pypto`` namespace (which gathers
``pypto.op.*``, ``pypto.operation``, the config and enum modules), ``pypto.frontend``,
``pypto.experimental``, ``pypto.operation``, ``pypto.enum`` and ``pypto.distributed``,
minus what those modules merely import from the standard library (``typing``,
``dataclasses``, ``functools``, ...), plus the few ``pypto.pypto_impl`` names that
published kernels call.  ``tests/test_api_coverage.py`` fails on any name that is
neither implemented nor a documented stub, and on a stale document.
"""
import dataclasses
import enum
import functools
import importlib
import re
import struct
import sys
import types
import typing
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
DOC = REPO / "docs" / "api-coverage.md"
FIXTURE = REPO / "tests" / "fixtures" / "api_ops.pt"

# pypto module -> attribute path of its counterpart in ptogym.interp ("" = the package)
MODULES = {"pypto": "", "pypto.frontend": "frontend", "pypto.experimental": "experimental",
           "pypto.operation": "operation", "pypto.enum": "enums", "pypto.distributed": "distributed"}
OP_FAMILIES = ["comparison", "conv", "creation", "indexing", "joining", "math", "matmul", "mutating", "other",
               "reduction", "verify"]  # pypto.op.<family>, all re-exported by the pypto namespace
# the pypto_impl names published kernels call (model kernels' scalar_div helper, platform query)
IMPL_NAMES = ["DataType", "Element", "GetNPUArch", "LogTopFolder", "ScalarDivS"]
_STDLIB = [typing, dataclasses, functools, enum, re, struct, sys]


def _is_reexport(name: str, obj) -> bool:
    """An import of pypto's module from the standard library (or torch), not its API."""
    if isinstance(obj, types.ModuleType):
        return True
    return any(getattr(module, name, None) is obj for module in _STDLIB) or \
        getattr(obj, "__module__", "") in ("typing", "dataclasses", "functools") and name != "SymInt"


def public_names(module) -> list:
    return sorted(n for n in dir(module) if not n.startswith("_") and not _is_reexport(n, getattr(module, n)))


def _ours(path: str):
    import ptogym.interp as interp
    target = interp
    for part in filter(None, path.split(".")):
        target = getattr(target, part)
    return target


def _fixture_counts() -> dict:
    """name -> {kind: count} over the recorded real-pypto API cases."""
    import torch
    from collections import Counter

    counts: dict = {}
    if not FIXTURE.exists():
        return counts
    for entry in torch.load(FIXTURE).values():
        kind = "outputs" if "outputs" in entry else entry["stage"]
        for name in set(re.findall(r"(?:pypto\.|pypto_impl\.|\.)(\w+)\(", entry["code"])) | \
                ({"ScalarDivS", "op_wrapper", "Element"} if "scalar_div(" in entry["code"] else set()):
            counts.setdefault(name, Counter())[kind] += 1
    return counts


@dataclasses.dataclass
class Row:
    module: str
    name: str
    defined_in: str   # where pypto defines it
    status: str       # implemented | not emulated | MISSING
    ours: str         # where ptogym.interp defines it
    note: str         # the reason for a stub; the fixture cases for an implemented name


def _where(obj) -> str:
    module = getattr(obj, "__module__", None) or getattr(type(obj), "__module__", "")
    return module or "?"


def rows() -> list:
    import pypto  # noqa: F401 (the real package)

    counts = _fixture_counts()
    result = []
    pairs = [(mod, name) for mod in MODULES for name in public_names(importlib.import_module(
        "pypto.op.distributed" if mod == "pypto.distributed" else mod))]
    pairs += [("pypto.pypto_impl", name) for name in IMPL_NAMES]
    for module, name in pairs:
        real_module = importlib.import_module("pypto.op.distributed" if module == "pypto.distributed" else module)
        theirs = getattr(real_module, name)
        our_module = _ours("pypto_impl" if module == "pypto.pypto_impl" else MODULES[module])
        mine = getattr(our_module, name, None)
        if mine is None:
            status, ours, note = "MISSING", "", ""
        elif hasattr(mine, "__not_emulatable__"):
            status, ours, note = "not emulated", _where(mine), mine.__not_emulatable__
        else:
            status, ours = "implemented", _where(mine)
            seen = counts.get(name)
            note = ", ".join(f"{n} {k}" for k, n in sorted(seen.items())) if seen else ""
        result.append(Row(module, name, _where(theirs), status, ours, note))
    return result


def op_family_names() -> dict:
    """pypto.op.<family> -> its public names (each must also be in the pypto namespace)."""
    return {f"pypto.op.{family}": public_names(importlib.import_module(f"pypto.op.{family}"))
            for family in OP_FAMILIES}


def render(table: list) -> str:
    implemented = sum(r.status == "implemented" for r in table)
    stubs = sum(r.status == "not emulated" for r in table)
    lines = [
        "# pypto 0.2.0 public API in `ptogym.interp`",
        "",
        "Generated by `python3 scripts/gen_api_coverage.py` (checked by `tests/test_api_coverage.py`); do not edit.",
        "",
        f"{len(table)} names: **{implemented} implemented**, **{stubs} not emulated** (calling one raises "
        f"`NotImplementedError` naming it and giving the reason below), "
        f"{len(table) - implemented - stubs} missing.",
        "",
        "Names come from `pypto`, `pypto.frontend`, `pypto.experimental`, `pypto.operation`, `pypto.enum`,",
        "`pypto.distributed` (and through `pypto`, every `pypto.op.*` family), leaving out what those modules",
        "import from the standard library (`typing`, `dataclasses`, `functools`); from `pypto.pypto_impl` only",
        "the names published kernels call.  *Real pypto* counts the cases of `tests/fixtures/api_ops.pt`",
        "(recorded from real pypto 0.2.0 by `scripts/record_api_fixtures.py`, compared by",
        "`tests/test_interp_api_ops.py`) that use the name: `outputs` = its numbers were compared, `rejected` =",
        "pypto refused the kernel and so must the interpreter, `cost-model` = pypto accepted it but its cost",
        "model cannot time the op, so no numbers came out and the interpreter is checked against the documented",
        "formula.  Names without cases here are covered by the older op tests (tests/test_interp_*.py).",
        "",
    ]
    for module in list(MODULES) + ["pypto.pypto_impl"]:
        section = [r for r in table if r.module == module]
        lines += [f"## `{module}` ({len(section)})", "",
                  "| name | status | in ptogym.interp | pypto defines it in | real pypto / reason |",
                  "|---|---|---|---|---|"]
        lines += [f"| `{r.name}` | {r.status} | {r.ours} | {r.defined_in} | {r.note} |" for r in section]
        lines.append("")
    return "\n".join(lines)


def write_or_check(doc: Path, text: str, argv: list, script: str) -> int:
    """Write *text* to *doc*, or with ``--check`` exit 1 if *doc* differs (shared by the doc generators)."""
    relative = doc.relative_to(REPO)
    if argv[:1] == ["--check"]:
        if (doc.read_text(encoding="utf-8") if doc.exists() else "") != text:
            print(f"{relative} is out of date: run python3 scripts/{script}")
            return 1
        print(f"{relative} is up to date")
        return 0
    doc.write_text(text, encoding="utf-8")
    print(f"wrote {relative}")
    return 0


def main(argv: list) -> int:
    return write_or_check(DOC, render(rows()), argv, Path(__file__).name)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
