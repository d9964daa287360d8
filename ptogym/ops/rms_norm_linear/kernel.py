"""RMSNorm + Linear (pattern AT-10, V -> C) and RMSNorm + Linear + Quant (AT-11,
V -> C -> V) as one PyPTO kernel.

Per block of token rows (``ptogym.atoms``):

    AT-10:  normed = rms_norm(x, eps, gamma) (fp32)  -> cast to x's dtype
            y = matmul(normed, weight^T) (fp32 acc)  [+ bias, fp32]  -> x's dtype
    AT-11:  normed = rms_norm(x, eps, gamma) (fp32)  -> per_token_quant (int8, scale)
            acc = matmul(x_int8, weight_int8^T) (int32)  -> dequant(acc, scale, w_scale)
            -> out_dtype

The normalised rows never leave the core's buffers: the only HBM traffic is x,
gamma, the weight (and its scale) and y, against a chain of separate kernels that
writes and re-reads the normed (and quantised) activations.  AT-11 quantises the
fp32 normed rows directly (no bf16 rounding in between).

Schedule: ``loop_unroll`` over the token axis in static blocks of ``unroll`` rows
(1 takes the ragged tail); per block the vector tile is (``vec_tile_rows(K)``, K)
for the norm, then the cube tiles of ``cube_tile_shapes``, then (``vec_tile_rows(N)``,
N) for the bias / dequant epilogue.  No torch here.
"""
from ptogym.atoms.linear import cube_tile_shapes, linear, linear_w8a8
from ptogym.atoms.quant import per_token_quant
from ptogym.atoms.rms_norm import rms_norm, to_fp32
from ptogym.ops.inplace_add_rms_norm.kernel import MAX_HIDDEN, vec_tile_rows

UNROLL = (128, 64, 32, 16, 8, 4, 2, 1)
MAX_K = MAX_HIDDEN

#: Build kwargs of other configurations, simulated side by side by the benchmarks.
VARIANTS = {
    # upstream SK-03: one token unroll value (128, tail in 1-row blocks), cube tiles
    # [32, 32] [512, 512] [64, 64] as in the MLA prolog's q_a projection
    "upstream": {"unroll": (128, 1), "cube": ((32, 32), (512, 512), (64, 64))},
}


def build(pypto, *, k: int, n: int, dtype: str, quant: bool = False, out_dtype: str = None, has_bias: bool = False,
          unroll=UNROLL, cube=None, k_tile: int = 256, n_tile: int = 128):
    """Kernel(x, gamma, weight, bias, w_scale, y, eps): x [rows, k] and gamma [1, k] of
    ``dtype``; weight [n, k] of ``dtype`` (int8 with ``quant``); bias [1, n] of
    ``dtype`` (read when has_bias); w_scale [1, n] fp32 (read with ``quant``);
    y [rows, n] of ``out_dtype`` (default ``dtype``)."""
    dt = getattr(pypto, dtype)
    w_dt = pypto.DT_INT8 if quant else dt
    out_dt = getattr(pypto, out_dtype or dtype)
    sizes = sorted(set(unroll) | {1}, reverse=True)
    norm_rows, out_rows = vec_tile_rows(k, sizes[0]), vec_tile_rows(n, sizes[0])
    element_bytes = 1 if quant else 2

    def norm_project_block(x, gamma, weight, bias, w_scale, y_out, eps, row, size):
        pypto.set_vec_tile_shapes(norm_rows, k)
        normed, _ = rms_norm(pypto, pypto.view(x, [size, k], [row, 0]), eps, gamma=gamma)
        if quant:
            x_int8, x_scale = per_token_quant(pypto, normed)
        else:
            activations = pypto.cast(normed, dt)
        pypto.set_cube_tile_shapes(*cube_tile_shapes(size, k, n, element_bytes, k_tile, n_tile, fixed=cube))
        pypto.set_vec_tile_shapes(out_rows, n)
        if quant:
            y = linear_w8a8(pypto, x_int8, weight, x_scale, w_scale, out_dt)
        else:
            y = linear(pypto, activations, weight, out_dt, bias=to_fp32(pypto, bias) if has_bias else None)
        pypto.assemble(y, [row, 0], y_out)

    @pypto.frontend.jit()
    def rms_norm_linear_kernel(
        x: pypto.Tensor([pypto.DYNAMIC, k], dt),
        gamma: pypto.Tensor([1, k], dt),
        weight: pypto.Tensor([n, k], w_dt),
        bias: pypto.Tensor([1, n], dt),
        w_scale: pypto.Tensor([1, n], pypto.DT_FP32),
        y_out: pypto.Tensor([pypto.DYNAMIC, n], out_dt),
        eps: float,
    ):
        pypto.experimental.set_operation_options(combine_axis=True)
        for row, size in pypto.loop_unroll(0, x.shape[0], 1, name="LOOP_TOKENS", idx_name="row", unroll_list=sizes):
            norm_project_block(x, gamma, weight, bias, w_scale, y_out, eps, row, size)

    return rms_norm_linear_kernel
