"""``ptogym stage OP``: verify the cumulative module files one after the other.

For module file k (``<op>_module1_impl.py``, ``<op>_module12_impl.py`` ...):

1. the golden function inventory: every entry of modules 1..k is marked with the
   kernel line implementing it (``inventory.py``), else the stage fails;
2. ``<op>_module<k>_wrapper(inputs, attrs, backend)`` runs and returns its outputs
   (a dict, nested allowed); every output leaf is compared with the golden boundary
   tensor of the same name (a ``ptogym.probe`` of the golden, or a golden output)
   by ``detailed_tensor_compare`` with the case's tolerances;
3. the first failing module stops the chain.

An operator without module files (the single-module L0 path) is one stage: its
kernel through ``OpSpec.run`` against the golden outputs, inventory on kernel.py.

The per-module log goes to ``<op dir>/verification/stage_log.{md,json}``; with
``--from K`` the entries of modules before K are kept from the previous log.
Verdict: ``[STAGE_PASS]`` 0, ``[STAGE_FAIL]`` 1 (a compare or the inventory),
``[STAGE_ERROR]`` 2 (cannot run: operator, chain, case, backend, an exception).
"""
from __future__ import annotations

import argparse
import json
import traceback
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from functools import partial
from pathlib import Path

from ptogym import backends
from ptogym._io import write_failure, write_files
from ptogym.verify.compare import detailed_tensor_compare
from ptogym.verify.runner import open_backend

from .inventory import check_inventory, read_inventory
from .package import WorkflowError, clone_inputs, leaves, resolve, setting_up

PASS, FAIL, ERROR, SKIPPED = "PASS", "FAIL", "ERROR", "SKIPPED"
MARKERS = {0: "[STAGE_PASS]", 1: "[STAGE_FAIL]", 2: "[STAGE_ERROR]"}


@dataclass
class ModuleEntry:
    module: int
    file: str
    verdict: str = ERROR
    outputs: list[dict] = field(default_factory=list)  # name, max_diff, ratio, all_close
    inventory: list[str] = field(default_factory=list)
    reason: str | None = None
    details: str | None = None  # compare reports of failing outputs, or a traceback
    timestamp: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))


@dataclass
class StageLog:
    op: str
    case: str
    backend: str
    modules: list[ModuleEntry] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        verdicts = {entry.verdict for entry in self.modules}
        return 2 if ERROR in verdicts else 1 if FAIL in verdicts else 0

    def verdict_line(self) -> str:
        checked = [e for e in self.modules if e.verdict != SKIPPED]
        bad = next((e for e in self.modules if e.verdict in (FAIL, ERROR)), None)
        if bad is None:
            return f"{MARKERS[0]} {self.op}: {len(checked)} module file(s) verified on {self.backend} ({self.case})"
        return f"{MARKERS[self.exit_code]} {self.op}: module {bad.module} ({bad.file}): {bad.reason}"


# ------------------------------------------------------------------ one module
def _compare_outputs(entry: ModuleEntry, outputs, boundaries: dict, case) -> None:
    produced = leaves(outputs, "")
    unknown = [name for name in produced if name not in boundaries]
    if unknown:
        entry.verdict, entry.reason = FAIL, (f"output(s) {', '.join(unknown)} have no golden boundary tensor; "
                                             f"probe them in golden.py (known: {', '.join(boundaries)})")
        return
    failing = []
    for name, actual in produced.items():
        result = detailed_tensor_compare(actual, boundaries[name], name, **case.boundary_tolerance().bounds())
        entry.outputs.append({"name": name, "max_diff": result.max_diff, "ratio": result.out_of_tolerance_ratio,
                              "all_close": result.all_close})
        if not result.all_close:
            failing.append(result)
    if not produced:
        entry.verdict, entry.reason = FAIL, "the module returned no outputs to compare"
    elif failing:
        entry.verdict = FAIL
        entry.reason = "out of tolerance: " + ", ".join(r.brief() for r in failing)
        entry.details = "\n".join(r.report() for r in failing)
    else:
        entry.verdict = PASS


def _verify_module(module: int, path: Path, run, entries, boundaries, case) -> ModuleEntry:
    """Inventory, then ``run()`` -> outputs, then the comparison; never raises."""
    entry = ModuleEntry(module, path.name)
    try:
        checks = check_inventory(entries, path, module)
        entry.inventory = [check.line().strip() for check in checks]
        missing = [check for check in checks if not check.ok]
        if missing:
            entry.verdict = FAIL
            entry.reason = "golden inventory not implemented: " + "; ".join(check.line().strip() for check in missing)
            return entry
        outputs = run()
        if not isinstance(outputs, dict):
            entry.verdict = FAIL
            entry.reason = f"the module returned {type(outputs).__name__}, not a dict {{boundary name: tensor}}"
            return entry
        _compare_outputs(entry, outputs, boundaries, case)
    except Exception as error:  # the file, the kernel, the wrapper or the backend failed: report, do not crash
        entry.verdict, entry.reason = ERROR, f"{type(error).__name__}: {error}"
        entry.details = traceback.format_exc()
    return entry


# ------------------------------------------------------------------ the chain
def run_stages(op: str, level: str | None = None, start: int = 1, backend=None,
               log_dir: Path | None = None) -> StageLog:
    """Verify the module files of ``op`` from module ``start``; raises WorkflowError when it cannot start."""
    with setting_up():
        package = resolve(op)
        case = package.case(level)
        ready = open_backend(backend)
        entries = read_inventory(package.directory / "golden.py")
        chain = package.staged_files()
        inputs = package.inputs(case)
        boundaries = package.golden_boundaries(inputs, case)
    if start < 1 or (chain and start > len(chain)):
        raise WorkflowError(f"--from {start}: modules are 1..{max(len(chain), 1)}")
    log = StageLog(package.name, case.id, ready.name)
    previous = _previous_entries(log_dir or package.directory / "verification")
    if not chain:  # L0: one module, the operator's kernel
        def run_kernel():
            return package.spec.run(clone_inputs(inputs), case.attrs, ready)[0]
        log.modules.append(_verify_module(max(e.module for e in entries), package.directory / "kernel.py",
                                          run_kernel, entries, boundaries, case))
        return log
    for staged in chain:
        if staged.module < start:
            log.modules.append(previous.get(staged.module) or ModuleEntry(staged.module, staged.path.name, SKIPPED,
                                                                          reason=f"--from {start}"))
            continue
        try:
            run = partial(package.staged_wrapper(staged), clone_inputs(inputs), case.attrs, ready)
        except WorkflowError as error:  # the file does not import or lacks its wrapper
            log.modules.append(ModuleEntry(staged.module, staged.path.name, ERROR, reason=str(error)))
            break
        entry = _verify_module(staged.module, staged.path, run, entries, boundaries, case)
        log.modules.append(entry)
        if entry.verdict != PASS:
            break
    return log


def _previous_entries(log_dir: Path) -> dict[int, ModuleEntry]:
    path = log_dir / "stage_log.json"
    if not path.is_file():
        return {}
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        kept = {m["module"]: ModuleEntry(**m) for m in document["modules"] if m["verdict"] == PASS}
    except (ValueError, KeyError, TypeError):
        return {}  # an unreadable old log is simply not reused
    for entry in kept.values():
        entry.reason = f"kept from the previous log ({entry.timestamp})"
    return kept


# ------------------------------------------------------------------ the log
def _number(value) -> str:
    return "-" if value is None else f"{value:.3g}"


def markdown(log: StageLog) -> str:
    lines = [f"# Per-module verification log: {log.op}", "",
             f"case `{log.case}`, backend `{log.backend}`; every output leaf compared with the golden boundary "
             "tensor of the same name by `detailed_tensor_compare`.", "",
             "| module | file | outputs compared | max_diff | ratio | verdict | timestamp |",
             "|---|---|---|---|---|---|---|"]
    for entry in log.modules:
        names = ", ".join(o["name"] for o in entry.outputs) or "-"
        max_diff = max((o["max_diff"] for o in entry.outputs if o["max_diff"] is not None), default=None)
        ratio = max((o["ratio"] for o in entry.outputs if o["ratio"] is not None), default=None)
        lines.append(f"| M{entry.module} | `{entry.file}` | {names} | {_number(max_diff)} | {_number(ratio)} | "
                     f"{entry.verdict} | {entry.timestamp} |")
    for entry in log.modules:
        if entry.inventory or entry.reason:
            lines += ["", f"## M{entry.module} `{entry.file}`: {entry.verdict}"]
            lines += [f"- {line}" for line in entry.inventory]
            if entry.reason:
                lines.append(f"- reason: {entry.reason}")
            if entry.details and entry.verdict == FAIL:
                lines += ["", "```text", entry.details.rstrip(), "```"]
    return "\n".join(lines) + "\n"


def write_log(log: StageLog, log_dir: Path) -> list[Path]:
    log_dir.mkdir(parents=True, exist_ok=True)
    md, js = log_dir / "stage_log.md", log_dir / "stage_log.json"
    document = {"op": log.op, "case": log.case, "backend": log.backend, "verdict": MARKERS[log.exit_code].strip("[]"),
                "exit_code": log.exit_code, "modules": [asdict(entry) for entry in log.modules]}
    write_files({md: markdown(log), js: json.dumps(document, indent=2, default=str) + "\n"})
    return [md, js]


# ------------------------------------------------------------------ CLI
def command(args: argparse.Namespace) -> int:
    backends.configure_from_cli(args)
    try:
        log = run_stages(args.op, args.level, args.start, args.backend, args.log_dir)
    except WorkflowError as error:
        print(f"error: {error}")
        print(f"{MARKERS[2]} {args.op}: nothing verified")
        return 2
    for entry in log.modules:
        outputs = " | ".join(f"{o['name']} max_diff={_number(o['max_diff'])} ratio={_number(o['ratio'])}"
                             for o in entry.outputs)
        note = entry.reason if entry.reason and (not outputs or entry.verdict == PASS) else ""
        print(f"M{entry.module} {entry.file}: {entry.verdict}  " + "  ".join(filter(None, [outputs, note])))
        for line in entry.inventory:
            print(f"    {line}")
        if entry.verdict in (FAIL, ERROR) and entry.details:
            print(entry.details.rstrip())
    directory = args.log_dir or resolve(args.op).directory / "verification"
    try:
        print("log: " + ", ".join(str(p) for p in write_log(log, directory)))
    except OSError as error:
        print(f"error: log: {write_failure(directory / 'stage_log.md', error)}")
        print(f"{MARKERS[2]} {log.op}: log not written; the modules' verdict was: {log.verdict_line()}")
        return 2
    print(log.verdict_line())
    return log.exit_code
