"""``ptogym lint PATH... [--select IDS] [--ignore IDS] [--stage N] [--fail-on S] [--json F] [--kind K]
[--max-bytes N] [--rules]``

Prints the kind each file was linted as (impl, golden, test, host: the rules it gets),
one line per finding (file:line:col, rule, severity, message, fix), then one
verdict line: ``[LINT_PASS]`` exit 0, ``[LINT_FAIL]`` exit 1 (a finding at or above
--fail-on, default S1), ``[LINT_ERROR]`` exit 2 (missing path, unparsable file,
unknown rule id, a file above the L-LINT-01 size limit, --json not written).
``--rules`` documents every rule and ends with ``[LINT_RULES]``.
"""
from __future__ import annotations

import argparse
import json

from ptogym._io import write_failure, write_text
from ptogym.cli import UsageError, check_writable

from .engine import (DEFAULT_MAX_FILE_BYTES, DEFAULT_STAGE, MAX_FILE_BYTES_ID, MAX_FILE_BYTES_VARIABLE, NOQA_RULE,
                     NOQA_SEVERITY, NOQA_TITLE, lint_paths, max_file_bytes)
from .source import KINDS
from .pypto_names import known_names
from .rules import NOT_CHECKED, RULES, SEVERITIES


# why a file's name matters: a host file gets none of the kernel rules
HOST_NOTE = " (no kernel rules: a kernel is kernel.py or *_impl.py; --kind impl lints it as one)"


def _ids(text: str | None) -> list[str] | None:
    return None if text is None else [part.strip().upper() for part in text.split(",") if part.strip()]


def rules_text() -> str:
    lines = ["Severities: S0 fatal, S1 error, S2 warning, S3 info.  Stages: 4 design, 5 implementation, "
             "6 structural verification, 7 tuning; a rule runs only at its stages (--stage, default "
             f"{DEFAULT_STAGE}).", ""]
    for rule in sorted(RULES.values(), key=lambda r: r.id):
        stages = ",".join(map(str, rule.stages))
        lines.append(f"{rule.id} {rule.severity} stages {stages:<11} {'/'.join(rule.targets):<16} {rule.title}")
        lines.append(f"{'':>5}fix: {rule.fix}")
    lines.append(f"{NOQA_RULE} {NOQA_SEVERITY} all stages       any              {NOQA_TITLE}")
    lines += ["", f"OL55 name list: {known_names()[1]}.",
              f"{MAX_FILE_BYTES_ID} limit: files above {max_file_bytes()} bytes are refused, not read "
              f"(--max-bytes N, ${MAX_FILE_BYTES_VARIABLE}; default {DEFAULT_MAX_FILE_BYTES}).", "",
              "Upstream ids not decided from the source here (they need other artefacts):"]
    lines += [f"{rule_id} {reason}" for rule_id, reason in sorted(NOT_CHECKED.items())]
    return "\n".join(lines)


def _lint_command(args: argparse.Namespace) -> int:
    if args.rules:
        print(rules_text())
        print(f"[LINT_RULES] {len(RULES) + 1} rules checked, {len(NOT_CHECKED)} upstream ids not decidable from source")
        return 0
    if not args.paths:
        print("error: give at least one PATH (or --rules)")
        print("[LINT_ERROR] no path")
        return 2
    try:
        if args.json:
            check_writable(args.json, "--json")  # before any work: a refusal leaves nothing behind
        report = lint_paths(args.paths, _ids(args.select), _ids(args.ignore) or (), args.stage, args.fail_on.upper(),
                            args.max_bytes, args.kind)
    except (UsageError, OSError, SyntaxError, ValueError, UnicodeDecodeError, RecursionError, MemoryError) as error:
        # RecursionError / MemoryError: an expression nested too deeply for Python's parser
        print(f"error: {error}" if isinstance(error, UsageError) else f"error: {type(error).__name__}: {error}")
        print("[LINT_ERROR] nothing linted")
        return 2
    for path, kind in report.kinds.items():
        print(f"{path}: {kind}{HOST_NOTE if kind == 'host' else ''}")
    for finding in report.findings:
        print(finding)
    if args.json:
        try:
            write_text(args.json, json.dumps(report.to_dict(), indent=2) + "\n")
        except OSError as error:
            print(f"error: --json: {write_failure(args.json, error)}")
            print(f"[LINT_ERROR] findings above not saved: {report.verdict()}")
            return 2
    print(report.verdict())
    return report.exit_code


def add_cli(subparsers) -> None:
    lint = subparsers.add_parser(
        "lint", help="check kernels against the OLxx rules",
        description="AST lint with upstream pypto-gym's OLxx ids; last line [LINT_PASS] (exit 0), "
                    "[LINT_FAIL] (exit 1) or [LINT_ERROR] (exit 2).")
    lint.add_argument("paths", nargs="*", metavar="PATH", help="files or directories (*.py below them)")
    lint.add_argument("--select", metavar="IDS", help="only these rules, comma-separated (e.g. OL02,OL55)")
    lint.add_argument("--ignore", metavar="IDS", help="skip these rules, comma-separated")
    lint.add_argument("--stage", type=int, default=DEFAULT_STAGE,
                      help=f"development stage 1..7 (default {DEFAULT_STAGE})")
    lint.add_argument("--fail-on", default="S1",
                      help=f"lowest failing severity, one of {', '.join(SEVERITIES)} (default S1)")
    lint.add_argument("--json", metavar="FILE", help="also write the findings as JSON")
    lint.add_argument("--kind", choices=KINDS, help="lint every file as this kind (default: by its name: impl "
                                                   "kernel.py/*_impl.py, golden, test test_*.py, host the rest)")
    lint.add_argument("--max-bytes", type=int, metavar="N",
                      help=f"{MAX_FILE_BYTES_ID}: refuse files above N bytes (default: ${MAX_FILE_BYTES_VARIABLE} "
                           f"or {DEFAULT_MAX_FILE_BYTES})")
    lint.add_argument("--rules", action="store_true", help="document every rule and exit")
    lint.set_defaults(func=_lint_command)
