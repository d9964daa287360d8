"""``ptogym bisect OP [LEVEL] [--module K]``: the first kernel op that diverges from the golden.

The automatic form of the seed's on-board bisection with checkpoint tensors:

1. the golden runs with ``ptogym.probe("name", tensor)`` recording its intermediates;
2. the kernel runs on the interpreter with ``ptogym.interp.trace`` recording its
   dataflow: every op result (op, file:line, semantic label, operand records, data)
   and every tile written into memory (which op result went to which storage);
3. every **output** is compared as the kernel left it (``OpSpec.run``'s outputs
   against the golden's with the case's tolerances; a staged file's boundary tensors
   against the golden's), and located by the writes into its memory: the op whose
   result was assembled into it (an output no kernel op wrote is NOT_LOCATED, even
   when it matches);
4. every **probe** (a golden intermediate) is matched to a kernel value by its
   position in the dataflow: the kernel op assigned to a variable of the probe's
   name (else under a ``pypto.set_semantic_label`` of that name), taking the last
   value of a rebinding chain (``y = mul(x, rstd); y = mul(y, gamma)`` is the second
   ``y``) and, of the rest, the values some op or write reads, whose tiles, in execution order, stack along the first axis to exactly the
   probe's elements.  A probe with no such value (NOT_LOCATED), whose tiles do not
   stack (UNPLACED) or that more than one line could be (AMBIGUOUS) is not guessed;
5. the mismatch whose first op ran earliest is the answer, reported with its
   file:line, the compare report and the inputs that reach that line.

Verdict: ``[BISECT_FOUND]`` exit 1 (a value diverges: a wrong or unlocated final
output is never clean), ``[BISECT_ERROR]`` exit 2 (cannot run, or a probe or an
output cannot be matched to kernel ops), ``[BISECT_CLEAN]`` exit 0 (every output and every probe compared, all
match), ``[BISECT_CLEAN_LENIENT]`` exit 3 (the same, with constraint checks
downgraded by lenient mode).
"""
from __future__ import annotations

import argparse
import ast
import functools
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ptogym.cli import EXIT_LENIENT, lenient_exit, sanitizing
from ptogym.interp import trace
from ptogym.interp.checks import Leniency, watching_leniency
from ptogym.verify.compare import detailed_tensor_compare
from ptogym.verify.runner import compare_outputs, open_backend, output_tolerances

from .package import WorkflowError, clone_inputs, compare_boundaries, leaves, resolve, setting_up

MARKERS = {0: "[BISECT_CLEAN]", 1: "[BISECT_FOUND]", 2: "[BISECT_ERROR]", EXIT_LENIENT: "[BISECT_CLEAN_LENIENT]"}
PASS, FAIL, NOT_LOCATED, UNPLACED, AMBIGUOUS = "PASS", "FAIL", "NOT_LOCATED", "UNPLACED", "AMBIGUOUS"
UNMATCHED = (NOT_LOCATED, UNPLACED, AMBIGUOUS)
OUTPUT, PROBE = "output", "probe"


@dataclass
class ProbeMatch:
    name: str
    shape: tuple
    kind: str = PROBE  # OUTPUT: compared as the kernel wrote it; PROBE: an intermediate found in the trace
    status: str = NOT_LOCATED
    records: list = field(default_factory=list)  # the OpRecords (or WriteRecords) that made the value
    result: object = None  # CompareResult
    note: str = ""

    @property
    def first_index(self) -> int:
        return self.records[0].index if self.records else 1 << 62

    @property
    def where(self) -> str:
        """file name:line of the op that produced the value."""
        return f"{Path(self.records[-1].file).name}:{self.records[-1].line}" if self.records else "-"


@dataclass
class BisectResult:
    op: str
    case: str
    target: str  # what ran: kernel.py or a staged file
    probes: list[ProbeMatch]  # the outputs first, then the golden's intermediates
    op_count: int
    leniency: Leniency | None = None

    @property
    def first_mismatch(self) -> ProbeMatch | None:
        failing = [p for p in self.probes if p.status == FAIL]
        return min(failing, key=lambda p: p.first_index) if failing else None

    @property
    def unmatched(self) -> list[ProbeMatch]:
        return [p for p in self.probes if p.status in UNMATCHED]

    @property
    def exit_code(self) -> int:
        if self.first_mismatch is not None:
            return 1
        if self.unmatched or not self.probes:
            return 2
        return lenient_exit(0, self.leniency)


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


def _superseded(named, names: set) -> set:
    """Indices of records named after one of ``names`` whose value flows into a later
    record of the same name (``y = mul(x, rstd); y = mul(y, gamma)``, also through
    other ops: ``t = add(y, 1); y = mul(t, 2)``): the earlier links of a chain the
    name is rebound along."""
    reaching, superseded, nothing = [], set(), frozenset()  # reaching[i]: named records whose value reaches i
    for name, record in named:
        live = nothing
        for j in record.inputs:
            live = live | reaching[j] if reaching[j] else live
        if name in names:
            rebound = {j for j in live if named[j][0] == name}
            superseded |= rebound
            live = (live - rebound) | {record.index}
        reaching.append(live)
    return superseded


def _locate_probe(match: ProbeMatch, expected, records, named, superseded, consumed, case) -> None:
    """Match one golden intermediate to its kernel value (see the module docstring)."""
    candidates = [record for name, record in named if name == match.name and record.index not in superseded]
    read = [record for record in candidates if record.index in consumed]
    candidates = read or candidates  # a value nothing reads is not the one the dataflow carries on
    if not candidates:
        candidates = _labelled(records, match.name)
    if not candidates:
        match.note = "no kernel value named after it (assign it to a variable of that name or set_semantic_label)"
        return
    by_line: dict = {}
    for record in candidates:
        by_line.setdefault((record.file, record.line), []).append(record)
    value = _place(candidates, match.shape)  # one line, or lines that share the rows (main loop and tail)
    if value is None:
        fitting = [(tiles, placed) for tiles in by_line.values() for placed in [_place(tiles, match.shape)]
                   if placed is not None]
        if len(fitting) != 1:
            match.status, match.records = (AMBIGUOUS if fitting else UNPLACED), candidates
            lines = ", ".join(f"{Path(file).name}:{line}" for file, line in by_line)
            shapes = sorted({tuple(t.data.shape) for t in candidates})
            match.note = (f"each of {lines} could be it; give the probed value its own name" if fitting else
                          f"{len(candidates)} tile(s) of shapes {shapes} do not stack to {list(match.shape)}")
            return
        candidates, value = fitting[0]
    match.records = candidates
    match.result = detailed_tensor_compare(value, expected, match.name, **case.boundary_tolerance().bounds())
    match.status = PASS if match.result.all_close else FAIL


def match_probes(probes: dict, records: list, case) -> list[ProbeMatch]:
    """Each golden intermediate of ``probes`` matched to its kernel value in ``records``."""
    named = name_records(records)
    superseded = _superseded(named, set(probes))
    consumed = {i for record in records for i in record.inputs}
    consumed.update(w.source for w in getattr(records, "writes", ()))
    matches = []
    for name, expected in probes.items():
        match = ProbeMatch(name, tuple(expected.shape))
        _locate_probe(match, expected, records, named, superseded, consumed, case)
        matches.append(match)
    return matches


def _writers(output, records) -> list:
    """The sites that wrote into ``output``'s memory, in execution order: the op whose
    result was written, or the write itself when the tile was no op result."""
    if not isinstance(output, torch.Tensor):
        return []
    storage = output.untyped_storage().data_ptr()
    return [records[w.source] if w.source is not None else w for w in records.writes if w.storage == storage]


def judge_outputs(results: dict, produced: dict, records) -> list[ProbeMatch]:
    """One ProbeMatch per compared output, located by the writes into its memory."""
    matches = []
    for name, result in results.items():
        match = ProbeMatch(name, tuple(getattr(result, "expected_shape", ())), OUTPUT,
                           PASS if result.all_close else FAIL, _writers(produced[name], records), result)
        if not match.records:  # right or not, it does not come from the kernel
            match.note = "no traced kernel op wrote into it"
            match.status = match.status if match.status == FAIL else NOT_LOCATED
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
        probes, outputs = package.golden_probes_and_outputs(inputs, case)
    if module is not None and module not in staged:
        raise WorkflowError(f"--module {module}: the staged files are modules {sorted(staged) or 'none'}")
    if module is None:
        target, run = "kernel.py", package.spec.run
    else:
        target, run = staged[module].path.name, package.staged_wrapper(staged[module])
    try:
        with watching_leniency() as leniency, trace.recording() as records:
            produced = run(clone_inputs(inputs), case.attrs, backend)
    except Exception as error:  # a constraint violation or a crash: nothing to bisect
        raise WorkflowError(f"{target} raised {type(error).__name__}: {error}") from error
    with setting_up():
        if module is None:
            produced, results = _kernel_outputs(produced, outputs, case)
        else:
            if not isinstance(produced, dict):
                raise WorkflowError(f"{target}: the wrapper returned {type(produced).__name__}, not a dict "
                                    "{boundary name: tensor}")
            produced = leaves(produced)
            results = compare_boundaries(produced, {**probes, **leaves(outputs)}, case)
    scope = probes if module is None else _probes_in_scope(probes, list(leaves(outputs)), list(results))
    matches = judge_outputs(results, produced, records) + match_probes(scope, records, case)
    return BisectResult(package.name, case.id, target, matches, len(records), leniency)


def _kernel_outputs(produced, expected: dict, case) -> tuple[dict, dict]:
    """``OpSpec.run``'s outputs and their comparisons with the golden's, each held to
    its own tolerance (the runner's comparison)."""
    outputs = produced[0] if isinstance(produced, tuple) and produced else produced
    if not isinstance(outputs, dict) or set(outputs) != set(expected):
        names = sorted(outputs) if isinstance(outputs, dict) else type(outputs).__name__
        raise WorkflowError(f"run returned outputs {names}, the golden {sorted(expected)}")
    return outputs, compare_outputs(outputs, expected, output_tolerances(case, expected))


def _probes_in_scope(probes: dict, output_names: list, compared: list) -> dict:
    """The golden intermediates a staged file computes: those the golden makes before
    the last boundary tensor the file returns (later ones belong to later modules)."""
    order = [*probes, *output_names]
    last = max(order.index(name) for name in compared)
    return {name: tensor for name, tensor in probes.items() if order.index(name) < last and name not in compared}


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
        if probe is not None and probe.status in (PASS, FAIL):
            lines.append(f"{name}: {probe.kind} {probe.status} at {probe.where}  {probe.result.brief()}")
        else:
            lines.append(f"{name}: not a located probe (kernel input, constant or unprobed intermediate)")
    return lines


def _shown(file: str) -> str:
    """A kernel path relative to the working directory when it lies below it."""
    path = Path(file)
    return str(path.relative_to(Path.cwd())) if path.is_relative_to(Path.cwd()) else file


def _source_line(file: str, line: int) -> str:
    try:
        return Path(file).read_text(encoding="utf-8").splitlines()[line - 1].strip()
    except (OSError, IndexError, ValueError):
        return "(source not available)"


def report(result: BisectResult) -> str:
    outputs = sum(p.kind == OUTPUT for p in result.probes)
    lines = [f"{result.op} [{result.case}] {result.target}: {result.op_count} op result(s) recorded, "
             f"{outputs} output(s), {len(result.probes) - outputs} golden probe(s)"]
    width = max((len(p.where) for p in result.probes), default=1)
    for probe in result.probes:
        detail = probe.result.brief() if probe.result is not None else probe.note
        if probe.kind == OUTPUT and probe.note:
            detail += f" ({probe.note})"
        lines.append(f"  {probe.name:<16} {probe.status:<11} {probe.kind:<6} {probe.where:<{width}} {detail}")
    culprit = result.first_mismatch
    if culprit is not None:
        lines.append("")
        if culprit.records:
            record = culprit.records[-1]
            lines += [f"first divergence: {culprit.name} = pypto.{record.op}(...) at {_shown(record.file)}:"
                      f"{record.line}", f"  {record.line}: {_source_line(record.file, record.line)}"]
        else:
            lines.append(f"first divergence: {culprit.name}, a kernel output no traced op wrote")
        lines.append(culprit.result.report())
        if culprit.records:
            lines.append("inputs reaching it:")
            lines += [f"  {line}" for line in _reaching_inputs(result, culprit)]
    return "\n".join(lines)


def verdict_line(result: BisectResult) -> str:
    code = result.exit_code
    culprit = result.first_mismatch
    if culprit is not None:
        site = (f"at {culprit.where} (pypto.{culprit.records[-1].op})" if culprit.records
                else "(a kernel output no traced op wrote)")
        return f"{MARKERS[1]} {result.op}: first divergence {culprit.name} {site}"
    if not result.probes:
        return f"{MARKERS[2]} {result.op}: nothing to compare"
    if result.unmatched:
        named = ", ".join(f"{p.name} ({p.status}: {p.note})" for p in result.unmatched)
        return f"{MARKERS[2]} {result.op}: golden value(s) not matched to a kernel value: {named}"
    outputs = sum(p.kind == OUTPUT for p in result.probes)
    line = (f"{MARKERS[code]} {result.op}: every value compared matches: {outputs} output(s), "
            f"{len(result.probes) - outputs} probe(s)")
    return line + (f"; {result.leniency.describe()}" if code == EXIT_LENIENT else "")


def command(args: argparse.Namespace) -> int:
    try:
        with sanitizing(args):
            result = run_bisect(args.op, args.level, args.module)
    except WorkflowError as error:
        print(f"error: {error}")
        print(f"{MARKERS[2]} {args.op}: nothing bisected")
        return 2
    print(report(result))
    print(verdict_line(result))
    return result.exit_code
