"""Public API of the linear projection (AT-09), torch.library and ``SPEC``.

``linear(x, weight, bias=None, *, quant_mode="none", x_scale=None, w_scale=None,
out_dtype=None)`` returns y = x @ weight^T (+ bias) with weight [N, K] (torch's
layout, the cube's b_trans):

* ``quant_mode="none"``: x [..., K], weight, bias [N] bf16/fp16 (one dtype); y in
  out_dtype (default x's dtype; bf16/fp16/fp32).
* ``quant_mode="int8_w8a8"``: x [..., K] and weight int8, x_scale [..., 1] fp32 (per
  token, e.g. from ``per_token_quant``), w_scale [N] or [1, N] fp32 (per channel);
  exact int32 accumulation, y = acc * x_scale * w_scale in out_dtype (default bf16).
  No bias (add it to the output).
* ``quant_mode="mxfp8"``: x [..., K] and weight fp8 (e4m3fn or e5m2, one type), K a
  multiple of 64, MX block scales x_scale [..., K/32] and w_scale [N, K/32]
  float8_e8m0fnu (one per 32 consecutive elements along K); fp32 accumulation of the
  dequantised products, y in out_dtype (default bf16).  No bias.  Runs on the
  interpreter; pypto-sim refuses it (pypto 0.2.0 traces fp8 ``scaled_mm`` only for
  DAV_3510, its simulator covers DAV_2201; see README).
"""
from __future__ import annotations

import contextlib
import math

import torch

from ptogym.atoms import host, measure
from ptogym.atoms.linear import inner_axis_violations, projection_violations
from ptogym.backends import get_backend
from ptogym.backends.base import LaunchReport
from ptogym.interp.platform import using_platform
from ptogym.ops import OpSpec
from ptogym.tune.table import tuned_params

from . import kernel
from .golden import MX_BLOCK, linear_golden

PATTERNS = ("AT-09", "AT-06")


#: x / weight dtypes of each mode (pypto names), and the dtype of its scales
INPUT_DTYPES = {"none": host.HALF_DTYPES, "int8_w8a8": {torch.int8: "DT_INT8"},
                "mxfp8": {torch.float8_e4m3fn: "DT_FP8E4M3", torch.float8_e5m2: "DT_FP8E5M2"}}
SCALE_DTYPES = {"int8_w8a8": torch.float32, "mxfp8": torch.float8_e8m0fnu}
QUANTIZED_OUT_DTYPE = torch.bfloat16  # default out_dtype of the quantized modes


def _scale_shapes(quant_mode, x, n) -> dict:
    """name -> the shapes allowed for x_scale and w_scale in a quantized mode."""
    lead = tuple(x.shape[:-1])
    if quant_mode == "mxfp8":
        blocks = x.shape[-1] // MX_BLOCK
        return {"x_scale": [(*lead, blocks)], "w_scale": [(n, blocks)]}
    return {"x_scale": [(*lead, 1)], "w_scale": [(n,), (1, n)]}


def rule_violations(x, weight, bias, quant_mode, x_scale, w_scale, out_dtype) -> list:
    if quant_mode not in kernel.QUANT_MODES:
        return [(ValueError, f"quant_mode: {quant_mode!r} is not one of {list(kernel.QUANT_MODES)}")]
    quant = quant_mode != "none"
    problems = host.dtype_rule("x", x, tuple(INPUT_DTYPES[quant_mode])) + host.same_dtype_rule("weight", weight, "x", x)
    if out_dtype is not None and out_dtype not in host.FLOAT_DTYPES:
        problems.append((TypeError, f"out_dtype: {out_dtype} unsupported; use one of {list(host.FLOAT_DTYPES)}"))
    if problems:
        return problems
    problems += host.rows_rule("x", x)
    if len(weight.shape) != 2 or (x.shape and weight.shape[-1] != x.shape[-1]):
        problems.append((ValueError, f"weight: shape {list(weight.shape)} must be [N, K] with K = x's last dim "
                                     f"{x.shape[-1] if x.shape else '?'}"))
        return problems
    n, k = weight.shape
    problems += host.rows_rule("weight", weight)
    out_bytes = host.element_size(_default_out_dtype(x, quant_mode, out_dtype))
    if n * max(out_bytes, 4) % host.ALIGN_BYTES:  # the fp32/int32 accumulator row and the output row
        problems.append((ValueError, f"weight: N={n} must make 32-byte rows of the fp32 accumulator (N % 8 == 0)"))
    if quant_mode != "mxfp8":  # the tiles the kernel will set, checked before it runs
        element_bytes = kernel.ELEMENT_BYTES[INPUT_DTYPES[quant_mode][x.dtype]]
        tuned = tuned_build_params(math.prod(x.shape[:-1]), k, n, element_bytes, quant_mode, bias is not None)
        problems += [(ValueError, message) for message in projection_violations(
            k, n, element_bytes, kernel.block_sizes(k, n, element_bytes, tuned["unroll"]), cube=tuned["cube"],
            k_tile=tuned["k_tile"], n_tile=tuned["n_tile"])]
    else:
        problems += [(ValueError, message) for message in inner_axis_violations(k)]
    if quant_mode == "mxfp8" and k % kernel.MX_K_ALIGN:
        problems.append((ValueError, f"x: K={k} must be a multiple of {kernel.MX_K_ALIGN} with quant_mode='mxfp8' "
                                     f"(pypto's scaled_mm: one e8m0 scale per {MX_BLOCK} elements, K aligned to 64)"))
        return problems
    if quant:
        for name, t in (("x_scale", x_scale), ("w_scale", w_scale)):
            shapes = _scale_shapes(quant_mode, x, n)[name]
            if t is None:
                problems.append((ValueError, f"{name}: required with quant_mode={quant_mode!r}"))
                continue
            problems += host.dtype_rule(name, t, (SCALE_DTYPES[quant_mode],))
            if tuple(t.shape) not in shapes:
                problems.append((ValueError, f"{name}: shape {list(t.shape)} must be one of {[list(s) for s in shapes]}"))
        if bias is not None:
            problems.append((ValueError, f"bias: not supported with quant_mode={quant_mode!r} (add it to the output)"))
    else:
        for name, t in (("x_scale", x_scale), ("w_scale", w_scale)):
            if t is not None:
                problems.append((ValueError, f"{name}: only with a quantized quant_mode "
                                             f"({[m for m in kernel.QUANT_MODES if m != 'none']})"))
        if bias is not None:
            problems += host.same_dtype_rule("bias", bias, "x", x) + host.shape_rule("bias", bias, (n,), "[N]")
    return problems


def tuned_build_params(tokens: int, k: int, n: int, element_bytes: int, quant_mode: str, has_bias: bool) -> dict:
    """The tuned table's build parameters for a call (``kernel.TUNING``'s bands)."""
    return tuned_params(kernel, tokens=tokens, k=k, n=n, element_bytes=element_bytes, quant_mode=quant_mode,
                        has_bias=has_bias)


def tuning_shape(case) -> dict:
    """The shape a level's calls pass to the tuned table (``tuned_build_params``)."""
    x, weight = case.inputs["x"], case.inputs["weight"]
    quant_mode = case.attrs.get("quant_mode", "none")
    return {"tokens": math.prod(x.shape[:-1]), "k": x.shape[-1], "n": weight.shape[0],
            "element_bytes": kernel.ELEMENT_BYTES[INPUT_DTYPES[quant_mode][x.dtype]], "quant_mode": quant_mode,
            "has_bias": "bias" in case.inputs}


def validate(x, weight, bias, quant_mode, x_scale, w_scale, out_dtype) -> None:
    host.check_tensors("linear", "x", x=x, weight=weight, bias=bias, x_scale=x_scale, w_scale=w_scale)
    host.raise_first(rule_violations(x, weight, bias, quant_mode, x_scale, w_scale, out_dtype))


def _default_out_dtype(x, quant_mode, out_dtype):
    return out_dtype or (x.dtype if quant_mode == "none" else QUANTIZED_OUT_DTYPE)


#: Why the pypto-sim backend refuses mxfp8 (probed with pypto 0.2.0, see the README)
SIM_MXFP8_LIMIT = ("linear: quant_mode='mxfp8' cannot run on pypto-sim: pypto 0.2.0 traces fp8 scaled_mm only for "
                   "DAV_3510 (A5; error FC3000 on the DAV_2201 it simulates) and neither its cost model nor its CPU "
                   "interpreter implements the MX matmul; use backend 'interp', or 'npu' on an A5 device")


def backend_refusal(quant_mode, backend_name: str) -> str | None:
    """The one-line reason ``backend_name`` cannot run ``quant_mode``, else None."""
    return SIM_MXFP8_LIMIT if quant_mode == "mxfp8" and backend_name == "pypto-sim" else None


def _scale_operands(quant_mode, x_scale, w_scale, rows, n, k) -> list:
    """x_scale and w_scale in the kernel's layout."""
    if quant_mode == "mxfp8":  # [.., K/32] -> pypto's [.., K/64, 2]
        blocks = k // kernel.MX_K_ALIGN
        return [x_scale.reshape(rows, blocks, 2), w_scale.reshape(n, blocks, 2)]
    return [x_scale.reshape(-1, 1), w_scale.reshape(1, n)]


def launch(x, weight, bias=None, quant_mode="none", x_scale=None, w_scale=None, out_dtype=None, backend=None,
           variant=None) -> tuple[torch.Tensor, LaunchReport]:
    validate(x, weight, bias, quant_mode, x_scale, w_scale, out_dtype)
    backend = get_backend(backend) if backend is None or isinstance(backend, str) else backend
    if refusal := backend_refusal(quant_mode, backend.name):
        raise NotImplementedError(refusal)
    out_dtype = _default_out_dtype(x, quant_mode, out_dtype)
    n, k = weight.shape
    rows = host.as_rows(x)
    y = torch.empty(*x.shape[:-1], n, dtype=out_dtype, device=x.device)
    # the kernel's two signatures (kernel.build's docstring); an absent bias is a None parameter
    if quant_mode != "none":
        tensors, absent = [rows, weight, *_scale_operands(quant_mode, x_scale, w_scale, rows.shape[0], n, k),
                           host.as_rows(y)], {}
    elif bias is None:
        tensors, absent = [rows, weight, host.as_rows(y)], {"bias": None}
    else:
        tensors, absent = [rows, weight, host.as_rows(y), bias.view(1, n)], {}
    dtype = INPUT_DTYPES[quant_mode][x.dtype]
    static = {"k": k, "n": n, "dtype": dtype, "out_dtype": host.FLOAT_DTYPES[out_dtype], "quant_mode": quant_mode,
              "has_bias": bias is not None,
              **tuned_build_params(rows.shape[0], k, n, kernel.ELEMENT_BYTES[dtype], quant_mode, bias is not None),
              **kernel.VARIANTS.get(variant, {})}
    with _platform_for(quant_mode, backend.name):
        return y, host.launch(kernel.build, static, tensors, absent, backend, rows.shape[0])


def _platform_for(quant_mode, backend_name: str):
    """mxfp8 is an A5 (DAV_3510) kernel: the interpreter checks it against that profile,
    as pypto 0.2.0 traces fp8 scaled_mm for DAV_3510 only."""
    if quant_mode == "mxfp8" and backend_name == "interp":
        return using_platform("DAV_3510")
    return contextlib.nullcontext()


@torch.library.custom_op("ptogym::linear", mutates_args=())
def _linear_op(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, quant_mode: str,
               x_scale: torch.Tensor | None, w_scale: torch.Tensor | None, out_dtype: torch.dtype | None) -> torch.Tensor:
    return launch(x, weight, bias, quant_mode, x_scale, w_scale, out_dtype)[0]


@_linear_op.register_fake
def _(x, weight, bias, quant_mode, x_scale, w_scale, out_dtype):
    return x.new_empty(*x.shape[:-1], weight.shape[0], dtype=_default_out_dtype(x, quant_mode, out_dtype))


def linear(x, weight, bias=None, *, quant_mode="none", x_scale=None, w_scale=None, out_dtype=None, backend=None):
    """y = x @ weight^T (+ bias); see the module docstring for the modes and dtypes."""
    if not torch.compiler.is_compiling():
        validate(x, weight, bias, quant_mode, x_scale, w_scale, out_dtype)
    if backend is None:
        return torch.ops.ptogym.linear(x, weight, bias, quant_mode, x_scale, w_scale, out_dtype)
    return launch(x, weight, bias, quant_mode, x_scale, w_scale, out_dtype, backend)[0]


def _args(inputs, attrs):
    out_dtype = attrs.get("out_dtype")
    return (inputs["x"], inputs["weight"], inputs.get("bias"), attrs.get("quant_mode", "none"),
            inputs.get("x_scale"), inputs.get("w_scale"), getattr(torch, out_dtype) if out_dtype else None)


def _golden(inputs, attrs):
    x, weight, bias, quant_mode, x_scale, w_scale, out_dtype = _args(inputs, attrs)
    return {"y": linear_golden(x, weight, bias, x_scale, w_scale, _default_out_dtype(x, quant_mode, out_dtype))}


def _run(inputs, attrs, backend, variant=None):
    y, report = launch(*_args(inputs, attrs), backend=backend, variant=variant)
    return {"y": y}, report


def make_inputs(case, generator, device="cpu"):
    """host.make_inputs, with float activations and weights scaled by 1/sqrt(K) so the
    outputs stay O(1) like a trained layer's; MX (e8m0) scales are powers of two in
    [1/4, 4], so blocks differ by up to 2^4 and the products stay O(1) too."""
    tensors = host.make_inputs(case, generator, device)
    k = case.inputs["x"].shape[-1]
    for name in ("x", "weight"):
        if tensors[name].is_floating_point():
            tensors[name] = (tensors[name].float() * k ** -0.25).to(tensors[name].dtype)
    for name, spec in case.inputs.items():
        if spec.dtype == SCALE_DTYPES["mxfp8"]:
            exponents = torch.randint(-2, 3, spec.shape, generator=generator)
            tensors[name] = (2.0 ** exponents).to(device=device, dtype=spec.dtype)
    return tensors


def _check_case(case) -> list[str]:
    names = set(case.inputs)
    if not {"x", "weight"} <= names <= {"x", "weight", "bias", "x_scale", "w_scale"}:
        return [f"inputs must be x, weight and optionally bias, x_scale, w_scale; got {sorted(names)}"]
    try:
        args = _args(case.inputs, case.attrs)
    except AttributeError:
        return [f"out_dtype: unknown dtype {case.attrs.get('out_dtype')!r}"]
    return [m for _, m in rule_violations(*args)]


def hbm_bytes(case) -> int:
    x, weight = case.inputs["x"], case.inputs["weight"]
    out_dtype = _default_out_dtype(x, case.attrs.get("quant_mode", "none"),
                                   getattr(torch, case.attrs["out_dtype"]) if "out_dtype" in case.attrs else None)
    return host.moved_bytes(case, {"y": ((*x.shape[:-1], weight.shape[0]), out_dtype)})


def flops(case) -> int:
    """2 * rows * K * N multiply-adds of the projection."""
    x, weight = case.inputs["x"], case.inputs["weight"]
    rows = 1
    for d in x.shape[:-1]:
        rows *= d
    return 2 * rows * weight.shape[0] * weight.shape[1]


SPEC = OpSpec(
    name="linear",
    description="linear projection (AT-09): bf16/fp16 b_trans matmul (+bias) or int8 W8A8 with fused dequant",
    make_inputs=make_inputs,
    golden=_golden,
    run=_run,
    check_case=_check_case,
    hbm_bytes=hbm_bytes,
    output_names=("y",),
    attr_names=("quant_mode", "out_dtype"),
    required_levels=("level0", "level1", "level2", "level3", "level4", "level5"),
    extra={"patterns": PATTERNS, "variants": ("upstream",), "flops": flops,
           "sim_summary": measure.summarizer(hbm_bytes, flops),
           "tuning_shape": tuning_shape},
)
