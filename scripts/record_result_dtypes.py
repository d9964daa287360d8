"""Record real pypto 0.2.0's result dtype and shape for every op form and input dtype
combination of ``tests/result_dtype_forms.py`` into ``tests/fixtures/result_dtypes_pypto.json``.

    flock /tmp/ptogym-pypto.lock python3 scripts/record_result_dtypes.py

Nothing is compiled: each combination is traced while pypto's parser reads a jit kernel
(a plain helper the kernel calls builds the ops on ``pypto.Tensor``s of the combination's
dtypes, so the op's own dtype and shape rules run), then the parse is stopped.  One child
process traces every form; where it dies, one per form (a refused op could leave pypto's
native state broken).  An entry is ``[dtype, shape]`` or ``"error: <type>: <first line>"``.
"""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
FIXTURE = ROOT / "tests" / "fixtures" / "result_dtypes_pypto.json"


class _Traced(Exception):
    """Raised once every combination is traced: the kernel is never compiled."""


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return f"error: {type(exc).__name__}: {text.splitlines()[0][:160] if text else ''}"


def child(names: list) -> None:
    """Trace the forms' combinations inside one jit kernel's parse, print them as JSON."""
    import pypto
    import torch
    from result_dtype_forms import FORMS, key

    results = {}

    def trace_all():  # a plain function: pypto's parser lets Python run it
        for name in names:
            form = FORMS[name]
            for dts in form.combinations():
                inputs = {f"t{i}": pypto.Tensor(shape, getattr(pypto, dt), f"t{i}")
                          for i, (shape, dt) in enumerate(zip(form.shapes, dts))}
                try:
                    value = eval(form.expression, {"pypto": pypto}, inputs)  # noqa: S307 - the form's own text
                    results[key(form, dts)] = [str(value.dtype).rsplit(".", 1)[-1], [int(d) for d in value.shape]]
                except Exception as exc:  # noqa: BLE001 - pypto's refusal is the datum
                    results[key(form, dts)] = _first_line(exc)
        raise _Traced()

    @pypto.frontend.jit(runtime_options={"run_mode": pypto.RunMode.SIM})
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(16, 64)
        pypto.set_cube_tile_shapes([16, 16], [32, 32], [16, 16])
        trace_all()

    try:
        kernel(torch.zeros(8, 64))
    except Exception:  # noqa: BLE001 - _Traced, wrapped by pypto's parser
        pass
    print(json.dumps(results))


def traced(names: list) -> dict | None:
    done = subprocess.run(["timeout", "600", sys.executable, __file__, "--child", *names], capture_output=True,
                          text=True)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        print(f"{' '.join(names)[:60]}: exit {done.returncode}: {done.stderr.strip()[-300:]}", flush=True)
        return None
    return json.loads(lines[-1])


def main(names: list) -> int:
    """All forms in one process; where that process dies, one process per form."""
    from result_dtype_forms import FORMS

    names = names or list(FORMS)
    results = json.loads(FIXTURE.read_text()) if FIXTURE.exists() else {}
    entries = traced(names)
    if entries is None:
        entries = {}
        for name in names:
            one = traced([name])
            if one is None:
                return 1
            entries.update(one)
    results.update(entries)
    accepted = sum(1 for v in entries.values() if not isinstance(v, str))
    print(f"{len(names)} forms, {len(entries)} combinations, {accepted} built by pypto", flush=True)
    FIXTURE.write_text(json.dumps(dict(sorted(results.items())), indent=0) + "\n")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2:])
        sys.exit(0)
    sys.exit(main(sys.argv[1:]))
