"""RMSNorm (pattern AT-03) as a PyPTO kernel.

Per row r of the [rows, D] input, in fp32 (``ptogym.atoms.rms_norm``):

    rstd[r] = 1 / sqrt(sum(x[r]^2) / D + eps)      rsqrt_mode "rsqrt" | "sqrt_div"
    y[r]    = x[r] * rstd[r] [* gamma] [+ bias]    cast to x's dtype

Schedule: the rows are one dynamic axis walked by ``loop_unroll`` with static block
sizes ``unroll`` (largest first; 1 takes any ragged tail), one task per block
(``sg_set_scope``).  The operator picks the sizes per launch from the row count
(``ptogym.atoms.host.row_blocks``: about one wave of 48 tasks; measured in the
README) - a fixed list is either too coarse for few rows or too fine for many; the vector tile is (``vec_tile_rows(D)``, D), the rule tuned for
InplaceAddRmsNorm (one fp32 tile within pypto.sum's 64 KB buffer, an fp32 binary op
within 192 KB of UB).  gamma and bias are cast to fp32 once per block inside the
task (hoisting them makes a task of its own that starts the clock early).
``combine_axis`` broadcasts rstd/gamma inline.  rstd is always written (fp32,
[rows, 1]: 4 bytes a row, noise next to the row itself).

No torch here: ``build`` receives the ``pypto`` namespace.
"""
from ptogym.atoms.rms_norm import rms_norm
from ptogym.atoms.signature import optional_input
from ptogym.ops.inplace_add_rms_norm.kernel import MAX_HIDDEN, row_bands, vec_tile_rows
from ptogym.tune.space import Param, Tuning

UNROLL = (64, 16, 4, 1)  # block sizes when the caller gives none; op.py passes host.row_blocks(rows)
MAX_D = MAX_HIDDEN

#: Build kwargs of other configurations, simulated side by side by the benchmarks.
VARIANTS = {
    # upstream's RMSNorm configuration: loop_unroll [64, 16, 4, 2, 1] with 8 tiles
    # merged to a task (vec_nbuffer_setting) instead of one task per block.
    "upstream": {"unroll": (64, 16, 4, 2, 1), "one_task_per_block": False},
}


#: the row loop's block lists a row kernel's sweep tries ("auto": the operator's ``host.row_blocks``)
ROW_UNROLLS = ("auto", UNROLL, (64, 16, 4, 2, 1), (32, 8, 2, 1), (16, 4, 1), (8, 2, 1), (4, 1), (2, 1), (1,))


def tile_rows_below(width: int) -> tuple:
    """Vector tile heights of a row kernel over rows of ``width``: None (``vec_tile_rows``'
    choice) or any smaller power of two."""
    widest = vec_tile_rows(width)
    return (None, *(rows for rows in (1, 2, 4, 8, 16, 32) if rows < widest))


def tile_within_blocks(params, shape):
    """A vector tile taller than the largest block would hold rows no block has."""
    unroll = params["unroll"]
    if params["tile_rows"] and unroll != "auto" and params["tile_rows"] > max(unroll):
        return f"tile_rows={params['tile_rows']} > the largest block {max(unroll)}"
    return None


#: what ``ptogym tune`` may change (``ptogym.tune.space``); the values the operator runs
#: are in ``tuned.json`` beside this file, per token band and row-width class
#: (``row_bands``).  unroll "auto": the operator's
#: ``host.row_blocks`` rule (about one wave of 48 tasks)
TUNING = Tuning(
    params={
        "unroll": Param(ROW_UNROLLS),
        "one_task_per_block": Param((True, False)),
        "tile_rows": Param(lambda shape: tile_rows_below(shape["hidden"])),
    },
    band=lambda rows, hidden, dtype: row_bands(rows, hidden),
    constraints=(tile_within_blocks,),
    plain=VARIANTS["upstream"],
)


def build(pypto, *, hidden: int, dtype: str, has_gamma: bool, has_bias: bool, rsqrt_mode: str = "rsqrt",
          unroll=UNROLL, one_task_per_block: bool = True, tile_rows=None):
    """Kernel(x, y, rstd, gamma, bias, eps): x, y [rows, hidden] of ``dtype``; rstd
    [rows, 1] fp32; gamma, bias [1, hidden] of ``dtype`` when has_gamma / has_bias, else
    None (``optional_input``: a bias needs a gamma before it, ones where there is none)."""
    if has_bias and not has_gamma:
        raise ValueError("has_bias needs has_gamma: an absent gamma before a bias passes as ones")
    dt = getattr(pypto, dtype)
    sizes = sorted(set(unroll) | {1}, reverse=True)
    rows_per_tile = tile_rows or vec_tile_rows(hidden, sizes[0])
    scope = 1 if one_task_per_block else -1

    def normalise_block(x, gamma, bias, y_out, rstd_out, eps, row, size):
        """Rows [row, row + size) of x -> y_out, rstd_out."""
        tile = pypto.view(x, [size, hidden], [row, 0])
        y, rstd = rms_norm(pypto, tile, eps, gamma=gamma if has_gamma else None,
                           bias=bias if has_bias else None, rsqrt_mode=rsqrt_mode)
        pypto.assemble(pypto.cast(y, dt), [row, 0], y_out)
        pypto.assemble(rstd, [row, 0], rstd_out)

    @pypto.frontend.jit(pass_options={"vec_nbuffer_setting": {-2: 1, -1: 8}})
    def rms_norm_kernel(
        x: pypto.Tensor([pypto.DYNAMIC, hidden], dt),
        y_out: pypto.Tensor([pypto.DYNAMIC, hidden], dt),
        rstd_out: pypto.Tensor([pypto.DYNAMIC, 1], pypto.DT_FP32),
        gamma: optional_input(pypto, has_gamma, [1, hidden], dt),
        bias: optional_input(pypto, has_bias, [1, hidden], dt),
        eps: float,
    ):
        pypto.experimental.set_operation_options(combine_axis=True)
        pypto.set_vec_tile_shapes(rows_per_tile, hidden)
        for row, size in pypto.loop_unroll(0, x.shape[0], 1, name="LOOP_ROWS", idx_name="row", unroll_list=sizes):
            pypto.set_pass_options(sg_set_scope=scope)
            normalise_block(x, gamma, bias, y_out, rstd_out, eps, row, size)

    return rms_norm_kernel
