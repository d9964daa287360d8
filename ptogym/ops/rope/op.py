"""Public API of RoPE (AT-04), its torch.library registration and its ``SPEC``.

``rope(x, cos, sin, *, layout)`` returns a new tensor: the last R = cos.shape[-1]
elements of every head of x rotated by the position's cos/sin, the rest copied.
torch.library: ``ptogym::rope(Tensor x, Tensor cos, Tensor sin, str layout) -> Tensor``.
"""
from __future__ import annotations

import functools
import math

import torch

from ptogym.atoms import host
from ptogym.backends import get_backend
from ptogym.backends.base import LaunchReport
from ptogym.ops import OpSpec
from ptogym.tune.table import tuned_params

from . import kernel
from .golden import LAYOUTS, rope_golden

SUPPORTED_DTYPES = {torch.bfloat16: "DT_BF16", torch.float16: "DT_FP16"}
ALIGN_ELEMENTS = 16  # 32-byte vector blocks of 16-bit elements
MAX_INTERLEAVE_ROPE_DIM = 128  # the rotation matrix [R, R] and 128 rows of x must fit L0A/L0B/L0C
INT32_MAX = 2**31 - 1


def shape_rule_violations(x, cos, sin, layout) -> list[tuple[type, str]]:
    """The dtype, shape and layout rules as (exception type, message) pairs, for anything
    with ``.shape`` and ``.dtype`` (the caller's tensors or a case's declared inputs)."""
    if x.dtype not in SUPPORTED_DTYPES:
        return [(TypeError, f"x: dtype {x.dtype} unsupported; use one of {list(SUPPORTED_DTYPES)}")]
    problems = [(TypeError, f"{name}: dtype {t.dtype} must equal x's dtype {x.dtype}")
                for name, t in (("cos", cos), ("sin", sin)) if t.dtype != x.dtype]
    if layout not in LAYOUTS:
        problems.append((ValueError, f"layout: {layout!r} is not one of {LAYOUTS}"))
    if len(x.shape) not in (2, 3):
        return problems + [(ValueError, f"x: needs shape [T, D] or [T, heads, D], got {list(x.shape)}")]
    tokens, head_dim = x.shape[0], x.shape[-1]
    if len(cos.shape) != 2 or cos.shape[0] != tokens:
        return problems + [(ValueError, f"cos: shape {list(cos.shape)} must be [T, R] with T = {tokens}")]
    if tuple(sin.shape) != tuple(cos.shape):
        problems.append((ValueError, f"sin: shape {list(sin.shape)} must equal cos's shape {list(cos.shape)}"))
    rope_dim = cos.shape[1]
    if not 0 < rope_dim <= head_dim:
        problems.append((ValueError, f"cos: R = {rope_dim} must be in [1, D = {head_dim}]"))
    if rope_dim % ALIGN_ELEMENTS or (head_dim - rope_dim) % ALIGN_ELEMENTS:
        problems.append((ValueError, f"cos: R = {rope_dim} and D - R = {head_dim - rope_dim} must be multiples of "
                                     f"{ALIGN_ELEMENTS} (32-byte vector tiles; R/2 fp32 elements for 'half')"))
    if layout == "interleave" and rope_dim > MAX_INTERLEAVE_ROPE_DIM:
        problems.append((ValueError, f"cos: R = {rope_dim} > {MAX_INTERLEAVE_ROPE_DIM} for the interleaved layout "
                                     "(its [R, R] rotation matrix must fit the cube's L0 buffers)"))
    if rope_dim > kernel.UB_BYTES // (kernel.WIDEST_OP_TILES * kernel.FP32_BYTES):
        problems.append((ValueError, f"cos: R = {rope_dim}: one fp32 row of three operands must fit the UB"))
    if math.prod(x.shape) > INT32_MAX:
        problems.append((ValueError, f"x: {math.prod(x.shape)} elements > {INT32_MAX}; PyPTO shapes are int32-sized"))
    return problems


def validate(x, cos, sin, layout) -> None:
    """Raise TypeError/ValueError naming the argument and the rule."""
    for name, t in (("x", x), ("cos", cos), ("sin", sin)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    for error, message in shape_rule_violations(x, cos, sin, layout)[:1]:
        raise error(message)
    for name, t in (("cos", cos), ("sin", sin)):
        if t.device != x.device:
            raise ValueError(f"{name}: device {t.device} must equal x's device {x.device}")
    host.raise_first(host.autograd_rule("rope", {"x": x, "cos": cos, "sin": sin}))


@functools.lru_cache(maxsize=32)
def _rotation_cpu(rope_dim: int, layout: str, dtype: torch.dtype) -> torch.Tensor:
    matrix = torch.zeros(rope_dim, rope_dim)
    if layout == "interleave":  # column 2i takes -x[2i+1], column 2i+1 takes x[2i]
        even = torch.arange(0, rope_dim, 2)
        matrix[even + 1, even] = -1.0
        matrix[even, even + 1] = 1.0
    else:  # rotate_half: column i takes -x[i + R/2], column i + R/2 takes x[i]
        half = rope_dim // 2
        first = torch.arange(half)
        matrix[first + half, first] = -1.0
        matrix[first, first + half] = 1.0
    return matrix.to(dtype)


def rotation_matrix(rope_dim: int, layout: str, dtype: torch.dtype, device="cpu") -> torch.Tensor:
    """The signed permutation R with rot(x) = x @ R for one row x of width ``rope_dim``."""
    return _rotation_cpu(rope_dim, layout, dtype).to(device)


def tuning_shape(case) -> dict:
    """The shape a level's calls pass to the tuned table (``launch``'s ``tuned_params``)."""
    x, cos = case.inputs["x"], case.inputs["cos"]
    heads, head_dim = x.shape[1:] if len(x.shape) == 3 else (1, x.shape[1])
    return {"tokens": x.shape[0], "heads": heads, "head_dim": head_dim, "rope_dim": cos.shape[1],
            "dtype": SUPPORTED_DTYPES[x.dtype], "layout": case.attrs.get("layout", "interleave")}


def launch(x, cos, sin, layout="interleave", backend=None) -> tuple[torch.Tensor, LaunchReport]:
    """Validate, then run the kernel; return (y, launch report)."""
    validate(x, cos, sin, layout)
    backend = backend if not isinstance(backend, (str, type(None))) else get_backend(backend)
    y = torch.empty_like(x)  # like x, its strides included (as the registered fake)
    if x.shape[0] == 0:
        return y, LaunchReport(backend=backend.name, wall_s=0.0)
    out = y if y.is_contiguous() else torch.empty(x.shape, dtype=x.dtype, device=x.device)  # the kernel's rows
    heads_view = x.shape if x.dim() == 3 else (x.shape[0], 1, x.shape[1])
    rope_dim = cos.shape[1]
    static = {"heads": heads_view[1], "head_dim": heads_view[2], "rope_dim": rope_dim,
              "dtype": SUPPORTED_DTYPES[x.dtype], "layout": layout}
    static.update(tuned_params(kernel, tokens=x.shape[0], **static))
    tensors = [x.contiguous().view(heads_view), cos.contiguous(), sin.contiguous(), out.view(heads_view)]
    if layout == "interleave":  # the only layout that reads it (the kernel takes None otherwise)
        report = backend.launch(kernel.build, static, [*tensors, rotation_matrix(rope_dim, layout, x.dtype, x.device)])
    else:
        report = backend.launch(kernel.build, static, tensors, {"rotation": None})
    if out is not y:
        y.copy_(out)
    return y, report


@torch.library.custom_op("ptogym::rope", mutates_args=())
def _rope_op(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str) -> torch.Tensor:
    return launch(x, cos, sin, layout)[0]


@_rope_op.register_fake
def _(x, cos, sin, layout):
    return torch.empty_like(x)


def rope(x, cos, sin, *, layout="interleave", backend=None):
    """Rotary position embedding of the last R = cos.shape[-1] elements of every head.

    x: [T, D] or [T, heads, D] bf16/fp16; cos, sin: [T, R] of x's dtype, R <= D.
    layout "interleave" rotates the pairs (x[2i], x[2i+1]) (DeepSeek), "half" the
    halves (Hugging Face rotate_half).  fp32 inside; returns a new tensor like x.
    """
    if not torch.compiler.is_compiling():
        validate(x, cos, sin, layout)
    if backend is None:
        return torch.ops.ptogym.rope(x, cos, sin, layout)
    return launch(x, cos, sin, layout, backend)[0]


# --- what the runner, tests and benchmarks need -------------------------------------------
def _make_inputs(case, generator, device="cpu"):
    """x ~ N(0, 1); cos/sin of real angles (positions x frequencies), as a model passes them."""
    x_spec, cos_spec = case.inputs["x"], case.inputs["cos"]
    tokens, rope_dim = cos_spec.shape
    x = torch.randn(x_spec.shape, generator=generator).to(x_spec.dtype)
    position = torch.randint(0, 4096, (tokens, 1), generator=generator).float()
    inverse_frequency = 10000.0 ** (-torch.arange(0, rope_dim, 2).float() / rope_dim)
    angles = position * inverse_frequency
    layout = case.attrs.get("layout", "interleave")
    angles = angles.repeat_interleave(2, -1) if layout == "interleave" else torch.cat((angles, angles), -1)
    return {"x": x.to(device), "cos": angles.cos().to(cos_spec.dtype).to(device),
            "sin": angles.sin().to(cos_spec.dtype).to(device)}


def _golden(inputs, attrs):
    return {"y": rope_golden(inputs["x"], inputs["cos"], inputs["sin"], attrs.get("layout", "interleave"))}


def _run(inputs, attrs, backend, variant=None):
    if variant is not None:
        raise ValueError(f"rope has no kernel variants, got {variant!r}")
    y, report = launch(inputs["x"], inputs["cos"], inputs["sin"], attrs.get("layout", "interleave"), backend)
    return {"y": y}, report


def _check_case(case) -> list[str]:
    if set(case.inputs) != {"x", "cos", "sin"}:
        return [f"inputs must be exactly x, cos, sin; got {sorted(case.inputs)}"]
    inputs = (case.inputs[n] for n in ("x", "cos", "sin"))
    return [message for _, message in shape_rule_violations(*inputs, case.attrs.get("layout", "interleave"))]


def hbm_bytes(case) -> int:
    """Read x, cos, sin (and the rotation matrix), write y."""
    x, cos = case.inputs["x"], case.inputs["cos"]
    element = torch.empty((), dtype=x.dtype).element_size()
    return (2 * math.prod(x.shape) + 2 * math.prod(cos.shape) + cos.shape[1] ** 2) * element


SPEC = OpSpec(
    name="rope",
    description="rotary position embedding (AT-04) of the last R elements of every head, interleaved or half layout",
    make_inputs=_make_inputs,
    golden=_golden,
    run=_run,
    check_case=_check_case,
    hbm_bytes=hbm_bytes,
    output_names=("y",),
    input_names=("x", "cos", "sin"),
    attr_names=("layout",),
    required_levels=("level0", "level1"),
    extra={"patterns": ("AT-04",), "tuning_shape": tuning_shape},
)
