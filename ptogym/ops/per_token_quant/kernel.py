"""Per-token symmetric int8 quantisation (pattern AT-05) as a PyPTO kernel.

Per row r of the [rows, D] input (``ptogym.atoms.quant.per_token_quant``, fp32):

    amax     = max(max(|x[r]|), 1e-30)
    x_int8[r] = int8(trunc_sat(fp16(round(int32(rint(x[r] * 127 / amax))))))
    scale[r]  = amax / 127                                  (the dequant scale, fp32)

Schedule: rows walked by ``loop_unroll`` over static block sizes ``unroll`` (1 takes
the ragged tail), one task per block; vector tile (rows, D) by the RMSNorm tile rule
(``amax`` reduces a whole fp32 row like ``sum``).  ``TUNING`` below is what ``ptogym
tune`` may change; the values the operator runs are in ``tuned.json`` beside this
file.  No torch here.
"""
from ptogym.atoms.quant import per_token_quant
from ptogym.atoms.rms_norm import to_fp32
from ptogym.ops.inplace_add_rms_norm.kernel import MAX_HIDDEN, row_bands, vec_tile_rows
from ptogym.ops.rms_norm.kernel import ROW_UNROLLS, tile_rows_below, tile_within_blocks
from ptogym.tune.space import Param, Tuning

UNROLL = (64, 16, 4, 1)  # block sizes when the caller gives none; the tuned table's "auto" is host.row_blocks(rows)
MAX_D = MAX_HIDDEN

#: what ``ptogym tune`` may change (``ptogym.tune.space``); the values the operator runs
#: are in ``tuned.json`` beside this file, per token band and row-width class
#: (``row_bands``).  unroll "auto": the operator's
#: ``host.row_blocks`` rule (about one wave of 48 tasks); plain: the build's fixed list
TUNING = Tuning(
    params={
        "unroll": Param(ROW_UNROLLS),
        "tile_rows": Param(lambda shape: tile_rows_below(shape["hidden"])),
    },
    band=lambda rows, hidden, dtype: row_bands(rows, hidden),
    constraints=(tile_within_blocks,),
    plain={"unroll": UNROLL, "tile_rows": None},
)


def build(pypto, *, hidden: int, dtype: str, unroll=UNROLL, tile_rows=None):
    """Kernel(x, x_int8, scale): x [rows, hidden] of ``dtype``; x_int8 [rows, hidden]
    int8; scale [rows, 1] fp32."""
    dt = getattr(pypto, dtype)
    sizes = sorted(set(unroll) | {1}, reverse=True)
    rows_per_tile = tile_rows or vec_tile_rows(hidden, sizes[0])

    def quantise_block(x, x_int8_out, scale_out, row, size):
        x_int8, scale = per_token_quant(pypto, to_fp32(pypto, pypto.view(x, [size, hidden], [row, 0])))
        pypto.assemble(x_int8, [row, 0], x_int8_out)
        pypto.assemble(scale, [row, 0], scale_out)

    @pypto.frontend.jit()  # with (): pypto then captures the builder's locals used only in annotations
    def per_token_quant_kernel(
        x: pypto.Tensor([pypto.DYNAMIC, hidden], dt),
        x_int8_out: pypto.Tensor([pypto.DYNAMIC, hidden], pypto.DT_INT8),
        scale_out: pypto.Tensor([pypto.DYNAMIC, 1], pypto.DT_FP32),
    ):
        pypto.experimental.set_operation_options(combine_axis=True)
        pypto.set_vec_tile_shapes(rows_per_tile, hidden)
        for row, size in pypto.loop_unroll(0, x.shape[0], 1, name="LOOP_ROWS", idx_name="row", unroll_list=sizes):
            pypto.set_pass_options(sg_set_scope=1)
            quantise_block(x, x_int8_out, scale_out, row, size)

    return per_token_quant_kernel
