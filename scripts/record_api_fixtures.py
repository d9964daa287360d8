"""Record real pypto 0.2.0's results for the API cases (``tests/api_op_cases.py``).

Each case's kernel runs through the pypto-sim backend (pypto's compiler and its own
graph interpreter on the CPU); its inputs and outputs, or the error pypto raised, go
to ``tests/fixtures/api_ops.pt``, which ``tests/test_interp_api_ops.py`` compares
``ptogym.interp`` against without running pypto.

    flock /tmp/ptogym-pypto.lock timeout 900 python3 scripts/record_api_fixtures.py [CASE ...]

With case names, only those are re-recorded (the others keep their entries).
"""
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]
FIXTURE = REPO / "tests" / "fixtures" / "api_ops.pt"


_NOISE = ("lib", "pypto_impl", "/", "<", "func:", "filename:", "lineno:")


def summarise_error(message: str) -> str:
    """pypto's error without backtraces, temporary paths or per-run graph hashes, so
    that re-recording gives the same text."""
    message = message.split("\n--- pypto log", 1)[0].split(": ", 2)[-1]
    lines = [line for line in message.splitlines() if line.strip() and not line.startswith(_NOISE)]
    lines = [re.sub(r"\d+, \d+, (\d+, \w+OpError)", r"\1", line) for line in lines]
    return "\n".join(lines[:3])


def record(case) -> dict:
    from api_op_cases import builder

    from ptogym.backends import _pypto_runtime as rt
    from ptogym.backends.pypto_sim import Backend

    backend = Backend()
    backend.keep_artifacts = backend.verbose = False
    inputs = [t.clone() for t in case.inputs]
    outputs = case.empty_outputs()
    entry = {"inputs": [t.clone() for t in case.inputs], "code": case.code}
    try:
        report = backend.launch(builder(case), {}, inputs + outputs)
    except rt.PyptoRunError as exc:
        entry["error"] = summarise_error(str(exc))
        # pypto accepted the kernel but its cost model has no timing for the op: no numbers
        entry["stage"] = "cost-model" if "[SIMULATION]" in str(exc) else "rejected"
        return entry
    if not report.outputs_valid:
        raise SystemExit(f"{case.name}: pypto did not compute the outputs")
    entry["outputs"] = outputs
    return entry


def record_until_error(progress: Path, names: list) -> int:
    """Child process: record cases in order, saving after each and appending its name
    to ``progress``; stop after the first failure (a rejected kernel can leave pypto's
    global state broken for the next kernel)."""
    from api_op_cases import CASES

    for name in names:
        fixture = torch.load(FIXTURE) if FIXTURE.exists() else {}
        fixture[name] = record(CASES[name])
        torch.save(fixture, FIXTURE)
        with progress.open("a") as f:
            f.write(name + "\n")
        verdict = fixture[name].get("error", "ok").splitlines()[0][:120]
        print(f"{name:<36} {verdict}", flush=True)
        if "error" in fixture[name]:
            return 3
    return 0


def main(names: list) -> int:
    from api_op_cases import CASES

    unknown = [n for n in names if n not in CASES]
    if unknown:
        print(f"unknown case(s): {unknown}", file=sys.stderr)
        return 2
    if not names and FIXTURE.exists():
        FIXTURE.unlink()
    todo = names or list(CASES)
    with tempfile.TemporaryDirectory() as tmp:
        progress = Path(tmp) / "done"
        progress.touch()
        while todo:
            child = subprocess.run([sys.executable, __file__, "--child", str(progress), *todo], check=False)
            if child.returncode not in (0, 3):
                return child.returncode
            done = set(progress.read_text().split())
            todo = [n for n in todo if n not in done]
    print(f"wrote {len(torch.load(FIXTURE))} case(s) to {FIXTURE.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        sys.exit(record_until_error(Path(sys.argv[2]), sys.argv[3:]))
    sys.exit(main(sys.argv[1:]))
