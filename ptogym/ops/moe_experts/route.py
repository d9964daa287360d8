"""Route stage of the routed-expert FFN (SK-07 V1) as a PyPTO kernel: the T * k
assignments grouped per expert, each expert's run padded to ``ROW_GROUP`` rows (see
``kernel.py``'s docstring).  No torch here."""
from .kernel import ROW_GROUP


def padded_rows(assignments: int, experts: int) -> int:
    """Length of the padded per-expert lists: every expert's run of rows rounded up to
    ``ROW_GROUP`` adds fewer than ROW_GROUP rows, the sentinel run ends the list."""
    return assignments + ROW_GROUP * experts


def build_route(pypto, *, assignments: int, experts: int, top_k: int):
    """Kernel(ids, weights, tokens_out, order_out, weights_out, offsets_out): ids [1, N]
    int32 (padded with ``experts``), weights [1, N] fp32; written: the assignments
    grouped by expert, each expert's run padded to a multiple of ROW_GROUP rows, as
    tokens_out, order_out [M] int32 and weights_out [M, 1] fp32 (M = padded_rows; a
    padding row reads token 0 with weight 0 and writes its own spare buffer row N + i),
    and offsets_out [E + 1, 1] int32, the start of each expert's run (E: the end)."""
    n, m = assignments, padded_rows(assignments, experts)
    fp32, int32 = pypto.DT_FP32, pypto.DT_INT32

    @pypto.frontend.jit()
    def moe_route_kernel(
        ids: pypto.Tensor([1, n], int32),
        weights: pypto.Tensor([1, n], fp32),
        tokens_out: pypto.Tensor([m], int32),
        order_out: pypto.Tensor([m], int32),
        weights_out: pypto.Tensor([m, 1], fp32),
        offsets_out: pypto.Tensor([experts + 1, 1], int32),
    ):
        pypto.set_vec_tile_shapes(1, m)
        expert = pypto.cast(ids, fp32)
        position = pypto.reshape(pypto.arange(0.0, float(n)), [1, n])
        order = pypto.argsort(pypto.add(pypto.mul(expert, float(n)), position), -1, False)  # expert by expert
        order_fp32 = pypto.cast(order, fp32)
        token = pypto.floor(pypto.div(pypto.add(order_fp32, 0.5), float(top_k)))
        sorted_expert = pypto.gather(expert, 1, order)
        # histogram as offsets: offsets[e] = assignments of the experts below e
        below = pypto.lt(pypto.expand_clone(expert, [experts + 1, n]),
                         pypto.reshape(pypto.arange(0.0, float(experts + 1)), [experts + 1, 1]))
        offsets = pypto.sum(pypto.cast(below, fp32), -1, keepdim=True)
        counts = pypto.sub(pypto.view(offsets, [experts, 1], [1, 0]), pypto.view(offsets, [experts, 1], [0, 0]))
        padded = pypto.mul(pypto.floor(pypto.div(pypto.add(counts, ROW_GROUP - 1.0), float(ROW_GROUP))),
                           float(ROW_GROUP))
        starts = pypto.concat([pypto.full([1, 1], 0.0, fp32), pypto.cumsum(padded, 0)], 0)
        # sorted position j of expert e moves by starts[e] - offsets[e]
        shift = pypto.reshape(pypto.sub(starts, offsets), [1, experts + 1])
        slot = pypto.cast(pypto.add(position, pypto.gather(shift, 1, pypto.cast(sorted_expert, int32))), int32)
        spare = pypto.add(pypto.reshape(pypto.arange(0.0, float(m)), [1, m]), float(n))
        padded_tokens = pypto.scatter(pypto.full([1, m], 0.0, fp32), 1, slot, token)
        padded_order = pypto.scatter(spare, 1, slot, order_fp32)
        padded_weights = pypto.scatter(pypto.full([1, m], 0.0, fp32), 1, slot, pypto.gather(weights, 1, order))
        pypto.assemble(pypto.reshape(pypto.cast(padded_tokens, int32), [m]), [0], tokens_out)
        pypto.assemble(pypto.reshape(pypto.cast(padded_order, int32), [m]), [0], order_out)
        pypto.assemble(pypto.reshape(padded_weights, [m, 1]), [0, 0], weights_out)
        pypto.assemble(pypto.cast(starts, int32), [0, 0], offsets_out)

    return moe_route_kernel
