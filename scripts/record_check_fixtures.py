"""Run every probe of ``tests/check_probes.py`` through the real pypto 0.2.0 (its
compiler and, for the numbers, its own interpreter on this CPU, as the pypto-sim
backend drives it) and write the verdicts and outputs to
``tests/fixtures/checks_pypto.json``.

    flock /tmp/ptogym-pypto.lock python3 scripts/record_check_fixtures.py [PROBE ...]

With probe names, only those are re-recorded (the others are kept).  Each probe runs
in its own process (a rejected kernel can leave pypto's native state broken enough
to crash the next one); ~3 s a probe.  Each entry is
``{"verdict": "accepted", "outputs": [...]}`` (every written tensor as dtype, shape
and base64 bytes) or ``{"verdict": "rejected", "error": "<type>: <first line>"}``.
"""
import base64
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

FIXTURE = ROOT / "tests" / "fixtures" / "checks_pypto.json"


def encode(t) -> dict:
    return {"dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape),
            "base64": base64.b64encode(t.contiguous().view(-1).view(__import__("torch").uint8).numpy().tobytes()).decode()}


def record(probe, backend) -> dict:
    from ptogym.backends._pypto_runtime import PyptoRunError

    tensors = probe.inputs()
    try:
        report = backend.launch(probe.build, {}, tensors, probe.scalars)
    except (PyptoRunError, TypeError, ValueError) as exc:  # the last two: pypto's frontend, while building
        cause = exc.__cause__ or exc
        text = " | ".join(line.strip() for line in str(cause).splitlines() if line.strip())
        return {"verdict": "rejected", "error": f"{type(cause).__name__}: {text[:400]}"}
    entry = {"verdict": "accepted", "outputs_valid": report.outputs_valid}
    if report.outputs_valid:
        entry["outputs"] = [encode(tensors[i]) for i in probe.outputs]
    return entry


def child(name: str) -> None:
    """Record one probe and print its entry as the last line of stdout (numbers for
    tensors up to 2**24 elements: the int32-overflow matmul probe needs ~6.5M)."""
    import os
    import signal
    os.environ["PTOGYM_SIM_MAX_ELEMENTS"] = str(1 << 24)
    # `timeout` stops a probe that never finishes with SIGTERM: exit through Python, so that
    # the pypto worker process (a process group of its own) is stopped too
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(124))
    from check_probes import PROBES
    from ptogym.backends.pypto_sim import Backend

    backend = Backend()
    backend.keep_artifacts = backend.verbose = False
    print(json.dumps(record(PROBES[name], backend)))


def _limit_memory() -> None:
    """pypto can run away (``pypto.loop(0, 8, 0)`` grows without end): cap a probe."""
    import resource
    resource.setrlimit(resource.RLIMIT_AS, (CHILD_MEMORY, CHILD_MEMORY))


CHILD_MEMORY = 8 << 30


def run_isolated(name: str) -> dict:
    command = ["timeout", "90", sys.executable, __file__, "--child", name]
    done = subprocess.run(command, capture_output=True, text=True, preexec_fn=_limit_memory)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]  # pypto prints to stdout too
    if done.returncode == 0 and lines:
        return json.loads(lines[-1])
    return {"verdict": "crashed", "error": f"exit {done.returncode}: {done.stderr.strip()[-300:]}"}


def main(names: list[str]) -> int:
    from check_probes import PROBES

    results = json.loads(FIXTURE.read_text()) if FIXTURE.exists() else {}
    for name in names or list(PROBES):
        results[name] = run_isolated(name)
        print(f"{name:<32} {results[name]['verdict']:<9} {results[name].get('error', '')[:150]}", flush=True)
    results = {name: results[name] for name in PROBES if name in results}
    FIXTURE.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2])
        sys.exit(0)
    sys.exit(main(sys.argv[1:]))
