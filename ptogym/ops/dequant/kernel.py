"""Dequantisation (pattern AT-06) of an int8 matmul's int32 accumulator.

    out[r, n] = out_dtype(float32(acc[r, n]) * scale_a[r] * scale_b[n or r])

``ptogym.atoms.quant.dequant`` on each block of rows; scale_b is per channel
([1, N]) or per token ([rows, 1]).  Schedule as the other row kernels: rows walked
by ``loop_unroll`` over ``unroll``, one task per block, vector tile (rows, N) by the
RMSNorm tile rule.  ``TUNING`` below is what ``ptogym tune`` may change; the values the
operator runs are in ``tuned.json`` beside this file.  No torch here.
"""
from ptogym.atoms.quant import dequant
from ptogym.ops.inplace_add_rms_norm.kernel import MAX_HIDDEN, row_bands, vec_tile_rows
from ptogym.ops.rms_norm.kernel import ROW_UNROLLS, tile_rows_below, tile_within_blocks
from ptogym.tune.space import Param, Tuning

UNROLL = (64, 16, 4, 1)  # block sizes when the caller gives none; the tuned table's "auto" is host.row_blocks(rows)
MAX_N = MAX_HIDDEN

#: what ``ptogym tune`` may change (``ptogym.tune.space``); the values the operator runs
#: are in ``tuned.json`` beside this file, per token band and row-width class
#: (``row_bands``).  unroll "auto": the operator's
#: ``host.row_blocks`` rule (about one wave of 48 tasks); plain: the build's fixed list
TUNING = Tuning(
    params={
        "unroll": Param(ROW_UNROLLS),
        "tile_rows": Param(lambda shape: tile_rows_below(shape["cols"])),
    },
    band=lambda rows, cols, out_dtype, per_token_b: row_bands(rows, cols),
    constraints=(tile_within_blocks,),
    plain={"unroll": UNROLL, "tile_rows": None},
)


def build(pypto, *, cols: int, out_dtype: str, per_token_b: bool, unroll=UNROLL, tile_rows=None):
    """Kernel(acc, scale_a, scale_b, out): acc [rows, cols] int32; scale_a [rows, 1]
    fp32; scale_b [1, cols] or (per_token_b) [rows, 1] fp32; out [rows, cols] ``out_dtype``."""
    dt = getattr(pypto, out_dtype)
    sizes = sorted(set(unroll) | {1}, reverse=True)
    rows_per_tile = tile_rows or vec_tile_rows(cols, sizes[0])
    scale_b_shape = [pypto.DYNAMIC, 1] if per_token_b else [1, cols]

    def dequant_block(acc, scale_a, scale_b, out, row, size):
        a = pypto.view(scale_a, [size, 1], [row, 0])
        b = pypto.view(scale_b, [size, 1], [row, 0]) if per_token_b else scale_b
        pypto.assemble(dequant(pypto, pypto.view(acc, [size, cols], [row, 0]), a, b, dt), [row, 0], out)

    @pypto.frontend.jit()  # with (): pypto then captures the builder's locals used only in annotations
    def dequant_kernel(
        acc: pypto.Tensor([pypto.DYNAMIC, cols], pypto.DT_INT32),
        scale_a: pypto.Tensor([pypto.DYNAMIC, 1], pypto.DT_FP32),
        scale_b: pypto.Tensor(scale_b_shape, pypto.DT_FP32),
        out: pypto.Tensor([pypto.DYNAMIC, cols], dt),
    ):
        pypto.experimental.set_operation_options(combine_axis=True)
        pypto.set_vec_tile_shapes(rows_per_tile, cols)
        for row, size in pypto.loop_unroll(0, acc.shape[0], 1, name="LOOP_ROWS", idx_name="row", unroll_list=sizes):
            pypto.set_pass_options(sg_set_scope=1)
            dequant_block(acc, scale_a, scale_b, out, row, size)

    return dequant_kernel
