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

The per-module log goes to ``<op dir>/verification/stage_log.{md,json}`` (written
atomically); each entry records what its verdict was earned on: the sha256 of every
file that decides it (the module file, golden.py, op.py, cases.json), the level, the
backend, whether lenient mode was on and the sanitizer's mode.  With ``--from K`` a module before K keeps
its previous entry only when it passed and all of these still match; otherwise it
is run again, and the output says which modules were kept and which re-run.
Verdict: ``[STAGE_PASS]`` 0, ``[STAGE_FAIL]`` 1 (a compare or the inventory),
``[STAGE_ERROR]`` 2 (cannot run: operator, chain, case, backend, an exception),
``[STAGE_PASS_LENIENT]`` 3 (every module passed, some with constraint checks
downgraded by lenient mode: ``PTOGYM_LENIENT=1`` or ``lenient()``; no plain pass).
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
from ptogym.cli import EXIT_LENIENT, sanitizing, worst_exit
from ptogym.interp.checks import is_lenient, watching_leniency
from ptogym.interp.sanitizer import active_mode
from ptogym.verify.runner import open_backend

from .inventory import check_inventory, read_inventory
from .package import WorkflowError, clone_inputs, compare_boundaries, resolve, setting_up

PASS, PASS_LENIENT, FAIL, ERROR = "PASS", "PASS_LENIENT", "FAIL", "ERROR"
PASSED = (PASS, PASS_LENIENT)
_EXIT_CODES = {PASS: 0, PASS_LENIENT: EXIT_LENIENT, FAIL: 1, ERROR: 2}
MARKERS = {0: "[STAGE_PASS]", 1: "[STAGE_FAIL]", 2: "[STAGE_ERROR]", EXIT_LENIENT: "[STAGE_PASS_LENIENT]"}


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
    # what the verdict was earned on: --from reuses it only while all of these match
    sources: dict[str, str] = field(default_factory=dict)  # file name -> sha256 of its content
    case: str | None = None
    backend: str | None = None
    lenient: bool = False
    sanitize: str | None = None  # the sanitizer's mode (--sanitize), None when it was off
    downgraded: int = 0  # constraint violations lenient mode let through
    provenance: str | None = None  # kept from the previous log, or why it was re-run despite --from


@dataclass
class StageLog:
    op: str
    case: str
    backend: str
    modules: list[ModuleEntry] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return worst_exit(_EXIT_CODES[entry.verdict] for entry in self.modules)

    def verdict_line(self) -> str:
        bad = next((e for e in self.modules if e.verdict not in PASSED), None)
        if bad is not None:
            return f"{MARKERS[self.exit_code]} {self.op}: module {bad.module} ({bad.file}): {bad.reason}"
        line = f"{MARKERS[self.exit_code]} {self.op}: {len(self.modules)} module file(s) verified on {self.backend} " \
               f"({self.case})"
        kept = [f"M{e.module}" for e in self.modules if e.provenance and e.provenance.startswith("kept")]
        if kept:
            line += f"; {', '.join(kept)} kept from the previous log (same content, level, backend)"
        lenient = [f"M{e.module}" for e in self.modules if e.verdict == PASS_LENIENT]
        if lenient:
            line += f"; lenient mode downgraded the checks of {', '.join(lenient)}"
        return line


# ------------------------------------------------------------------ one module
def _compare_outputs(entry: ModuleEntry, outputs, boundaries: dict, case) -> None:
    try:
        results = compare_boundaries(outputs, boundaries, case)
    except WorkflowError as error:  # an output without a golden boundary tensor, or none at all
        entry.verdict, entry.reason = FAIL, str(error)
        return
    failing = []
    for name, result in results.items():
        entry.outputs.append({"name": name, "max_diff": result.max_diff, "ratio": result.out_of_tolerance_ratio,
                              "all_close": result.all_close})
        if not result.all_close:
            failing.append(result)
    if failing:
        entry.verdict = FAIL
        entry.reason = "out of tolerance: " + ", ".join(r.brief() for r in failing)
        entry.details = "\n".join(r.report() for r in failing)
    else:
        entry.verdict = PASS


def _verify_module(module: int, path: Path, run, entries, boundaries, case, earned_on: dict) -> ModuleEntry:
    """Inventory, then ``run()`` -> outputs, then the comparison; never raises.  A pass
    with checks downgraded by lenient mode is PASS_LENIENT."""
    entry = ModuleEntry(module, path.name, **earned_on)
    with watching_leniency() as leniency:
        _judge_module(entry, path, run, entries, boundaries, case)
    entry.lenient, entry.downgraded = leniency.lenient, leniency.downgraded
    if entry.lenient and entry.verdict == PASS:
        entry.verdict, entry.reason = PASS_LENIENT, leniency.describe()
    return entry


def _judge_module(entry: ModuleEntry, path: Path, run, entries, boundaries, case) -> None:
    module = entry.module
    try:
        checks = check_inventory(entries, path, module)
        entry.inventory = [check.line().strip() for check in checks]
        missing = [check for check in checks if not check.ok]
        if missing:
            entry.verdict = FAIL
            entry.reason = "golden inventory not implemented: " + "; ".join(check.line().strip() for check in missing)
            return
        outputs = run()
        if not isinstance(outputs, dict):
            entry.verdict = FAIL
            entry.reason = f"the module returned {type(outputs).__name__}, not a dict {{boundary name: tensor}}"
            return
        _compare_outputs(entry, outputs, boundaries, case)
    except Exception as error:  # the file, the kernel, the wrapper or the backend failed: report, do not crash
        entry.verdict, entry.reason = ERROR, f"{type(error).__name__}: {error}"
        entry.details = traceback.format_exc()  # in the log; printed with --debug only


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

    def earned_on(path: Path) -> dict:
        return {"sources": package.source_digests(path), "case": case.id, "backend": ready.name,
                "lenient": is_lenient(), "sanitize": active_mode()}

    if not chain:  # L0: one module, the operator's kernel
        def run_kernel():
            return package.spec.run(clone_inputs(inputs), case.attrs, ready)[0]
        kernel = package.directory / "kernel.py"
        log.modules.append(_verify_module(max(e.module for e in entries), kernel, run_kernel, entries, boundaries,
                                          case, earned_on(kernel)))
        return log
    previous = _previous_entries(log_dir or package.directory / "verification")
    for staged in chain:
        basis = earned_on(staged.path)
        rerun = None
        if staged.module < start:
            kept, rerun = _reuse(previous.get(staged.module), basis, start)
            if kept is not None:
                log.modules.append(kept)
                continue
        try:
            run = partial(package.staged_wrapper(staged), clone_inputs(inputs), case.attrs, ready)
        except WorkflowError as error:  # the file does not import or lacks its wrapper
            entry = ModuleEntry(staged.module, staged.path.name, ERROR, reason=str(error), **basis)
        else:
            entry = _verify_module(staged.module, staged.path, run, entries, boundaries, case, basis)
        entry.provenance = rerun
        log.modules.append(entry)
        if entry.verdict not in PASSED:
            break
    return log


def _previous_entries(log_dir: Path) -> dict[int, ModuleEntry]:
    path = log_dir / "stage_log.json"
    if not path.is_file():
        return {}
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        return {m["module"]: ModuleEntry(**m) for m in document["modules"]}
    except (ValueError, KeyError, TypeError):
        return {}  # an unreadable or older log is simply not reused


def _reuse(previous: ModuleEntry | None, basis: dict, start: int) -> tuple[ModuleEntry | None, str | None]:
    """(the previous entry to keep, None) when it passed on exactly ``basis`` (same file
    contents, level, backend, lenient and sanitize mode), else (None, why the module is re-run)."""
    why = None
    if previous is None:
        why = "no entry in the previous log"
    elif previous.verdict not in PASSED:
        why = f"it was {previous.verdict} in the previous log"
    elif not previous.sources:
        why = "the previous entry records no content hashes (an older log)"
    else:
        changed = sorted(name for name in {*basis["sources"], *previous.sources}
                         if basis["sources"].get(name) != previous.sources.get(name))
        mismatched = [f"{key} {getattr(previous, key)!r} -> {basis[key]!r}"
                      for key in ("case", "backend", "lenient", "sanitize") if getattr(previous, key) != basis[key]]
        if changed:
            why = f"content changed since the previous log: {', '.join(changed)}"
        elif mismatched:
            why = "the previous entry was earned on another " + ", ".join(mismatched)
    if why is not None:
        return None, f"re-run despite --from {start}: {why}"
    previous.provenance = f"kept from the previous log ({previous.timestamp}): same content, level, backend"
    return previous, None


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
        lines += ["", f"## M{entry.module} `{entry.file}`: {entry.verdict}",
                  f"- earned on: case `{entry.case}`, backend `{entry.backend}`, lenient {entry.lenient}, "
                  f"sanitize {entry.sanitize}"]
        lines += [f"- sha256 `{name}`: `{digest}`" for name, digest in entry.sources.items()]
        lines += [f"- {line}" for line in entry.inventory]
        for label, text in (("reason", entry.reason), ("provenance", entry.provenance)):
            if text:
                lines.append(f"- {label}: {text}")
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
        with sanitizing(args, args.backend):
            log = run_stages(args.op, args.level, args.start, args.backend, args.log_dir)
    except WorkflowError as error:
        print(f"error: {error}")
        print(f"{MARKERS[2]} {args.op}: nothing verified")
        return 2
    for entry in log.modules:
        outputs = " | ".join(f"{o['name']} max_diff={_number(o['max_diff'])} ratio={_number(o['ratio'])}"
                             for o in entry.outputs)
        note = entry.reason if entry.reason and (not outputs or entry.verdict != FAIL) else ""
        print(f"M{entry.module} {entry.file}: {entry.verdict}  "
              + "  ".join(filter(None, [outputs, note, entry.provenance])))
        for line in entry.inventory:
            print(f"    {line}")
        if entry.details and (entry.verdict == FAIL or (entry.verdict == ERROR and getattr(args, "debug", False))):
            print(entry.details.rstrip())  # compare reports; a traceback only with --debug
    directory = args.log_dir or resolve(args.op).directory / "verification"
    try:
        print("log: " + ", ".join(str(p) for p in write_log(log, directory)))
    except OSError as error:
        print(f"error: log: {write_failure(directory / 'stage_log.md', error)}")
        print(f"{MARKERS[2]} {log.op}: log not written; the modules' verdict was: {log.verdict_line()}")
        return 2
    print(log.verdict_line())
    return log.exit_code
