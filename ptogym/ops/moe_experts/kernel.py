"""Routed-expert FFN (skeleton SK-07: V1 -> C1 -> V2 -> C2 -> V3 -> C3 -> V4) as three
PyPTO kernels, launched one after another by ``op.launch``:

1. ``build_route`` (V1): the flat list of (token, k) assignments grouped per expert.
   key = expert * N + assignment (unique, exact in fp32), ``argsort`` ascending gives
   the assignments in expert order; their tokens (assignment // top_k) and weights are
   gathered in that order, and the per-expert offsets come from a histogram written as
   counts of ids below each e (``lt`` against an arange column, summed: offsets[e] =
   #assignments of experts < e).  N is the assignment count padded to a power of two
   with the sentinel expert E (sorted last, never processed).
2. ``build_experts`` (C1 V2 C2 V3 C3): for each expert e, the rows
   [offsets[e], offsets[e + 1]) of the sorted list - read with GetTensorData, so an
   expert without tokens runs no iteration and reads none of its weights - in static
   blocks (``loop_unroll``): gather the tokens' rows of x (index_select), gate and up
   projections with the expert's weights (cube), SwiGLU (AT-07, vector), down
   projection (cube), times the routing weight in fp32 (vector), rows scattered to
   their assignment's row of an fp32 buffer [T * top_k, H] (scatter_update: distinct
   rows, no race between experts).
3. ``build_combine`` (V4): y[t] = sum over k of buffer[t * top_k + k] in fp32, k in
   order, rounded once to x's dtype.

Each stage reads what the previous one wrote to HBM, so each is its own launch:
pypto 0.2.0 reads a loop bound from a tensor (GetTensorData) of the kernel's inputs.
No torch here.
"""
from ptogym.atoms.linear import block_tile_shapes, linear
from ptogym.atoms.swiglu import swiglu, swiglu_vec_tile

ROW_GROUP = 16  # an expert's rows are padded to a multiple of the cube's m fractal: a 1-row block costs a 16-row one
EXPERT_UNROLL = (128, 64, 32, 16)  # rows per block of one expert's padded run
COMBINE_UNROLL = (64, 8, 1)
ELEMENT_BYTES = 2
MAX_ASSIGNMENTS = 8192  # one route launch: a [1, N] fp32 key row and its sort within the vector unit
MAX_EXPERTS = 512  # the padded [1, N + 16 E] fp32 row within 64 KiB (three in UB); keys (E + 1) * N exact in fp32

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


def build_experts(pypto, *, hidden: int, inter: int, experts: int, dtype: str, unroll=EXPERT_UNROLL):
    """Kernel(x, tokens, order, weights, offsets, w_gate, w_up, w_down, buffer):
    x [T, H]; tokens, order [N] int32 and weights [N, 1] fp32 in expert order;
    offsets [E + 1, 1] int32; w_gate, w_up [E * I, H] and w_down [E * H, I] (the
    [E, I, H] / [E, H, I] weights with their first two axes merged); buffer [T * k, H]
    fp32, one row per assignment."""
    dt = getattr(pypto, dtype)
    sizes = sorted(set(unroll) | {1}, reverse=True)

    def expert_block(x, tokens, order, weights, w_gate, w_up, w_down, buffer, e, start, size):
        rows = pypto.index_select(x, 0, pypto.view(tokens, [size], [start]))
        pypto.set_cube_tile_shapes(*block_tile_shapes(size, hidden, inter, ELEMENT_BYTES))
        gate = linear(pypto, rows, pypto.view(w_gate, [inter, hidden], [e * inter, 0]), dt)
        up = linear(pypto, rows, pypto.view(w_up, [inter, hidden], [e * inter, 0]), dt)
        pypto.set_vec_tile_shapes(*swiglu_vec_tile(size, inter))
        h = swiglu(pypto, gate, up, dt)
        pypto.set_cube_tile_shapes(*block_tile_shapes(size, inter, hidden, ELEMENT_BYTES))
        down = linear(pypto, h, pypto.view(w_down, [hidden, inter], [e * hidden, 0]), dt)
        pypto.set_vec_tile_shapes(*swiglu_vec_tile(size, hidden))
        weighted = pypto.mul(pypto.cast(down, pypto.DT_FP32), pypto.view(weights, [size, 1], [start, 0]))
        where = pypto.reshape(pypto.view(order, [size], [start]), [size, 1])
        buffer.move(pypto.scatter_update(buffer, -2, where, weighted))

    @pypto.frontend.jit()
    def moe_experts_kernel(
        x: pypto.Tensor([pypto.DYNAMIC, hidden], dt),
        tokens: pypto.Tensor([pypto.DYNAMIC], pypto.DT_INT32),
        order: pypto.Tensor([pypto.DYNAMIC], pypto.DT_INT32),
        weights: pypto.Tensor([pypto.DYNAMIC, 1], pypto.DT_FP32),
        offsets: pypto.Tensor([experts + 1, 1], pypto.DT_INT32),
        w_gate: pypto.Tensor([experts * inter, hidden], dt),
        w_up: pypto.Tensor([experts * inter, hidden], dt),
        w_down: pypto.Tensor([experts * hidden, inter], dt),
        buffer: pypto.Tensor([pypto.DYNAMIC, hidden], pypto.DT_FP32),
    ):
        pypto.experimental.set_operation_options(combine_axis=True)
        for e in pypto.loop(0, experts, 1, name="LOOP_EXPERTS", idx_name="e"):
            for start, size in pypto.loop_unroll(offsets[e, 0], offsets[e + 1, 0], 1, name="LOOP_ROWS",
                                                 idx_name="start", unroll_list=sizes):
                expert_block(x, tokens, order, weights, w_gate, w_up, w_down, buffer, e, start, size)

    return moe_experts_kernel


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
