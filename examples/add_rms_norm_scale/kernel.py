"""add_rms_norm_scale as a PyPTO kernel: residual add, RMSNorm, smooth scale.

Per row r of the [rows, hidden] inputs, in fp32 (outputs in the input dtype):

    x_sum[r] = x1[r] + x2[r]                                   (module 1)
    rstd[r]  = 1 / sqrt(sum(x_sum[r]^2) / hidden + eps)        (module 2)
    y[r]     = x_sum[r] * rstd[r] * gamma * smooth_scale       (module 2, 3)

Rows are processed ROWS_PER_TILE at a time in one pypto.loop; the last block's
valid rows are marked with valid_shape.  Outputs: y and x_add (= x_sum, the
residual for the next layer).  Worked example of docs/workflow.md; this module
never imports torch (``build`` receives the ``pypto`` namespace).
"""
ROWS_PER_TILE = 8


def build(pypto, *, hidden: int, dtype: str):
    dt = getattr(pypto, dtype)
    inv_hidden = 1.0 / hidden

    @pypto.frontend.jit()
    def add_rms_norm_scale_kernel(
        x1: pypto.Tensor([pypto.DYNAMIC, hidden], dt),
        x2: pypto.Tensor([pypto.DYNAMIC, hidden], dt),
        gamma: pypto.Tensor([1, hidden], dt),
        smooth_scale: pypto.Tensor([1, hidden], dt),
        y_out: pypto.Tensor([pypto.DYNAMIC, hidden], dt),
        x_add_out: pypto.Tensor([pypto.DYNAMIC, hidden], dt),
        eps: float,
    ):
        pypto.set_vec_tile_shapes(ROWS_PER_TILE, hidden)
        n_rows = x1.shape[0]
        for block in pypto.loop(0, (n_rows + ROWS_PER_TILE - 1) // ROWS_PER_TILE, 1, name="LOOP_ROWS", idx_name="block"):
            row = block * ROWS_PER_TILE
            valid_rows = (n_rows - row).min(ROWS_PER_TILE)
            x1_fp32 = pypto.cast(pypto.view(x1, [ROWS_PER_TILE, hidden], [row, 0], valid_shape=[valid_rows, hidden]),
                                 pypto.DT_FP32)
            x2_fp32 = pypto.cast(pypto.view(x2, [ROWS_PER_TILE, hidden], [row, 0], valid_shape=[valid_rows, hidden]),
                                 pypto.DT_FP32)
            x_sum = pypto.add(x1_fp32, x2_fp32)  # golden: add
            mean_square = pypto.mul(pypto.sum(pypto.mul(x_sum, x_sum), -1, keepdim=True), inv_hidden)  # golden: square_mean
            rstd = pypto.rsqrt(pypto.add(mean_square, eps))  # golden: rsqrt
            normed = pypto.mul(pypto.mul(x_sum, rstd), pypto.cast(gamma, pypto.DT_FP32))  # golden: normalize
            y = pypto.mul(normed, pypto.cast(smooth_scale, pypto.DT_FP32))  # golden: smooth_scale
            pypto.assemble(pypto.cast(y, dt), [row, 0], y_out)
            pypto.assemble(pypto.cast(x_sum, dt), [row, 0], x_add_out)

    return add_rms_norm_scale_kernel
