"""Record real pypto 0.2.0's result dtype and shape for every op form and input dtype
combination of ``tests/result_dtype_forms.py`` into ``tests/fixtures/result_dtypes_pypto.json``,
and (``--compiled``) what its compiler and CPU run make of each combination its graph builder
accepts, into ``tests/fixtures/result_dtypes_compiled_pypto.json``.

    flock /tmp/ptogym-pypto.lock python3 scripts/record_result_dtypes.py [FORM ...]
    flock /tmp/ptogym-pypto.lock python3 scripts/record_result_dtypes.py --compiled [FORM ...]

Nothing is compiled: each combination is traced while pypto's parser reads a jit kernel
(a plain helper the kernel calls builds the ops on ``pypto.Tensor``s of the combination's
dtypes, so the op's own dtype and shape rules run), then the parse is stopped.  One child
process traces every form; where it dies, one per form (a refused op could leave pypto's
native state broken).  An entry is ``[dtype, shape]`` or ``"error: <type>: <first line>"``.

``--compiled``: the graph builder's verdict is not the last word - some rules (mixed operand
dtypes of ``remainder``, comparisons, ``where``...) only run in a compiler pass.  Each combination
the graph builder accepts becomes a kernel ``out[:] = <form>`` (``out`` of the recorded result
dtype and shape, inputs from ``result_dtype_forms.input_values``) compiled and run through the
pypto-sim backend with pypto's own interpreter computing ``out`` (~0.5 s each, ~20 min in all; one process per
form, a new one for the rest after a refused kernel, whose failed build leaves pypto's state
unfit for the next, or where pypto aborts it: twice on one combination is "crashed").  An entry is ``{"verdict": "accepted" | "rejected",
"error": ..., "stage": "compile" | "simulation", "output": <encoded out>}``: ``output`` whenever
pypto's interpreter wrote ``out``, also when the cost model failed after it ("simulation": its
ISA model lacks the op, which says nothing about the kernel).
"""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
FIXTURE = ROOT / "tests" / "fixtures" / "result_dtypes_pypto.json"
COMPILED = ROOT / "tests" / "fixtures" / "result_dtypes_compiled_pypto.json"


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


def compiled_child(keys: list) -> None:
    """Compile and run each combination's kernel; print each entry as a JSON line as it is done
    (pypto may abort the process on a later one)."""
    import tempfile

    import torch
    from record_check_fixtures import encode
    from result_dtype_forms import FORMS, TORCH_DTYPES, input_values, kernel_source, load_kernel_module

    from ptogym.backends._pypto_runtime import PyptoRunError
    from ptogym.backends.pypto_sim import Backend

    backend = Backend()
    backend.keep_artifacts = backend.verbose = False
    backend.isolated = False  # this child is the isolation; its tensors must show what pypto wrote
    graph = json.loads(FIXTURE.read_text())
    with tempfile.TemporaryDirectory() as tmp:
        for n, k in enumerate(keys):
            name, dts = k.split("|")[0], tuple(k.split("|")[1].split(","))
            form, result = FORMS[name], graph[k]
            # its own module: the backend caches kernels by builder
            module = load_kernel_module(kernel_source(form, dts, result), Path(tmp) / f"form_kernel_{n}.py")
            out = torch.zeros(result[1], dtype=getattr(torch, TORCH_DTYPES[result[0]]))
            entry = {"verdict": "accepted"}
            try:
                backend.launch(module.build, {}, [*input_values(form, dts), out], {})
            except (PyptoRunError, TypeError, ValueError) as exc:
                cause = exc.__cause__ or exc
                text = " | ".join(line.strip() for line in str(cause).splitlines() if line.strip()).replace(tmp, "<tmp>")
                entry = {"verdict": "rejected", "error": f"{type(cause).__name__}: {text[:300]}",
                         "stage": "simulation" if "[SIMULATION]" in text else "compile"}
            if entry["verdict"] == "accepted" or bool(out.any()):  # pypto's interpreter wrote out
                entry["output"] = encode(out)
            print(json.dumps([k, entry]), flush=True)
            if entry["verdict"] == "rejected":
                return  # a refused kernel leaves pypto's state unfit for the next (F29001): a new process


def compiled(keys: list) -> dict:
    """Every key's entry; a new process takes the rest after a refused kernel, and where pypto
    aborts the process on a key twice, that key is recorded as crashed."""
    entries, remaining, retried = {}, list(keys), set()
    while remaining:
        done = subprocess.run(["timeout", str(60 + 30 * len(remaining)), sys.executable, __file__,
                               "--compiled-child", *remaining], capture_output=True, text=True)
        for line in done.stdout.splitlines():
            if line.startswith("["):
                k, entry = json.loads(line)
                entries[k] = entry
        remaining = [k for k in remaining if k not in entries]
        if remaining and done.returncode != 0:
            first = remaining[0]
            if first in retried:
                entries[first] = {"verdict": "crashed",
                                  "error": f"exit {done.returncode}: {done.stderr.strip()[-200:]}"}
                remaining = remaining[1:]
            else:  # once more on its own: an abort can come from pypto's state, not this kernel
                retried.add(first)
                remaining = [first] + remaining[1:]
    return entries


def main_compiled(names: list) -> int:
    from result_dtype_forms import FORMS, key

    graph = json.loads(FIXTURE.read_text())
    results = json.loads(COMPILED.read_text()) if COMPILED.exists() else {}
    for name in names or list(FORMS):
        form = FORMS[name]
        keys = [key(form, dts) for dts in form.combinations() if not isinstance(graph[key(form, dts)], str)]
        if not keys:
            continue
        results.update(compiled(keys))
        verdicts = [results[k]["verdict"] for k in keys]
        print(f"{name:<24} {len(keys):>3} kernels: {verdicts.count('accepted')} accepted, "
              f"{verdicts.count('rejected')} rejected, {verdicts.count('crashed')} crashed", flush=True)
        COMPILED.write_text(json.dumps(dict(sorted(results.items())), indent=0) + "\n")
    return 0


def _run_child(args: list, timeout: int):
    done = subprocess.run(["timeout", str(timeout), sys.executable, __file__, *args], capture_output=True,
                          text=True)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        print(f"{' '.join(args)[:60]}: exit {done.returncode}: {done.stderr.strip()[-300:]}", flush=True)
        return None
    return json.loads(lines[-1])


def traced(names: list) -> dict | None:
    return _run_child(["--child", *names], timeout=600)


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
    if sys.argv[1:2] == ["--compiled-child"]:
        compiled_child(sys.argv[2:])
        sys.exit(0)
    if sys.argv[1:2] == ["--compiled"]:
        sys.exit(main_compiled(sys.argv[2:]))
    sys.exit(main(sys.argv[1:]))
