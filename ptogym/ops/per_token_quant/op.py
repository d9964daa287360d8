"""Public API of per-token int8 quantisation (AT-05), torch.library and ``SPEC``.

``per_token_quant(x) -> (x_int8, scale)``: x [..., D] bf16/fp16/fp32; x_int8 [..., D]
int8 = round-half-even(x * 127 / amax) per row; scale [..., 1] fp32 = amax / 127 is
the dequant scale (x ~ x_int8 * scale).

Edge rows (see ``ptogym.atoms.quant``): amax is floored at 1e-30, so an all-zero
row gives zeros and scale 1e-30 / 127 (finite; dequantising gives exact zeros).
A row with inf or NaN is not supported.  What happens (interpreter, tested): a NaN
row gives scale NaN and x_int8 all -128 (NaN products convert to INT_MIN in int32, as
pypto converts, then saturate); an inf row gives scale inf, zeros, and -128 where x is
inf (127 / inf = 0, inf * 0 = NaN).
On a device the amax of a NaN row depends on the unit's NaN handling.  Callers that
may see them must check ``torch.isfinite(x)`` first.
"""
from __future__ import annotations

import torch

from ptogym.atoms import host, measure
from ptogym.backends.base import LaunchReport
from ptogym.ops import OpSpec
from ptogym.ops.rms_norm.op import tuning_shape  # the same shape: rows, hidden and dtype of x
from ptogym.tune.table import tuned_params

from . import kernel
from .golden import per_token_quant_golden

PATTERNS = ("AT-05",)


def rule_violations(x) -> list:
    problems = host.dtype_rule("x", x, host.FLOAT_DTYPES)
    if problems:
        return problems
    problems += host.rows_rule("x", x)
    if x.shape and x.shape[-1] > kernel.MAX_D:
        problems.append((ValueError, f"x: D={x.shape[-1]} > {kernel.MAX_D}: one fp32 row must fit "
                                     "the 64 KB reduction buffer of pypto.amax"))
    if x.shape and x.shape[-1] % 32:  # the int8 output row must be 32-byte aligned too
        problems.append((ValueError, f"x: D={x.shape[-1]} must be a multiple of 32 (the int8 output row "
                                     "is 32-byte aligned)"))
    return problems


def validate(x) -> None:
    host.check_tensors("per_token_quant", "x", x=x)
    host.raise_first(rule_violations(x))


def launch(x, backend=None) -> tuple[torch.Tensor, torch.Tensor, LaunchReport]:
    validate(x)
    rows = host.as_rows(x)
    x_int8 = torch.empty(x.shape, dtype=torch.int8, device=x.device)
    scale = torch.empty(*x.shape[:-1], 1, dtype=torch.float32, device=x.device)
    hidden, dtype = x.shape[-1], host.FLOAT_DTYPES[x.dtype]
    tuned = host.with_row_blocks(tuned_params(kernel, rows=rows.shape[0], hidden=hidden, dtype=dtype), rows.shape[0])
    report = host.launch(kernel.build, {"hidden": hidden, "dtype": dtype, **tuned},
                         [rows, host.as_rows(x_int8), scale.view(-1, 1)], {}, backend, rows.shape[0])
    return x_int8, scale, report


@torch.library.custom_op("ptogym::per_token_quant", mutates_args=())
def _per_token_quant_op(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    x_int8, scale, _ = launch(x)
    return x_int8, scale


@_per_token_quant_op.register_fake
def _(x):
    return torch.empty_like(x, dtype=torch.int8), x.new_empty(*x.shape[:-1], 1, dtype=torch.float32)


def per_token_quant(x, *, backend=None):
    """Symmetric per-row int8 quantisation; returns (x_int8, scale) with x ~ x_int8 * scale."""
    if not torch.compiler.is_compiling():
        validate(x)
    if backend is None:
        return torch.ops.ptogym.per_token_quant(x)
    x_int8, scale, _ = launch(x, backend)
    return x_int8, scale


def _golden(inputs, attrs):
    x_int8, scale = per_token_quant_golden(inputs["x"])
    return {"x_int8": x_int8, "scale": scale}


def _run(inputs, attrs, backend, variant=None):
    x_int8, scale, report = launch(inputs["x"], backend)
    return {"x_int8": x_int8, "scale": scale}, report


def _check_case(case) -> list[str]:
    return [m for _, m in rule_violations(case.inputs["x"])]


def hbm_bytes(case) -> int:
    x = case.inputs["x"]
    return host.moved_bytes(case, {"x_int8": (x.shape, torch.int8), "scale": ((*x.shape[:-1], 1), torch.float32)})


SPEC = OpSpec(
    name="per_token_quant",
    description="per-token symmetric int8 quantisation (AT-05): RINT/ROUND/TRUNC-sat chain, fp32 dequant scale",
    make_inputs=host.make_inputs,
    golden=_golden,
    run=_run,
    check_case=_check_case,
    hbm_bytes=hbm_bytes,
    output_names=("x_int8", "scale"),
    input_names=("x",),
    attr_names=(),
    required_levels=("level0", "level1", "level2", "level3", "level4", "level5"),
    extra={"patterns": PATTERNS, "sim_summary": measure.summarizer(hbm_bytes), "tuning_shape": tuning_shape},
)
