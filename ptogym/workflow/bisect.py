"""``ptogym bisect OP [LEVEL] [--module K]``: the first kernel op that diverges from the golden.

The automatic form of the seed's on-board bisection with checkpoint tensors:

1. the golden runs with ``ptogym.probe("name", tensor)`` recording its intermediates;
2. the kernel runs on the interpreter with ``ptogym.interp.trace`` recording every
   op result (op, file:line, semantic label, data);
3. each probe is matched to kernel ops by *name* (the variable the kernel assigns
   the op's result to, else a ``pypto.set_semantic_label`` of that name), then by
   *shape*: the op's tiles, in execution *order*, are stacked along the first axis
   (the row-block loops kernels use) and must hold exactly the probe's elements;
4. every located probe is compared with ``detailed_tensor_compare``; the mismatch
   whose first op ran earliest is the answer, reported with its file:line, the
   compare report and the inputs that reach that line (probe verdicts).

Verdict: ``[BISECT_FOUND]`` exit 1 (a divergence), ``[BISECT_CLEAN]`` exit 0 (every
located probe matches), ``[BISECT_ERROR]`` exit 2 (cannot run, or no probe located).
"""
from __future__ import annotations

import argparse
import ast
import functools
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ptogym.interp import trace
from ptogym.verify.compare import detailed_tensor_compare
from ptogym.verify.runner import open_backend

from .package import WorkflowError, clone_inputs, resolve, setting_up

MARKERS = {0: "[BISECT_CLEAN]", 1: "[BISECT_FOUND]", 2: "[BISECT_ERROR]"}


@dataclass
class ProbeMatch:
    name: str
    shape: tuple
    status: str = "NOT_LOCATED"  # PASS, FAIL, NOT_LOCATED, UNPLACED
    records: list = field(default_factory=list)
    result: object = None  # CompareResult
    note: str = ""

    @property
    def first_index(self) -> int:
        return self.records[0].index if self.records else 1 << 62

    @property
    def where(self) -> str:
        """file name:line of the op that produced the probe's value."""
        return f"{Path(self.records[-1].file).name}:{self.records[-1].line}" if self.records else "-"


@dataclass
class BisectResult:
    op: str
    case: str
    target: str  # what ran: kernel.py or a staged file
    probes: list[ProbeMatch]
    op_count: int

    @property
    def first_mismatch(self) -> ProbeMatch | None:
        failing = [p for p in self.probes if p.status == "FAIL"]
        return min(failing, key=lambda p: p.first_index) if failing else None

    @property
    def exit_code(self) -> int:
        if self.first_mismatch is not None:
            return 1
        return 0 if any(p.status == "PASS" for p in self.probes) else 2


# ------------------------------------------------------------------ naming kernel ops
@functools.lru_cache(maxsize=64)
def _statements(file: str) -> tuple[dict, dict]:
    """(line -> assigned name, line -> statement) for the simple assignments of a source file."""
    names, statements = {}, {}
    try:
        tree = ast.parse(Path(file).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return names, statements
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Expr, ast.Return)):
            targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
            target = targets[0] if len(targets) == 1 else None
            while isinstance(target, ast.Subscript):  # acc[:] = ... names acc
                target = target.value
            for line in range(node.lineno, (node.end_lineno or node.lineno) + 1):
                statements.setdefault(line, node)
                if isinstance(target, ast.Name):
                    names.setdefault(line, target.id)
    return names, statements


def name_records(records) -> list[tuple[str | None, object]]:
    """(name, record) per op: the last op of each run of ops on one line takes the
    line's assigned variable name (``y = mul(mul(a, b), c)`` names the outer mul)."""
    named = []
    for i, record in enumerate(records):
        following = records[i + 1] if i + 1 < len(records) else None
        last_of_line = following is None or (following.file, following.line) != (record.file, record.line)
        named.append((_statements(record.file)[0].get(record.line) if last_of_line else None, record))
    return named


def _labelled(records, label: str) -> list:
    """The last op of each consecutive run of ops under semantic label ``label``."""
    picked = []
    for i, record in enumerate(records):
        following = records[i + 1] if i + 1 < len(records) else None
        if record.label == label and (following is None or following.label != label):
            picked.append(record)
    return picked


def _place(tiles: list, shape: tuple):
    """The probe-shaped tensor the tiles make, stacked along the first axis, or None."""
    datas = [r.data for r in tiles]
    total = sum(d.numel() for d in datas)
    if total != torch.Size(shape).numel() or len({tuple(d.shape[1:]) for d in datas}) != 1:
        return None
    return torch.cat([d.reshape(d.shape[0], -1) if d.dim() else d.reshape(1, 1) for d in datas]).reshape(shape)


def match_probes(probes: dict, records: list, case) -> list[ProbeMatch]:
    named = name_records(records)
    matches = []
    for name, expected in probes.items():
        match = ProbeMatch(name, tuple(expected.shape))
        by_line: dict = {}
        for op_name, record in named:
            if op_name == name:
                by_line.setdefault((record.file, record.line), []).append(record)
        groups = list(by_line.values()) or ([_labelled(records, name)] if _labelled(records, name) else [])
        for tiles in groups:
            placed = _place(tiles, match.shape)
            match.records = tiles
            if placed is not None:
                match.result = detailed_tensor_compare(placed, expected, name,
                                                       **case.boundary_tolerance().bounds())
                match.status = "PASS" if match.result.all_close else "FAIL"
                break
            shapes = sorted({tuple(t.data.shape) for t in tiles})
            match.status = "UNPLACED"
            match.note = f"{len(tiles)} tile(s) of shapes {shapes} do not stack to {list(match.shape)}"
        matches.append(match)
    return matches


# ------------------------------------------------------------------ running
def run_bisect(op: str, level: str | None = None, module: int | None = None) -> BisectResult:
    """Raise WorkflowError when the golden or the kernel cannot run."""
    with setting_up():
        package = resolve(op)
        case = package.case(level)
        backend = open_backend("interp")  # only the interpreter records op results
        staged = {s.module: s for s in package.staged_files()}
        inputs = package.inputs(case)
        candidates = package.golden_boundaries(inputs, case)
    if module is not None and module not in staged:
        raise WorkflowError(f"--module {module}: the staged files are modules {sorted(staged) or 'none'}")
    if module is None:
        target, run = "kernel.py", package.spec.run
    else:
        target, run = staged[module].path.name, package.staged_wrapper(staged[module])
    try:
        with trace.recording() as records:
            run(clone_inputs(inputs), case.attrs, backend)
    except Exception as error:  # a constraint violation or a crash: nothing to bisect
        raise WorkflowError(f"{target} raised {type(error).__name__}: {error}") from error
    return BisectResult(package.name, case.id, target, match_probes(candidates, records, case), len(records))


def _reaching_inputs(result: BisectResult, culprit: ProbeMatch) -> list[str]:
    """Names the culprit's statement reads, with what bisect knows about each."""
    record = culprit.records[-1]
    statement = _statements(record.file)[1].get(record.line)
    value = getattr(statement, "value", statement)
    by_name = {p.name: p for p in result.probes}
    lines = []
    for name in dict.fromkeys(n.id for n in ast.walk(value) if isinstance(n, ast.Name)) if value else ():
        if name == "pypto":
            continue
        probe = by_name.get(name)
        if probe is not None and probe.status in ("PASS", "FAIL"):
            digest = probe.result.brief()
            lines.append(f"{name}: probe {probe.status} at {probe.where}  {digest}")
        else:
            lines.append(f"{name}: not a located probe (kernel input, constant or unprobed intermediate)")
    return lines


def _shown(file: str) -> str:
    """A kernel path relative to the working directory when it lies below it."""
    path = Path(file)
    return str(path.relative_to(Path.cwd())) if path.is_relative_to(Path.cwd()) else file


def report(result: BisectResult) -> str:
    lines = [f"{result.op} [{result.case}] {result.target}: {result.op_count} op result(s) recorded, "
             f"{len(result.probes)} golden probe(s)"]
    width = max((len(p.where) for p in result.probes), default=1)
    for probe in result.probes:
        detail = probe.result.brief() if probe.result is not None else probe.note or "no kernel op named after it"
        lines.append(f"  {probe.name:<16} {probe.status:<11} {probe.where:<{width}} {detail}")
    culprit = result.first_mismatch
    if culprit is not None:
        record = culprit.records[-1]
        source = Path(record.file).read_text(encoding="utf-8").splitlines()[record.line - 1].strip()
        lines += ["", f"first divergence: {culprit.name} = pypto.{record.op}(...) at "
                      f"{_shown(record.file)}:{record.line}",
                  f"  {record.line}: {source}", culprit.result.report(), "inputs reaching it:"]
        lines += [f"  {line}" for line in _reaching_inputs(result, culprit)]
    return "\n".join(lines)


def verdict_line(result: BisectResult) -> str:
    culprit = result.first_mismatch
    if culprit is not None:
        record = culprit.records[-1]
        return f"{MARKERS[1]} {result.op}: first divergence {culprit.name} at {culprit.where} (pypto.{record.op})"
    located = sum(p.status == "PASS" for p in result.probes)
    if located:
        return f"{MARKERS[0]} {result.op}: {located}/{len(result.probes)} probe(s) located, all match"
    return f"{MARKERS[2]} {result.op}: no golden probe matched a kernel op (name variables after the probes)"


def command(args: argparse.Namespace) -> int:
    try:
        result = run_bisect(args.op, args.level, args.module)
    except WorkflowError as error:
        print(f"error: {error}")
        print(f"{MARKERS[2]} {args.op}: nothing bisected")
        return 2
    print(report(result))
    print(verdict_line(result))
    return result.exit_code
