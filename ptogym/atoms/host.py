"""Host side shared by the atom operators (``ptogym/ops/{rms_norm, per_token_quant,
dequant, linear, rms_norm_linear, rms_norm_linear_quant}``): the argument rules every
one of them applies, case inputs, and a launch that flattens leading dims to rows.

Rules are written for anything with ``.shape`` and ``.dtype`` (a caller's tensor or a
case file's ``TensorSpec``), so calls and case files are checked by the same code;
each returns ``(exception type, message)`` pairs naming the argument and the rule.
"""
from __future__ import annotations

import math
import numbers

import numpy as np
import torch

from ptogym.backends import get_backend
from ptogym.backends.base import LaunchReport

FLOAT_DTYPES = {torch.bfloat16: "DT_BF16", torch.float16: "DT_FP16", torch.float32: "DT_FP32"}
HALF_DTYPES = {torch.bfloat16: "DT_BF16", torch.float16: "DT_FP16"}
ALIGN_BYTES = 32  # vector tiles and GM rows are 32-byte aligned
INT32_MAX = 2**31 - 1

Problems = list  # of (exception type, message)
TORCH_LEAF_MESSAGE = "a leaf Variable that requires grad is being used in an in-place operation."


def element_size(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


def dtype_rule(name: str, t, allowed) -> Problems:
    if t.dtype in allowed:
        return []
    return [(TypeError, f"{name}: dtype {t.dtype} unsupported; use one of {list(allowed)}")]


def same_dtype_rule(name: str, t, ref_name: str, ref) -> Problems:
    if t.dtype == ref.dtype:
        return []
    return [(TypeError, f"{name}: dtype {t.dtype} must equal {ref_name}'s dtype {ref.dtype}")]


def shape_rule(name: str, t, expected: tuple, meaning: str) -> Problems:
    if tuple(t.shape) == tuple(expected):
        return []
    return [(ValueError, f"{name}: shape {list(t.shape)} must be {meaning} = {list(expected)}")]


def rows_rule(name: str, t, min_dims: int = 2) -> Problems:
    """At least ``min_dims`` dims, int32-sized, and a 32-byte aligned last dim."""
    shape = tuple(t.shape)
    if len(shape) < min_dims:
        return [(ValueError, f"{name}: needs at least {min_dims} dims [..., D], got shape {list(shape)}")]
    problems = []
    row = shape[-1] * element_size(t.dtype)
    if row % ALIGN_BYTES or row == 0:
        problems.append((ValueError, f"{name}: row of {shape[-1]} x {element_size(t.dtype)} B = {row} B must be a "
                                     f"non-zero multiple of {ALIGN_BYTES} B (tiles are 32-byte aligned)"))
    if math.prod(shape) > INT32_MAX:
        problems.append((ValueError, f"{name}: {math.prod(shape)} elements > {INT32_MAX}; PyPTO shapes are int32-sized"))
    return problems


def positive_number_rule(name: str, value) -> Problems:
    """A numeric attribute (eps, a scale): a real number - Python int or float, or a numpy
    scalar of either - finite and > 0 once converted to the float the kernel takes.  A
    bool is refused (``True`` is no epsilon), so are NaN, infinities and integers too
    large for a float (``10**400``)."""
    shown = repr(value) if len(repr(value)) <= 40 else f"{repr(value)[:20]}...({len(repr(value))} chars)"
    if isinstance(value, bool) or not isinstance(value, numbers.Real):  # numpy.bool_ is no numbers.Real
        return [(TypeError, f"{name}: must be a real number (int, float or a numpy scalar), got "
                            f"{type(value).__name__} {shown}")]
    try:
        as_float = float(value)
    except OverflowError:
        return [(ValueError, f"{name}: {shown} overflows a float; must be a finite number > 0")]
    if not math.isfinite(as_float) or as_float <= 0:
        return [(ValueError, f"{name}: must be a finite number > 0, got {shown}")]
    return []


def type_name(value) -> str:
    """``float``, ``numpy.float32``: a value's type as an error message names it."""
    kind = type(value)
    return kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def flag_rule(name: str, value) -> Problems:
    """A bool attribute: Python's or numpy's (an int is refused: ``1`` is no flag)."""
    if isinstance(value, (bool, np.bool_)):
        return []
    return [(TypeError, f"{name}: must be a bool, got {type_name(value)} {value!r}")]


def is_int(value) -> bool:
    """An integer attribute: a Python or numpy int, not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def eps_rule(eps) -> Problems:
    return positive_number_rule("eps", eps)


def choice_rule(name: str, value, choices) -> Problems:
    return [] if value in choices else [(ValueError, f"{name}: {value!r} is not one of {list(choices)}")]


def autograd_rule(op_name: str, tensors: dict, written=()) -> Problems:
    """Every operator alike, on every backend: with grad mode on, an argument that
    requires grad is refused, since the kernels are forward only (no backward to
    record); a written leaf gets torch's own wording for ``leaf.add_()``.  Under
    ``torch.no_grad()`` the call runs and its results do not require grad, as torch's
    own ops there."""
    if not torch.is_grad_enabled():
        return []
    for name, t in tensors.items():
        if t is None or not t.requires_grad:
            continue
        if name in written and t.is_leaf:
            return [(ValueError, f"{name}: {TORCH_LEAF_MESSAGE}")]
        return [(ValueError, f"{name}: requires grad, but {op_name} has no backward (its kernel is forward "
                             f"only); call it under torch.no_grad() or pass {name}.detach()")]
    return []


def case_violations(case, input_names: tuple, rules) -> list[str]:
    """A case file's level checked by an operator's ``rules(*tensors)`` (the same rules
    its calls obey), for an operator whose inputs are exactly ``input_names``."""
    if set(case.inputs) != set(input_names):
        return [f"inputs must be exactly {', '.join(input_names)}; got {sorted(case.inputs)}"]
    return [message for _, message in rules(*(case.inputs[name] for name in input_names))]


def raise_first(problems: Problems) -> None:
    for error, message in problems[:1]:
        raise error(message)


def check_tensors(op_name: str, device_of: str, **tensors) -> None:
    """Raise unless every non-None argument is a contiguous torch.Tensor on the device
    of ``tensors[device_of]`` that passes ``autograd_rule``."""
    for name, t in tensors.items():
        if t is not None and not isinstance(t, torch.Tensor):
            raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    device = tensors[device_of].device
    for name, t in tensors.items():
        if t is None:
            continue
        if t.device != device:
            raise ValueError(f"{name}: device {t.device} must equal {device_of}'s device {device}")
        if not t.is_contiguous():
            raise ValueError(f"{name}: must be contiguous (strides {t.stride()})")
    raise_first(autograd_rule(op_name, tensors))


def is_meta(t: torch.Tensor) -> bool:
    """A meta tensor carries a shape and no values: rules on values do not apply to it,
    and a launch on meta tensors gives shape-only results (``BackendBase.launch``)."""
    return t.device.type == "meta"


HALF_ALIGN = 16  # bf16/fp16 elements in 32 bytes: a cube tile's n extent must be a multiple


def aligned(size: int, step: int = HALF_ALIGN) -> int:
    return -(-size // step) * step


def zero_padded(t: torch.Tensor, shape) -> torch.Tensor:
    """``t`` itself when it has ``shape``, else a copy zero-padded at the end of each axis
    (matmuls over the padding add exact zeros)."""
    shape = tuple(shape)
    if tuple(t.shape) == shape:
        return t
    padded = t.new_zeros(shape)
    padded[tuple(slice(0, n) for n in t.shape)] = t
    return padded


def as_rows(t: torch.Tensor) -> torch.Tensor:
    """[..., D] as [rows, D] (a view: the tensors are contiguous)."""
    return t.reshape(-1, t.shape[-1])


def launch(build, static: dict, tensors: list, scalars: dict, backend, rows: int) -> LaunchReport:
    """Run ``build``'s kernel on ``tensors`` (outputs included) through ``backend``
    (an instance, a name, or None for $PTOGYM_BACKEND / the interpreter); zero rows
    launch nothing."""
    backend = backend if not isinstance(backend, (str, type(None))) else get_backend(backend)
    if rows == 0:
        return LaunchReport(backend=backend.name, wall_s=0.0)
    return backend.launch(build, static, tensors, scalars)


def launches_in_sequence(reports: list[LaunchReport]) -> LaunchReport:
    """One report for launches run one after another: times and tasks add up (a launch
    that ran nothing, e.g. a scatter of padding tokens only, reports none); the build
    kind and cache state are the launches' own where they agree, else "mixed"."""
    def total(field):
        values = [getattr(r, field, None) if field != "kernel_us" else r.extra.get(field) for r in reports]
        values = [value for value in values if value is not None]
        return sum(values) if values else None

    def common(key):
        values = {r.extra.get(key) for r in reports} - {None}
        return (values.pop() if len(values) == 1 else "mixed") if values else None

    extra = {"launches": len(reports), "kernel_us": total("kernel_us"), "build": common("build"),
             "cache": common("cache")}
    return LaunchReport(backend=reports[0].backend, wall_s=total("wall_s") or 0.0,
                        outputs_valid=all(r.outputs_valid for r in reports), simulated_us=total("simulated_us"),
                        tasks=total("tasks"), cores=max((r.cores or 0 for r in reports), default=None) or None,
                        extra={key: value for key, value in extra.items() if value is not None})


def make_inputs(case, generator, device="cpu") -> dict:
    """Deterministic inputs from the case seed: floats ~ N(0, 1); int8 uniform in
    [-128, 127]; int32 uniform in +-2^20 (an int8 matmul accumulator's range for K in
    the thousands); inputs whose name ends in ``scale`` uniform in [1e-3, 2e-2]
    (positive, the size of real per-token and per-channel scales)."""
    tensors = {}
    for name, spec in case.inputs.items():
        if name.endswith("scale"):
            values = torch.rand(spec.shape, generator=generator) * 0.019 + 1e-3
        elif spec.dtype == torch.int8:
            values = torch.randint(-128, 128, spec.shape, generator=generator, dtype=torch.int32)
        elif spec.dtype == torch.int32:
            values = torch.randint(-2**20, 2**20, spec.shape, generator=generator, dtype=torch.int32)
        else:
            values = torch.randn(spec.shape, generator=generator, dtype=torch.float32)
        tensors[name] = values.to(dtype=spec.dtype, device=device)
    return tensors


def moved_bytes(case, outputs: dict) -> int:
    """Bytes read (every input) plus written (``outputs``: name -> (shape, dtype))."""
    read = sum(math.prod(s.shape) * element_size(s.dtype) for s in case.inputs.values())
    return read + sum(math.prod(shape) * element_size(dtype) for shape, dtype in outputs.values())


VECTOR_CORES = 48  # DAV_2201 vector cores: one wave of row-block tasks


def row_blocks(rows: int, cores: int = VECTOR_CORES, largest: int = 64) -> tuple:
    """``loop_unroll`` block sizes for a vector kernel over ``rows`` rows: the top size
    is the power of two that makes about one wave of ``cores`` tasks (capped at
    ``largest``), then every fourth power below it, down to 1 for the ragged tail.
    Measured (RMSNorm, cost model): 128 rows x 7168 take 32.5 µs in two 64-row tasks,
    4.7 µs in 32 4-row tasks; 1024 rows x 1536 take 9.0 µs in 16 64-row tasks and 27.7 µs
    in 256 4-row tasks.  Each distinct tuple compiles its own kernel (at most 7)."""
    top = 1
    while top < largest and top * cores < rows:
        top *= 2
    return tuple(sorted({top >> shift for shift in range(0, top.bit_length(), 2)} | {1}, reverse=True))


def with_row_blocks(tuned: dict, rows: int) -> dict:
    """A row kernel's tuned-table parameters with ``unroll`` "auto" made ``row_blocks(rows)``."""
    return {**tuned, "unroll": row_blocks(rows)} if tuned["unroll"] == "auto" else tuned
