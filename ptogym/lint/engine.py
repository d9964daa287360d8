"""Run the rules over files, apply ``# ptogym: noqa OLxx <reason>`` and judge.

A noqa comment suppresses the listed rules on its own line only, and must say
why: a noqa without ids or without a reason, or one that suppresses nothing, is
itself a finding (rule NOQA), so suppressions stay few and explained.
"""
from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .rules import RULES, SEVERITIES
from .source import KINDS, Source

DEFAULT_STAGE = 5
# L-LINT-01, lint's resource limit: a file above it is refused before it is read (the
# rules walk the AST per kernel function: a 12 MB file took minutes and GBs).  Kernels
# are a few KiB; the largest Python file of this repository is under 32 KiB.
MAX_FILE_BYTES_ID = "L-LINT-01"
MAX_FILE_BYTES_VARIABLE = "PTOGYM_LINT_MAX_BYTES"
DEFAULT_MAX_FILE_BYTES = 256 * 1024
NOQA_RULE = "NOQA"
NOQA_SEVERITY = "S1"
NOQA_TITLE = "a `# ptogym: noqa OLxx <reason>` names the rules it silences, says why, and silences something"
_NOQA = re.compile(r"#\s*ptogym:\s*noqa\b(?P<body>.*)$")
# ids, then the reason (which ends at the next #)
_IDS = re.compile(r"^\s*(?P<ids>(?:OL\d\d|NOQA)(?:\s*,\s*(?:OL\d\d|NOQA))*)(?P<reason>[^#]*)")


@dataclass(frozen=True)
class Finding:
    rule: str
    severity: str
    path: str
    line: int
    col: int
    message: str
    fix: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.col}: {self.rule} [{self.severity}] {self.message} -- fix: {self.fix}"


@dataclass
class LintReport:
    stage: int
    fail_on: str
    files: list[str] = field(default_factory=list)
    kinds: dict[str, str] = field(default_factory=dict)  # file -> the kind its rules were chosen by
    findings: list[Finding] = field(default_factory=list)
    suppressed: list[dict] = field(default_factory=list)

    def failing(self) -> list[Finding]:
        limit = SEVERITIES.index(self.fail_on)
        return [f for f in self.findings if SEVERITIES.index(f.severity) <= limit]

    @property
    def exit_code(self) -> int:
        return 1 if self.failing() else 0

    def verdict(self) -> str:
        failing = len(self.failing())
        below = len(self.findings) - failing
        marker = "[LINT_FAIL]" if failing else "[LINT_PASS]"
        return (f"{marker} {len(self.files)} file(s), stage {self.stage}: {failing} finding(s) at or above "
                f"{self.fail_on}, {below} below, {len(self.suppressed)} suppressed by noqa")

    def to_dict(self) -> dict:
        return {"verdict": self.verdict().split()[0].strip("[]"), "exit_code": self.exit_code, "stage": self.stage,
                "fail_on": self.fail_on, "files": self.files, "kinds": self.kinds, "findings": [asdict(f) for f in self.findings],
                "suppressed": self.suppressed}


def python_files(paths) -> list[Path]:
    """Files named, and *.py under directories named; raises FileNotFoundError for a missing path."""
    found = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found += sorted(p for p in path.rglob("*.py") if "__pycache__" not in p.parts)
        elif path.is_file():
            found.append(path)
        else:
            raise FileNotFoundError(f"PATH {raw}: no such file or directory")
    return found


def lint_source(source: Source, rule_ids, stage: int) -> tuple[list[Finding], list[dict]]:
    """(findings, suppressed) of one parsed file."""
    raw = []
    for rule in (RULES[r] for r in rule_ids if r in RULES):
        if source.kind not in rule.targets or stage not in rule.stages:
            continue
        for node, message in rule.check(source):
            raw.append(Finding(rule.id, rule.severity, str(source.path), getattr(node, "lineno", 1),
                               getattr(node, "col_offset", 0) + 1, message, rule.fix))
    return _apply_noqa(source, raw, rule_ids)


def _apply_noqa(source: Source, raw: list[Finding], rule_ids) -> tuple[list[Finding], list[dict]]:
    findings, suppressed, used = [], [], set()
    parsed = {line: _IDS.match(match["body"]) for line, match in source.comment_matches(_NOQA).items()}
    for finding in raw:
        match = parsed.get(finding.line)
        ids = re.split(r"\s*,\s*", match["ids"]) if match else []
        if finding.rule in ids and match["reason"].strip():
            suppressed.append({**asdict(finding), "reason": match["reason"].strip()})
            used.add((finding.line, finding.rule))
        else:
            findings.append(finding)
    if NOQA_RULE in rule_ids:
        findings += _noqa_problems(source, parsed, used, rule_ids)
    return findings, suppressed


def _noqa_problems(source, parsed, used, rule_ids) -> list[Finding]:
    problems = []

    def problem(line, message, fix):
        problems.append(Finding(NOQA_RULE, NOQA_SEVERITY, str(source.path), line, 1, message, fix))

    for line, match in parsed.items():
        if match is None:
            problem(line, "noqa without rule ids", "write `# ptogym: noqa OLxx <reason>`")
        elif not match["reason"].strip():
            problem(line, f"noqa {match['ids']} without a reason", "say why the rule does not apply here")
        else:
            for rule_id in re.split(r"\s*,\s*", match["ids"]):
                if rule_id in rule_ids and (line, rule_id) not in used:
                    problem(line, f"noqa {rule_id} suppresses nothing on this line", "remove the stale noqa")
    return problems


def max_file_bytes(option: int | None = None) -> int:
    """The L-LINT-01 bound: *option* (--max-bytes), else $PTOGYM_LINT_MAX_BYTES, else the default."""
    text = str(option) if option is not None else os.environ.get(MAX_FILE_BYTES_VARIABLE, "").strip()
    if not text:
        return DEFAULT_MAX_FILE_BYTES
    source = "--max-bytes" if option is not None else MAX_FILE_BYTES_VARIABLE
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"{source} {text!r}: use a positive number of bytes")
    return int(text)


def _check_sizes(files: list[Path], limit: int) -> None:
    for path in files:
        size = path.stat().st_size
        if size > limit:
            raise ValueError(f"{path}: {size} bytes > {limit} ({MAX_FILE_BYTES_ID}: lint reads files of at most "
                             f"{limit} bytes; raise it with --max-bytes N or ${MAX_FILE_BYTES_VARIABLE})")


def lint_paths(paths, select=None, ignore=(), stage: int = DEFAULT_STAGE, fail_on: str = "S1",
               max_bytes: int | None = None, kind: str | None = None) -> LintReport:
    """Lint files and directories, each as the kind its name gives (``file_kind``) or
    as *kind*.  Raises FileNotFoundError, SyntaxError or ValueError (unknown rule id /
    stage / severity / kind, a file above the L-LINT-01 size limit) - the CLI turns
    them into exit code 2."""
    known = [*RULES, NOQA_RULE]
    for rule_id in [*(select or ()), *ignore]:
        if rule_id not in known:
            raise ValueError(f"unknown rule id {rule_id!r}; see `ptogym lint --rules`")
    if fail_on not in SEVERITIES:
        raise ValueError(f"--fail-on {fail_on!r}: use one of {', '.join(SEVERITIES)}")
    if not 1 <= stage <= 7:
        raise ValueError(f"--stage {stage}: stages are 1..7")
    if kind is not None and kind not in KINDS:
        raise ValueError(f"--kind {kind!r}: use one of {', '.join(KINDS)}")
    rule_ids = [r for r in (select or known) if r not in ignore]
    report = LintReport(stage=stage, fail_on=fail_on)
    files = python_files(paths)
    _check_sizes(files, max_file_bytes(max_bytes))
    for path in files:
        source = Source.parse(path, kind)
        findings, suppressed = lint_source(source, rule_ids, stage)
        report.files.append(str(path))
        report.kinds[str(path)] = source.kind
        report.findings += findings
        report.suppressed += suppressed
    report.findings.sort(key=lambda f: (f.path, f.line, f.col, f.rule))
    return report
