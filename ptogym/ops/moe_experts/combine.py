"""Combine stage of the routed-expert FFN (SK-07 V4) as a PyPTO kernel: each token's
k weighted expert rows summed in fp32, k in order, rounded to the model dtype.  No
torch here."""
from ptogym.atoms.swiglu import swiglu_vec_tile

COMBINE_UNROLL = (64, 8, 1)


def build_combine(pypto, *, hidden: int, top_k: int, dtype: str, unroll=COMBINE_UNROLL):
    """Kernel(buffer, y): buffer [T, top_k * H] fp32 (the assignments' rows, token by
    token), y [T, H] of ``dtype`` = the sum of each token's top_k rows."""
    dt = getattr(pypto, dtype)
    sizes = sorted(set(unroll) | {1}, reverse=True)

    @pypto.frontend.jit()
    def moe_combine_kernel(
        buffer: pypto.Tensor([pypto.DYNAMIC, top_k * hidden], pypto.DT_FP32),
        y_out: pypto.Tensor([pypto.DYNAMIC, hidden], dt),
    ):
        pypto.set_vec_tile_shapes(*swiglu_vec_tile(sizes[0], hidden))
        for row, size in pypto.loop_unroll(0, buffer.shape[0], 1, name="LOOP_TOKENS", idx_name="row",
                                           unroll_list=sizes):
            total = pypto.view(buffer, [size, hidden], [row, 0])
            for k in range(1, top_k):
                total = pypto.add(total, pypto.view(buffer, [size, hidden], [row, k * hidden]))
            pypto.assemble(pypto.cast(total, dt), [row, 0], y_out)

    return moe_combine_kernel
