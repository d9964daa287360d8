"""Linear projection (pattern AT-09) as a PyPTO kernel: y = x @ weight^T (+ bias).

Modes (``ptogym.atoms.linear``):

* "none": x [rows, K] and weight [N, K] bf16/fp16, fp32 accumulation, one rounding
  to out_dtype; a bias is added to the fp32 accumulator by the cube
  (``linear_cube_bias``).
* "int8_w8a8": x [rows, K] and weight [N, K] int8, exact int32 accumulation, then
  AT-06 dequant with x_scale [rows, 1] and w_scale [1, N] (fp32) to out_dtype.
* "mxfp8": x [rows, K] and weight [N, K] of one fp8 type with MX block scales
  x_scale [rows, K/64, 2] and w_scale [N, K/64, 2] (e8m0, one per 32 elements along
  K) through ``scaled_mm``, fp32 accumulation, one rounding to out_dtype.  Real
  pypto 0.2.0 traces it only for DAV_3510 (A5); see the README.

Schedule: the token axis is dynamic; ``loop_unroll`` walks it in static blocks of
``unroll`` rows (1 takes the ragged tail; 1024-token blocks, 128 only for weights of
8 MiB or more, as in ``rms_norm_linear``).  Each block multiplies by the whole
weight.  Cube tiles (``block_tile_shapes``), measured per block size under the cost
model (README): up to 128 tokens ``projection_tile_shapes`` (L1 k tiles as long as L1 holds: few, large
copies; N spread over the 24 cube cores), more than 128 ``wide_block_tile_shapes``
(n 256).  Vector work (dequant) runs on (``vec_tile_rows(N)``, N) tiles.  ``TUNING``
below is what ``ptogym tune`` may change; the values the operator runs are in
``tuned.json`` beside this file.  No torch here.
"""
from ptogym.atoms.linear import (CUBE_TILE_PARAMS, UNROLL_ALTERNATIVES, UPSTREAM_CUBE, kernel_tile_shapes, linear,
                                 linear_cube_bias, linear_mxfp8, linear_w8a8, tiles_fit)
from ptogym.atoms.rms_norm import to_fp32
from ptogym.atoms.signature import optional_input
from ptogym.ops.inplace_add_rms_norm.kernel import vec_tile_rows
from ptogym.tune.space import Param, Tuning, token_band

UNROLL = (1024, 256, 64, 32, 16, 8, 4, 2, 1)  # token block sizes (measured: README's tuning notes)
UNROLL_LARGE_WEIGHT = (1024, 256, 128, 64, 32, 16, 8, 4, 2, 1)
LARGE_WEIGHT_BYTES = 8 << 20
QUANT_MODES = ("none", "int8_w8a8", "mxfp8")
ELEMENT_BYTES = {"DT_BF16": 2, "DT_FP16": 2, "DT_INT8": 1, "DT_FP8E4M3": 1, "DT_FP8E5M2": 1}
MX_K_ALIGN = 64  # scaled_mm: K a multiple of 64, scales [.., K/64, 2] (one e8m0 per 32 elements)

#: Build kwargs of other configurations, simulated side by side by the benchmarks.
VARIANTS = {
    # upstream SK-03's recommendation: one unroll value (128) with the tail in 1-row
    # blocks, cube tiles [32, 32] [512, 512] [64, 64] as in the MLA q_a projection
    "upstream": {"unroll": (128, 1), "cube": UPSTREAM_CUBE},
}


def block_sizes(k: int, n: int, element_bytes: int, unroll=None) -> list:
    """The kernel's token block sizes, largest first: ``unroll`` (None: picked from the
    weight's size) with 1 for the ragged tail."""
    if unroll is None:
        unroll = UNROLL_LARGE_WEIGHT if n * k * element_bytes >= LARGE_WEIGHT_BYTES else UNROLL
    return sorted(set(unroll) | {1}, reverse=True)


def _band(tokens, k, n, element_bytes, quant_mode, has_bias):
    """Token bands within the two weight classes the unroll lists were tuned for, per mode."""
    weight = "weight>=8MiB" if n * k * element_bytes >= LARGE_WEIGHT_BYTES else "weight<8MiB"
    return weight, f"{weight}/{quant_mode}/{token_band(tokens)}"


#: what ``ptogym tune`` may change (``ptogym.tune.space``); the values the operator runs
#: are in ``tuned.json`` beside this file, per weight class, mode and token band
TUNING = Tuning(
    params={
        "unroll": Param((UNROLL, UNROLL_LARGE_WEIGHT, *UNROLL_ALTERNATIVES)),
        **CUBE_TILE_PARAMS,
        # where a bias is added: a choice only when there is one
        "cube_bias": Param(lambda shape: (True, False) if shape["has_bias"] else (True,)),
    },
    band=_band,
    constraints=(tiles_fit(block_sizes),),
    plain=VARIANTS["upstream"],
)


def build(pypto, *, k: int, n: int, dtype: str, out_dtype: str, quant_mode: str = "none", has_bias: bool = False,
          unroll=None, cube=None, k_tile: int = 256, n_tile: int = None, cube_bias: bool = True):
    """Kernel(x, weight, y, bias) in mode "none", kernel(x, weight, x_scale, w_scale, y)
    in the quantized modes: x [rows, k] and weight [n, k] of ``dtype``; bias [1, n] of
    ``dtype`` when has_bias, else None; x_scale [rows, 1] and w_scale [1, n] fp32
    (int8_w8a8), or [rows, k/64, 2] and [n, k/64, 2] e8m0 (mxfp8); y [rows, n] of
    ``out_dtype``.
    ``unroll=None`` picks the token blocks from the weight's size; ``cube`` (fixed
    tiles) or ``n_tile`` select ``cube_tile_shapes`` instead of ``block_tile_shapes``;
    ``cube_bias`` adds a bias on the cube (``linear_cube_bias``), else on the vector unit."""
    if quant_mode not in QUANT_MODES:
        raise ValueError(f"quant_mode: {quant_mode!r} is not one of {QUANT_MODES}")
    in_dt, out_dt = getattr(pypto, dtype), getattr(pypto, out_dtype)
    element_bytes = ELEMENT_BYTES[dtype]
    sizes = block_sizes(k, n, element_bytes, unroll)
    vec_rows = vec_tile_rows(n, sizes[0])
    mx = quant_mode == "mxfp8"
    k_blocks = k // MX_K_ALIGN
    xs_shape, ws_shape = ([pypto.DYNAMIC, k_blocks, 2], [n, k_blocks, 2]) if mx else ([pypto.DYNAMIC, 1], [1, n])
    scale_dt = pypto.DT_FP8E8M0 if mx else pypto.DT_FP32

    def project_block(x, weight, bias, x_scale, w_scale, y_out, row, size):
        pypto.set_cube_tile_shapes(*kernel_tile_shapes(size, k, n, element_bytes, cube=cube, k_tile=k_tile,
                                                       n_tile=n_tile))
        tile = pypto.view(x, [size, k], [row, 0])
        if mx:
            y = linear_mxfp8(pypto, tile, weight, pypto.view(x_scale, [size, k_blocks, 2], [row, 0, 0]), w_scale,
                             out_dt)
        elif quant_mode == "int8_w8a8":
            y = linear_w8a8(pypto, tile, weight, pypto.view(x_scale, [size, 1], [row, 0]), w_scale, out_dt)
        elif has_bias and cube_bias:
            y = linear_cube_bias(pypto, tile, weight, bias, out_dt)
        else:
            y = linear(pypto, tile, weight, out_dt, bias=to_fp32(pypto, bias) if has_bias else None)
        pypto.assemble(y, [row, 0], y_out)

    # Two signatures, one per mode family, each with only the inputs its mode reads (a
    # bias a tensor only when given: ``optional_input``); the same blocks either way.
    if quant_mode == "none":
        @pypto.frontend.jit()
        def linear_kernel(
            x: pypto.Tensor([pypto.DYNAMIC, k], in_dt),
            weight: pypto.Tensor([n, k], in_dt),
            y_out: pypto.Tensor([pypto.DYNAMIC, n], out_dt),
            bias: optional_input(pypto, has_bias, [1, n], in_dt),
        ):
            pypto.experimental.set_operation_options(combine_axis=True)
            pypto.set_vec_tile_shapes(vec_rows, n)
            for row, size in pypto.loop_unroll(0, x.shape[0], 1, name="LOOP_TOKENS", idx_name="row",
                                               unroll_list=sizes):
                project_block(x, weight, bias, None, None, y_out, row, size)
    else:
        @pypto.frontend.jit()
        def linear_kernel(  # ptogym: noqa OL01 one kernel per build: the quantized modes' signature
            x: pypto.Tensor([pypto.DYNAMIC, k], in_dt),
            weight: pypto.Tensor([n, k], in_dt),
            x_scale: pypto.Tensor(xs_shape, scale_dt),
            w_scale: pypto.Tensor(ws_shape, scale_dt),
            y_out: pypto.Tensor([pypto.DYNAMIC, n], out_dt),
        ):
            pypto.experimental.set_operation_options(combine_axis=True)
            pypto.set_vec_tile_shapes(vec_rows, n)
            for row, size in pypto.loop_unroll(0, x.shape[0], 1, name="LOOP_TOKENS", idx_name="row",
                                               unroll_list=sizes):
                project_block(x, weight, None, x_scale, w_scale, y_out, row, size)

    return linear_kernel
