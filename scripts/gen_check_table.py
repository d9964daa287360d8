#!/usr/bin/env python3
"""Print (or, with --write, put into docs/fidelity.md) the table of every check id and
the real-pypto evidence behind its class: for an error (``C-*``) the pypto 0.2.0
rejection it mirrors (the probe and pypto's error text, recorded in
tests/fixtures/checks_pypto.json), for advice (``A-*``) the probe pypto accepts.
An error pypto accepts stands only on pypto's own recorded result being garbage (the
probe's ``recorded_garbage`` test, run by tests/test_interp_checks.py).
"""
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from check_probes import PROBES, SUITE_EVIDENCE  # noqa: E402

from ptogym.interp import checks  # noqa: E402

FIXTURE = ROOT / "tests" / "fixtures" / "checks_pypto.json"
DOCS = ROOT / "docs" / "fidelity.md"
BLOCKS = {  # docs/fidelity.md's generated tables: (begin marker, end marker)
    "checks": ("<!-- check-evidence table: scripts/gen_check_table.py --write -->", "<!-- end check-evidence table -->"),
    "probes": ("<!-- probe table: scripts/gen_check_table.py --write -->", "<!-- end probe table -->"),
}


def pypto_text(error: str) -> str:
    """pypto's message without wrapper exception names, error-code numbers and paths."""
    text = re.sub(r"(PyptoRunError: pypto-sim: kernel '\w+' failed( \([^)]*\))?: )?(RenderedParserError: )?", "",
                  error)
    text = re.sub(r"^(\d{6,}, )+", "", text)
    text = re.sub(r"/\S+/", "", text)
    return text.replace("|", "/").strip()[:110]


def evidence(check_id: str, recorded: dict) -> tuple[str, str]:
    """(class and evidence, the probes) of one check id."""
    probes = [p for p in PROBES.values() if check_id in p.interp.split(",")]
    names = ", ".join(f"`{p.name}`" for p in probes) or "none"
    entries = [(p, recorded.get(p.name, {})) for p in probes]
    if check_id in SUITE_EVIDENCE:
        test, what, _ = SUITE_EVIDENCE[check_id]
        return f"advice: pypto passes its own `{test.split('/')[-1]}` (recorded: {what})", "none (pypto's suite)"
    if check_id in checks.ADVICE:
        accepted = [p.name for p, r in entries if r.get("verdict") == "accepted"]
        return ("advice: pypto accepts" + ("" if accepted else " (no probe recorded)")), names
    rejected = [(p, r) for p, r in entries if r.get("verdict") == "rejected"]
    accepted = [p for p, r in entries if r.get("verdict") == "accepted"]
    but = "".join(f"; pypto accepts `{p.name}`, its recorded result is garbage ({p.device_garbage})"
                  if p.recorded_garbage else
                  f"; but pypto accepts `{p.name}` (no device result recorded; the argument: {p.device_garbage})"
                  for p in accepted)
    if rejected:
        p, r = rejected[0]
        return f"error: pypto rejects (`{p.name}`): {pypto_text(r['error'])}{but}", names
    never = [p for p, r in entries if r.get("verdict") == "crashed"]
    if never:
        return f"error: pypto's compile never ends (`{never[0].name}`, killed)", names
    return f"error, NO pypto rejection and no recorded device result{but}", names


def check_table(recorded: dict) -> str:
    lines = ["| id | class and evidence (real pypto 0.2.0) | probes |", "|---|---|---|"]
    for check_id in [*checks.CHECKS, *checks.ADVICE]:
        verdict, names = evidence(check_id, recorded)
        lines.append(f"| {check_id} | {verdict} | {names} |")
    return "\n".join(lines)


def probe_table(recorded: dict) -> str:
    """Every probe: what the interpreter says, what real pypto did, and for an error pypto
    accepts the evidence that stands for it."""
    lines = ["| probe | interpreter | real pypto 0.2.0 | why an error although pypto accepts |", "|---|---|---|---|"]
    for probe in PROBES.values():
        r = recorded.get(probe.name)
        if r is None:
            pypto = "not recorded"
        elif r["verdict"] == "rejected":
            pypto = f"rejected: {pypto_text(r['error'])[:80]}"
        elif r["verdict"] == "accepted":
            pypto = "accepted, outputs compared" if r.get("outputs") and probe.outputs else "accepted"
        else:
            pypto = "compile never ends (killed)"
        why = probe.device_garbage if probe.interp.startswith("C-") and r and r["verdict"] == "accepted" else ""
        lines.append(f"| `{probe.name}` | {probe.interp} | {pypto} | {why.replace('|', '/')} |")
    return "\n".join(lines)


def tables() -> dict:
    recorded = json.loads(FIXTURE.read_text())
    return {"checks": check_table(recorded), "probes": probe_table(recorded)}


def docs_blocks() -> dict:
    text = DOCS.read_text()
    return {name: text[text.index(begin) + len(begin):text.index(end)].strip() for name, (begin, end) in BLOCKS.items()}


def main(argv) -> int:
    if "--write" in argv:
        text = DOCS.read_text()
        for name, body in tables().items():
            begin, end = BLOCKS[name]
            head, rest = text.split(begin)
            text = f"{head}{begin}\n{body}\n{end}{rest.split(end, 1)[1]}"
        DOCS.write_text(text)
    else:
        print("\n\n".join(tables().values()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
