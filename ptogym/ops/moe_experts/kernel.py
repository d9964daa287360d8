"""Routed-expert FFN (skeleton SK-07: V1 -> C1 -> V2 -> C2 -> V3 -> C3 -> V4) as three
PyPTO kernels, one per file, launched one after another by ``op.launch``:

1. ``route.build_route`` (V1): the T * k assignments grouped per expert - keys
   expert * N + assignment (unique, exact in fp32) ``argsort``ed, offsets from a
   histogram (``lt`` of the ids against an arange column, summed) - with each expert's
   run padded to ROW_GROUP rows (a padding row reads token 0 with weight 0 and writes
   a spare buffer row of its own); N is the assignment count padded to a power of two
   with the sentinel expert E (sorted last, never processed).
2. ``build_experts`` (this file; C1 V2 C2 V3 C3): for each expert e, the rows
   [starts[e], starts[e + 1]) of the padded list - read with GetTensorData, so an
   expert without tokens runs no iteration and reads none of its weights - in static
   blocks (the tuned table's ``unroll``, EXPERT_UNROLL; ``row_loops``): gather
   the tokens' rows of x (index_select), gate and up projections with the expert's
   weights (cube), SwiGLU (AT-07, vector), down projection (cube), times the routing
   weight in fp32 (vector), rows scattered to their assignment's row of an fp32 buffer
   (scatter_update: distinct rows, no race between experts).
3. ``combine.build_combine`` (V4): y[t] = sum over k of buffer[t * top_k + k] in fp32,
   k in order, rounded once to x's dtype.

Each stage reads what the previous one wrote to HBM, so each is its own launch:
pypto 0.2.0 reads a loop bound from a tensor (GetTensorData) of the kernel's inputs.
No torch here.
"""
from ptogym.atoms.linear import block_tile_shapes, blocks_up_to, linear, projection_violations
from ptogym.atoms.swiglu import swiglu, swiglu_vec_tile
from ptogym.tune.space import Param, Tuning, token_band

from .combine import COMBINE_UNROLL

ROW_GROUP = 16  # an expert's rows are padded to a multiple of the cube's m fractal: a 1-row block costs a 16-row one
EXPERT_UNROLL = (128, 64, 32, 16)  # rows per block of one expert's padded run
#: how an expert's run is cut into those blocks: "loops", one plain ``pypto.loop`` per block
#: size (loop_unroll's own split, written out), or "unroll", ``pypto.loop_unroll``.  Same
#: blocks, tasks and numbers; pypto 0.2.0's cost model runs loop_unroll's blocks of each
#: expert only after the previous expert's last task, the plain loops' overlap (measured,
#: level0's experts kernel: 193.0 us with "unroll", 66.1 us with "loops")
ROW_LOOPS = ("loops", "unroll")
ELEMENT_BYTES = 2
MAX_ASSIGNMENTS = 4096  # one route launch: a [1, N] fp32 key row and its sort; pypto 0.2.0 sorts N = 8192 with
# TWOTILEMRGSORT, which its simulator refuses (F92001 "No pipe type corresponding to opcode"; N = 4096 runs)
MAX_EXPERTS = 512  # the padded [1, N + 16 E] fp32 row within 64 KiB (three in UB); keys (E + 1) * N exact in fp32


def expert_blocks(assignments: int, unroll) -> tuple:
    """The block sizes of ``unroll`` an expert's padded run can use: a run of one
    launch's ``assignments`` is at most that many rows rounded up to ROW_GROUP."""
    return blocks_up_to(-(-assignments // ROW_GROUP) * ROW_GROUP, unroll)


def _tiles_fit(params, shape):
    """pypto's cube tile rules (``projection_violations``) for the three projections'
    tiles at every block size the experts kernel compiles."""
    sizes = sorted(set(expert_blocks(shape["tokens"] * shape["top_k"], params["unroll"])) | {1}, reverse=True)
    hidden, inter = shape["hidden"], shape["inter"]
    problems = (projection_violations(hidden, inter, ELEMENT_BYTES, sizes)
                + projection_violations(inter, hidden, ELEMENT_BYTES, sizes))
    return problems[0] if problems else None


#: what ``ptogym tune`` may change (``ptogym.tune.space``): the experts kernel's row
#: blocks (multiples of ROW_GROUP, as the runs are) and the combine kernel's token
#: blocks; the values the operator runs are in ``tuned.json`` beside this file, per
#: token band of a launch (a chunk of at most MAX_ASSIGNMENTS assignments)
TUNING = Tuning(
    params={
        "unroll": Param((EXPERT_UNROLL, (256, 128, 64, 32, 16), (64, 32, 16), (64, 16), (32, 16), (16,))),
        "combine_unroll": Param((COMBINE_UNROLL, (128, 16, 1), (32, 4, 1), (16, 1), (8, 1), (1,))),
        "row_loops": Param(ROW_LOOPS),
    },
    band=lambda tokens, top_k, hidden, inter: (token_band(tokens),),
    constraints=(_tiles_fit,),
    plain={"unroll": (ROW_GROUP,), "combine_unroll": (1,), "row_loops": "unroll"},  # no upstream operator: one block size each
)


def build_experts(pypto, *, hidden: int, inter: int, experts: int, dtype: str, unroll=EXPERT_UNROLL,
                  row_loops: str = ROW_LOOPS[0]):
    """Kernel(x, tokens, order, weights, offsets, w_gate, w_up, w_down, buffer):
    x [T, H]; tokens, order [M] int32 and weights [M, 1] fp32, the route's padded
    per-expert list; offsets [E + 1, 1] int32, the runs' starts; w_gate, w_up
    [E * I, H] and w_down [E * H, I] (the [E, I, H] / [E, H, I] weights with their
    first two axes merged); buffer [N + M, H] fp32: one row per assignment, then the
    padding rows' spare ones."""
    if row_loops not in ROW_LOOPS:
        raise ValueError(f"row_loops: {row_loops!r} is not one of {ROW_LOOPS}")
    dt = getattr(pypto, dtype)
    sizes = sorted(set(unroll) | {1}, reverse=True)

    def expert_rows(x, tokens, order, weights, offsets, w_gate, w_up, w_down, buffer, e):
        """Expert e's rows [offsets[e], offsets[e + 1]) in blocks, largest size first, each
        size taking the whole blocks the larger ones left (``pypto.loop_unroll``'s split)."""
        lo, hi = offsets[e, 0], offsets[e + 1, 0]
        if row_loops == "unroll":
            for start, size in pypto.loop_unroll(lo, hi, 1, name="LOOP_ROWS", idx_name="start", unroll_list=sizes):
                expert_block(x, tokens, order, weights, w_gate, w_up, w_down, buffer, e, start, size)
            return
        begin = lo
        for k in range(len(sizes)):
            size = sizes[k]
            end = hi - (hi - begin) % size
            for start in pypto.loop(begin, end, size, name=f"LOOP_ROWS_{size}", idx_name="start"):
                expert_block(x, tokens, order, weights, w_gate, w_up, w_down, buffer, e, start, size)
            begin = end

    def expert_block(x, tokens, order, weights, w_gate, w_up, w_down, buffer, e, start, size):
        # index_select is a vector op and the kernel's first: without a vec tile here pypto's
        # ExpandFunction pass fails ("Errcode: FFFFFF! Run pass failed"; C-TILE-06)
        pypto.set_vec_tile_shapes(*swiglu_vec_tile(size, hidden))
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
            expert_rows(x, tokens, order, weights, offsets, w_gate, w_up, w_down, buffer, e)

    return moe_experts_kernel
