"""InplaceAddRmsNorm as a PyPTO kernel.

Maths, per row r of the [rows, H] input (all in fp32, results in the input dtype):

    x_add[r] = x1[r] + x2[r]
    rstd[r]  = 1 / sqrt(sum(x_add[r]^2) * (1/H) + eps)
    y[r]     = x_add[r] * rstd[r] * gamma

The B*S rows are one dynamic axis; H is static.  Rows are walked with
``loop_unroll`` so that most steps move a large [factor, H] tile and the remainder
is mopped up by smaller factors.  Each step reads its x1/x2 tile, computes, and
assembles y, x_add and rstd; because a tile is fully read before its results are
written, the caller may pass x1 and x2 themselves as the y and x_add outputs: the
operator is in place without scratch buffers or a copy back.

Vector tile rule (``vec_tile_rows``): the tile is (rows, H); rows is the largest
count such that (a) one fp32 tile fits pypto.sum's 64 KB reduction buffer and
(b) the widest op - an fp32 binary op, three fp32 tiles - fits the 192 KB UB of
DAV_2201, capped at the largest unroll factor.  H=7168 gives 2 rows, H=256 gives 64.
H itself must keep a row 32-byte aligned and one fp32 row within 64 KB (H <= 16384).

This module never imports torch: ``build`` receives the ``pypto`` namespace (the
real package or ``ptogym.interp``) so one source serves every backend.
"""

SUM_BUFFER_BYTES = 64 * 1024
UB_BYTES = 192 * 1024
FP32_BYTES = 4
WIDEST_OP_TILES = 3  # an fp32 binary op holds two operands and its result in UB
UNROLL_FACTORS = (64, 16, 4, 2, 1)
MAX_HIDDEN = SUM_BUFFER_BYTES // FP32_BYTES


def vec_tile_rows(hidden: int, max_rows: int = max(UNROLL_FACTORS)) -> int:
    """Rows per vector tile for a row length of ``hidden`` (see module docstring)."""
    row_bytes = hidden * FP32_BYTES
    rows = min(SUM_BUFFER_BYTES // row_bytes, UB_BYTES // (WIDEST_OP_TILES * row_bytes), max_rows)
    if rows < 1:
        raise ValueError(f"hidden={hidden}: one fp32 row needs {row_bytes} B > {SUM_BUFFER_BYTES} B sum buffer")
    return rows


def build(pypto, *, hidden: int, dtype: str, unroll=UNROLL_FACTORS, tile_rows=None):
    """The jit kernel for rows of ``hidden`` elements of ``dtype`` ("DT_BF16", ...).

    Call: kernel(x1, x2, gamma, y_out, x_add_out, rstd_out, eps) with x1, x2, y_out,
    x_add_out: [rows, hidden]; gamma: [1, hidden]; rstd_out: [rows, 1].
    """
    dt = getattr(pypto, dtype)
    rows_per_tile = tile_rows or vec_tile_rows(hidden, max(unroll))
    unroll_list = list(unroll)
    inv_hidden = 1.0 / hidden

    @pypto.frontend.jit(pass_options={"vec_nbuffer_setting": {-2: 1, -1: 8}})
    def inplace_add_rms_norm_kernel(
        x1: pypto.Tensor([pypto.DYNAMIC, hidden], dt),
        x2: pypto.Tensor([pypto.DYNAMIC, hidden], dt),
        gamma: pypto.Tensor([1, hidden], dt),
        y_out: pypto.Tensor([pypto.DYNAMIC, hidden], dt),
        x_add_out: pypto.Tensor([pypto.DYNAMIC, hidden], dt),
        rstd_out: pypto.Tensor([pypto.DYNAMIC, 1], dt),
        eps: float,
    ):
        pypto.set_vec_tile_shapes(1, hidden)
        gamma_fp32 = pypto.cast(gamma, pypto.DT_FP32)
        pypto.set_vec_tile_shapes(rows_per_tile, hidden)
        n_rows = x1.shape[0]
        for row, factor in pypto.loop_unroll(0, n_rows, 1, name="LOOP_ROWS", idx_name="row",
                                             unroll_list=unroll_list):
            x1_fp32 = pypto.cast(pypto.view(x1, [factor, hidden], [row, 0]), pypto.DT_FP32)
            x2_fp32 = pypto.cast(pypto.view(x2, [factor, hidden], [row, 0]), pypto.DT_FP32)
            x_add = pypto.add(x1_fp32, x2_fp32)
            square_sum = pypto.sum(pypto.mul(x_add, x_add), -1, keepdim=True)
            rstd = pypto.rsqrt(pypto.add(pypto.mul(square_sum, inv_hidden), eps))
            y = pypto.mul(pypto.mul(x_add, rstd), gamma_fp32)
            pypto.assemble(pypto.cast(y, dt), [row, 0], y_out)
            pypto.assemble(pypto.cast(x_add, dt), [row, 0], x_add_out)
            pypto.assemble(pypto.cast(rstd, dt), [row, 0], rstd_out)

    return inplace_add_rms_norm_kernel
