"""Run one conformance case through ``ptogym.interp`` or real pypto, and compare.

A case is a JSON-able *spec* (``programs.py``): the kernel (``"kernel"``, default
the op chain), its input tensors (shape, dtype, how to fill them) and outputs.  Its
inputs are made from a seeded generator, so a case is fully determined by its spec.

Both sides run through the project's backends: ``interp`` and ``pypto-sim`` (real
pypto's compiler with its own graph interpreter computing the outputs on the CPU,
see docs/pypto-sim.md).  A run's *outcome* is ``accepted`` plus the outputs, or the
rejection's text.  Real pypto's outcomes are recorded as fixture files by
``scripts/record_conformance.py``; the tests compare the interpreter against them.
"""
import base64
import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import torch

from . import programs

FIXTURES = Path(__file__).parent / "fixtures"
# pypto-sim's cost model has no pipe for some opcodes (MOD, REM, EXP2, ROWPROD...): the
# kernel compiles, but the run fails before pypto's interpreter computes anything.
SIMULATOR_GAP = "[SIMULATION]: No pipe type corresponding to opcode"

_TORCH = {"DT_FP32": torch.float32, "DT_FP16": torch.float16, "DT_BF16": torch.bfloat16,
          "DT_INT8": torch.int8, "DT_INT16": torch.int16, "DT_INT32": torch.int32, "DT_INT64": torch.int64,
          "DT_BOOL": torch.bool}

# Values at the edges of the float formats: signed zeros, halves (rounding ties),
# the int8/int16/int32 limits, fp16's max and overflow, tiny/denormal, inf, nan.
SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 3.5, 127.0, 127.5, 128.0, -128.5, -129.0, 255.5,
           300.0, -300.0, 32767.5, -32768.5, 65504.0, 65520.0, -70000.0, 2.0 ** 31, -(2.0 ** 31) - 512.0, 1e30,
           -1e30, 3.0e38, 1e-40, -1e-45, 1.00048828125, 1.0009765625, float("inf"), float("-inf"), float("nan")]


@dataclass
class Outcome:
    """What one side did with a case."""

    accepted: bool
    outputs: list = field(default_factory=list)  # torch tensors, when accepted
    error: str = ""  # rejection text (check id or pypto's exception), when not

    def to_json(self) -> dict:
        return {"accepted": self.accepted, "error": self.error,
                "outputs": [encode_tensor(t) for t in self.outputs]}

    @classmethod
    def from_json(cls, data: dict) -> "Outcome":
        return cls(data["accepted"], [decode_tensor(t) for t in data["outputs"]], data["error"])


# --------------------------------------------------------------------------- tensors
def encode_tensor(t: torch.Tensor) -> dict:
    raw = t.contiguous().view(torch.uint8) if t.dtype is not torch.bool else t.to(torch.uint8)
    return {"dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape),
            "b64": base64.b64encode(raw.numpy().tobytes()).decode()}


def decode_tensor(data: dict) -> torch.Tensor:
    dtype = getattr(torch, data["dtype"])
    raw = torch.frombuffer(bytearray(base64.b64decode(data["b64"])), dtype=torch.uint8)
    if dtype is torch.bool:
        return raw.to(torch.bool).reshape(data["shape"])
    return raw.view(dtype).reshape(data["shape"]).clone()


def _fill(entry: dict, g: torch.Generator) -> torch.Tensor:
    shape, dtype = list(entry["shape"]), _TORCH[entry["dtype"]]
    kind = entry.get("fill", "normal")
    n = math.prod(shape)
    if kind == "index":  # valid indices into an axis of extent entry["high"]
        return torch.randint(0, entry["high"], shape, generator=g).to(dtype)
    if kind == "int":
        low, high = entry.get("range", (-100, 101))
        return torch.randint(low, high, shape, generator=g).to(dtype)
    if kind == "bool":
        return torch.rand(shape, generator=g) > 0.5
    if dtype is torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if not dtype.is_floating_point:
        info = torch.iinfo(dtype)
        return torch.randint(max(info.min, -1000), min(info.max, 1000) + 1, shape, generator=g).to(dtype)
    if kind == "special":
        palette = torch.tensor(SPECIAL, dtype=torch.float64)
        picks = palette[torch.randint(0, len(SPECIAL), (n,), generator=g)]
        return picks.reshape(shape).to(dtype)
    values = torch.randn(shape, generator=g, dtype=torch.float64) * entry.get("scale", 1.0)
    if kind == "positive":
        values = values.abs() + 0.125
    return values.to(dtype)


def make_tensors(spec: dict) -> list:
    """The case's input tensors (seeded) followed by zeroed outputs."""
    g = torch.Generator().manual_seed(spec.get("seed", 0))
    inputs = [_fill(e, g) for e in spec["inputs"]]
    while len(inputs) < 3 and spec.get("kernel", "chain") == "chain":  # unused chain inputs
        inputs.append(torch.zeros(1, 8))
    outputs = [torch.zeros(e["shape"], dtype=_TORCH[e["dtype"]]) for e in spec["outputs"]]
    return inputs + outputs


def inputs_digest(spec: dict) -> str:
    h = hashlib.sha1()
    for t in make_tensors(spec):
        h.update(encode_tensor(t)["b64"].encode())
    return h.hexdigest()


# --------------------------------------------------------------------------- running
def spec_text(spec: dict) -> str:
    return json.dumps(spec, sort_keys=True)


def _builder(spec: dict):
    return programs.BUILDERS[spec.get("kernel", "chain")]


def run(backend, spec: dict) -> Outcome:
    """Run the case on a backend (``get_backend("interp")`` or a pypto-sim Backend)."""
    from ptogym.backends._pypto_runtime import PyptoRunError
    from ptogym.interp import ConstraintViolation

    tensors = make_tensors(spec)
    n_out = len(spec["outputs"])
    try:
        backend.launch(_builder(spec), {"spec": spec_text(spec)}, tensors)
    except ConstraintViolation as error:
        return Outcome(False, error=f"[{error.check_id}] {error.details}")
    except TypeError as error:  # an op called with a signature it does not have: pypto raises it too
        return Outcome(False, error=f"TypeError: {error}")
    except PyptoRunError as error:
        return Outcome(False, error=_pypto_error(str(error)))
    if not getattr(backend.last_report, "outputs_valid", True):
        raise RuntimeError(f"{backend.name} did not compute the outputs of this case")
    return Outcome(True, tensors[-n_out:])


def _pypto_error(text: str) -> str:
    """pypto's exception and error lines, without backtraces, colours or paths of this run."""
    head, _, log = text.partition("\n--- pypto log (tail) ---\n")
    return clean_error(head.split(" failed: ", 1)[-1] + "\n" + log)


def clean_error(text: str) -> str:
    """The first few informative lines of a pypto error text (idempotent)."""
    lines = []
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    text = re.sub(r"/\S*/(tests/conformance/\w+\.py)", r"\1", text)  # no checkout paths
    for line in text.splitlines():
        line = line.strip()
        if not line or ".so(" in line or line.startswith(("libc", "libstdc")) or line in lines:
            continue
        lines.append(line)
    return "\n".join(lines[:4])[:600]


# --------------------------------------------------------------------------- comparing
def _differing(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Mask of elements whose bits differ; any NaN equals any NaN."""
    if not a.dtype.is_floating_point:
        return a != b
    bits = {2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
    return (a.view(bits) != b.view(bits)) & ~(torch.isnan(a) & torch.isnan(b))


def bitwise_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and not bool(_differing(a, b).any())


def ulp(x: torch.Tensor) -> torch.Tensor:
    """The spacing of x's dtype at |x| (in float64)."""
    mag = x.abs()
    return (torch.nextafter(mag, torch.full_like(mag, float("inf"))) - mag).double()


def tolerance(bound: dict, reference: torch.Tensor) -> torch.Tensor:
    """Elementwise allowed |interp - pypto| for a bounded case (docs/fidelity.md):
    ``{"ulp": n}``, n units in the last place of pypto's value (transcendentals)."""
    return bound["ulp"] * ulp(reference)


def within(a: torch.Tensor, b: torch.Tensor, allowed: torch.Tensor) -> bool:
    """|a - b| <= allowed where both are finite; NaN and inf positions match exactly."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    finite_a, finite_b = torch.isfinite(a), torch.isfinite(b)
    if not torch.equal(finite_a, finite_b) or _differing(a[~finite_a], b[~finite_b]).any():
        return False
    return bool(((a.double() - b.double()).abs() <= allowed)[finite_a].all())


def compare(interp: Outcome, pypto: Outcome, bound: dict | None = None) -> str:
    """'' when the two outcomes agree (bitwise, or within ``bound``), else what differs."""
    if interp.accepted != pypto.accepted:
        if pypto.accepted:
            return f"false positive: the interpreter rejects ({interp.error}) what pypto accepts"
        return f"false negative: the interpreter accepts what pypto rejects ({pypto.error})"
    if not interp.accepted:
        return ""
    for k, (a, b) in enumerate(zip(interp.outputs, pypto.outputs)):
        if bitwise_equal(a, b):
            continue
        if bound and within(a, b, tolerance(bound, b)):
            continue
        return f"output {k} differs: {describe_difference(a, b)}"
    return ""


def describe_difference(a: torch.Tensor, b: torch.Tensor) -> str:
    if a.shape != b.shape or a.dtype != b.dtype:
        return f"interp {a.dtype} {list(a.shape)} vs pypto {b.dtype} {list(b.shape)}"
    where = _differing(a, b).nonzero()
    if not len(where):
        return "no element differs"
    first = tuple(where[0].tolist())
    return (f"{len(where)} of {a.numel()} elements; first at {list(first)}: interp {a[first].item()!r} "
            f"vs pypto {b[first].item()!r}")


# --------------------------------------------------------------------------- fixtures
def fixture_path(name: str) -> Path:
    return FIXTURES / f"{name}.json"


def save_fixture(name: str, spec: dict, outcome: Outcome, seconds: float) -> None:
    data = {"name": name, "spec": spec, "inputs_sha1": inputs_digest(spec), "pypto_version": _pypto_version(),
            "seconds": round(seconds, 2), "pypto": outcome.to_json()}
    FIXTURES.mkdir(parents=True, exist_ok=True)
    fixture_path(name).write_text(json.dumps(data, separators=(",", ":")) + "\n")


def load_fixture(name: str) -> dict | None:
    path = fixture_path(name)
    return json.loads(path.read_text()) if path.exists() else None


def _pypto_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pypto")
    except PackageNotFoundError:
        return "?"
