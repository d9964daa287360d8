"""Public API of the DeepSeek-V4 MLA prolog, its torch.library registration and ``SPEC``.

``mla_prolog(x, wq_a, wq_b, wkv, gamma_cq, gamma_ckv, cos, sin, eps)`` returns
``(q, kv, qr)``; nothing is modified.  torch.library: ``ptogym::mla_prolog(Tensor x,
Tensor wq_a, Tensor wq_b, Tensor wkv, Tensor gamma_cq, Tensor gamma_ckv, Tensor cos,
Tensor sin, float eps) -> (Tensor, Tensor, Tensor)``.
"""
from __future__ import annotations

import math

import torch

from ptogym.atoms import host, measure
from ptogym.backends import get_backend
from ptogym.backends.base import LaunchReport
from ptogym.ops import OpSpec
from ptogym.ops.rope.op import MAX_INTERLEAVE_ROPE_DIM, rotation_matrix
from ptogym.tune.table import tuned_params

from . import kernel
from .golden import mla_prolog_golden

INPUT_NAMES = ("x", "wq_a", "wq_b", "wkv", "gamma_cq", "gamma_ckv", "cos", "sin")
OUTPUT_NAMES = ("q", "kv", "qr")
MAX_ROW = kernel.SUM_BUFFER_BYTES // kernel.FP32_BYTES


def dims(x, wq_a, wq_b, gamma_ckv, cos) -> dict:
    """H, q_lora_rank, heads, head_dim and rope_dim as the shapes imply them (no checks)."""
    head_dim = gamma_ckv.shape[0] if len(gamma_ckv.shape) == 1 else 0
    width = wq_b.shape[1] if len(wq_b.shape) == 2 else 0
    return {"hidden": x.shape[-1], "q_lora_rank": wq_a.shape[-1], "heads": width // head_dim if head_dim else 0,
            "head_dim": head_dim, "rope_dim": cos.shape[-1]}


def shape_rule_violations(x, wq_a, wq_b, wkv, gamma_cq, gamma_ckv, cos, sin, eps) -> list[tuple[type, str]]:
    """Every dtype and dimension rule, as (exception type, message) pairs."""
    problems = host.dtype_rule("x", x, host.HALF_DTYPES)
    if problems:
        return problems
    named = dict(zip(INPUT_NAMES, (x, wq_a, wq_b, wkv, gamma_cq, gamma_ckv, cos, sin)))
    for name, t in named.items():
        if name != "x":
            problems += host.same_dtype_rule(name, t, "x", x)
    for name, rank in (("x", 2), ("wq_a", 2), ("wq_b", 2), ("gamma_ckv", 1), ("cos", 2)):
        if len(named[name].shape) != rank:
            return problems + [(ValueError, f"{name}: needs {rank} dims, got shape {list(named[name].shape)}")]
    d = dims(x, wq_a, wq_b, gamma_ckv, cos)
    tokens, size, rank, head_dim, rope_dim = x.shape[0], d["hidden"], d["q_lora_rank"], d["head_dim"], d["rope_dim"]
    problems += host.shape_rule("wq_a", wq_a, (size, rank), "[H, q_lora_rank] with H from x")
    if wq_b.shape[0] != rank or head_dim == 0 or wq_b.shape[1] % head_dim or d["heads"] < 1:
        problems.append((ValueError, f"wq_b: shape {list(wq_b.shape)} must be [q_lora_rank, heads * head_dim] = "
                                     f"[{rank}, heads * {head_dim}] with heads >= 1 (head_dim from gamma_ckv)"))
    problems += host.shape_rule("wkv", wkv, (size, head_dim), "[H, head_dim]")
    problems += host.shape_rule("gamma_cq", gamma_cq, (rank,), "[q_lora_rank]")
    problems += host.shape_rule("cos", cos, (tokens, rope_dim), "[T, rope_dim]")
    problems += host.shape_rule("sin", sin, (tokens, rope_dim), "cos's [T, rope_dim]")
    for name, value in (("x", size), ("wq_a", rank), ("gamma_ckv", head_dim), ("cos", rope_dim)):
        if value % 16 or value == 0:
            problems.append((ValueError, f"{name}: dimension {value} must be a non-zero multiple of 16 "
                                         "(32-byte tiles of 16-bit elements)"))
    if not rope_dim < head_dim:
        problems.append((ValueError, f"cos: rope_dim {rope_dim} must be < head_dim {head_dim} (each head keeps a "
                                     "non-rotated part)"))
    if rope_dim > MAX_INTERLEAVE_ROPE_DIM:
        problems.append((ValueError, f"cos: rope_dim {rope_dim} > {MAX_INTERLEAVE_ROPE_DIM} (the rotation matrix "
                                     "must fit the cube's L0 buffers)"))
    for name, value in (("wq_a", rank), ("gamma_ckv", head_dim)):
        if value > MAX_ROW:
            problems.append((ValueError, f"{name}: {value} > {MAX_ROW}: one fp32 row must fit pypto.sum's "
                                         f"{kernel.SUM_BUFFER_BYTES} B buffer"))
    if math.prod(wq_b.shape) > host.INT32_MAX or tokens * max(d["heads"], 1) * head_dim > host.INT32_MAX:
        problems.append((ValueError, f"wq_b: q of {tokens} x {wq_b.shape[1]} elements exceeds PyPTO's int32 shapes"))
    return problems + host.eps_rule(eps)


def validate(x, wq_a, wq_b, wkv, gamma_cq, gamma_ckv, cos, sin, eps) -> None:
    """Raise TypeError/ValueError naming the argument and the rule."""
    tensors = dict(zip(INPUT_NAMES, (x, wq_a, wq_b, wkv, gamma_cq, gamma_ckv, cos, sin)))
    for name, t in tensors.items():
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    host.raise_first(shape_rule_violations(*tensors.values(), eps))
    host.check_tensors("mla_prolog", "x", **tensors)


def _outputs(x, d):
    tokens = x.shape[0]
    return (x.new_empty(tokens, d["heads"], d["head_dim"]), x.new_empty(tokens, d["head_dim"]),
            x.new_empty(tokens, d["q_lora_rank"]))


def tuned_build_params(tokens: int, quant: bool) -> dict:
    """The tuned table's build parameters for a call (``kernel.TUNING``'s bands); the
    quantised operator reads the same table (``quant=True``)."""
    return tuned_params(kernel, tokens=tokens, quant=quant)


def tuning_shape(case) -> dict:
    """The shape a level's calls pass to the tuned table (``tuned_build_params``)."""
    return {"tokens": case.inputs["x"].shape[0], "quant": case.inputs["wq_b"].dtype == torch.int8}


def launch(x, wq_a, wq_b, wkv, gamma_cq, gamma_ckv, cos, sin, eps=1e-6, backend=None, variant=None):
    """Validate, then run the kernel; return ((q, kv, qr), launch report)."""
    validate(x, wq_a, wq_b, wkv, gamma_cq, gamma_ckv, cos, sin, eps)
    d = dims(x, wq_a, wq_b, gamma_ckv, cos)
    outputs = _outputs(x, d)
    backend = backend if not isinstance(backend, (str, type(None))) else get_backend(backend)
    if x.shape[0] == 0:
        return outputs, LaunchReport(backend=backend.name, wall_s=0.0)
    static = {**d, "dtype": host.HALF_DTYPES[x.dtype],
              **(kernel.VARIANTS[variant] if variant else tuned_build_params(x.shape[0], quant=False))}
    tensors = [x, wq_a, wq_b, wkv, gamma_cq.view(1, -1), gamma_ckv.view(1, -1), cos, sin,
               rotation_matrix(d["rope_dim"], "interleave", x.dtype, x.device), *outputs]
    return outputs, backend.launch(kernel.build, static, tensors, {"eps": float(eps)})


@torch.library.custom_op("ptogym::mla_prolog", mutates_args=())
def _mla_prolog_op(x: torch.Tensor, wq_a: torch.Tensor, wq_b: torch.Tensor, wkv: torch.Tensor,
                   gamma_cq: torch.Tensor, gamma_ckv: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                   eps: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return launch(x, wq_a, wq_b, wkv, gamma_cq, gamma_ckv, cos, sin, eps)[0]


@_mla_prolog_op.register_fake
def _(x, wq_a, wq_b, wkv, gamma_cq, gamma_ckv, cos, sin, eps):
    return _outputs(x, dims(x, wq_a, wq_b, gamma_ckv, cos))


def mla_prolog(x, wq_a, wq_b, wkv, gamma_cq, gamma_ckv, cos, sin, eps=1e-6, *, backend=None):
    """DeepSeek-V4 MLA prolog; returns (q [T, heads, D], kv [T, D], qr [T, q_lora_rank]).

    x [T, H] bf16/fp16; wq_a [H, q_lora_rank], wq_b [q_lora_rank, heads * D], wkv [H, D]
    (K-major, as upstream passes them); gamma_cq [q_lora_rank], gamma_ckv [D];
    cos, sin [T, rope_dim].  qr = RMSNorm(x @ wq_a) * gamma_cq; q = RMSNorm per head of
    qr @ wq_b (no gamma); kv = RMSNorm(x @ wkv) * gamma_ckv; the last rope_dim elements
    of every q head and of kv get the interleaved RoPE (fp32 inside).
    """
    args = (x, wq_a, wq_b, wkv, gamma_cq, gamma_ckv, cos, sin, eps)
    if not torch.compiler.is_compiling():
        validate(*args)
    if backend is None:
        return torch.ops.ptogym.mla_prolog(*args)
    return launch(*args, backend=backend)[0]


# --- what the runner, tests and benchmarks need -------------------------------------------
def _make_inputs(case, generator, device="cpu"):
    """Upstream's test data: x ~ U(-1, 1), weights ~ U(-0.1, 0.1), gammas, cos, sin ~ U(-1, 1)."""
    ranges = {"x": 1.0, "wq_a": 0.1, "wq_b": 0.1, "wkv": 0.1, "gamma_cq": 1.0, "gamma_ckv": 1.0, "cos": 1.0,
              "sin": 1.0}
    return {name: ((torch.rand(case.inputs[name].shape, generator=generator) * 2 - 1) * bound)
            .to(case.inputs[name].dtype).to(device) for name, bound in ranges.items()}


def case_hooks(input_names, output_names, golden, launch_fn, rules):
    """The runner's (golden, run, check_case) for an operator whose inputs and outputs are
    the named tuples ``input_names`` / ``output_names``, with ``eps`` as its attribute."""
    def run_golden(inputs, attrs):
        return dict(zip(output_names, golden(*[inputs[n] for n in input_names], attrs.get("eps", 1e-6))))

    def run(inputs, attrs, backend, variant=None):
        outputs, report = launch_fn(*[inputs[n] for n in input_names], attrs.get("eps", 1e-6), backend, variant)
        return dict(zip(output_names, outputs)), report

    def check_case(case) -> list[str]:
        if set(case.inputs) != set(input_names):
            return [f"inputs must be exactly {', '.join(input_names)}; got {sorted(case.inputs)}"]
        args = [case.inputs[n] for n in input_names]
        return [message for _, message in rules(*args, case.attrs.get("eps", 1e-6))]

    return run_golden, run, check_case


_golden, _run, _check_case = case_hooks(INPUT_NAMES, OUTPUT_NAMES, mla_prolog_golden, launch, shape_rule_violations)


def hbm_bytes(case) -> int:
    """Read every input once (the weights dominate at small T); write q, kv, qr."""
    specs = case.inputs
    d = dims(*(specs[n] for n in ("x", "wq_a", "wq_b", "gamma_ckv", "cos")))
    element = host.element_size(specs["x"].dtype)
    read = sum(math.prod(specs[n].shape) * element for n in INPUT_NAMES)
    tokens = specs["x"].shape[0]
    return read + tokens * (d["heads"] * d["head_dim"] + d["head_dim"] + d["q_lora_rank"]) * element


def flops(case) -> int:
    """Multiply-adds of the three projections, x2."""
    specs = case.inputs
    d = dims(*(specs[n] for n in ("x", "wq_a", "wq_b", "gamma_ckv", "cos")))
    tokens = specs["x"].shape[0]
    return 2 * tokens * (d["hidden"] * d["q_lora_rank"] + d["q_lora_rank"] * d["heads"] * d["head_dim"]
                         + d["hidden"] * d["head_dim"])


SPEC = OpSpec(
    name="mla_prolog",
    description="DeepSeek-V4 MLA prolog: q_a -> RMSNorm -> q_b -> per-head RMSNorm, kv -> RMSNorm, interleaved "
                "RoPE, in one kernel",
    make_inputs=_make_inputs,
    golden=_golden,
    run=_run,
    check_case=_check_case,
    hbm_bytes=hbm_bytes,
    output_names=OUTPUT_NAMES,
    input_names=INPUT_NAMES,
    attr_names=("eps",),
    required_levels=("level0", "level1", "level2"),
    extra={"patterns": ("SK-04", "AT-04"), "variants": ("upstream",), "sim_summary": measure.summarizer(hbm_bytes, flops),
           "tuning_shape": tuning_shape,
           # upstream's own kernel under the same cost model (µs), measured in issue 11
           "anchors_us": {"level4": 196.7, "level5": 457.9, "level6": 2713.7}},
)
