"""SwiGLU MLP (skeleton SK-06, C1 -> C2 -> V1 ... as C, V, C) as one PyPTO kernel:

    gate = x W_gate^T,  up = x W_up^T        cube, fp32 accumulation, rounded to x's dtype
    h    = silu(gate) * up                   vector (AT-07), each step rounded to x's dtype
    y    = h W_down^T                        cube, fp32 accumulation, rounded to x's dtype

Per block of token rows (``loop_unroll`` over the dynamic token axis in static block
sizes, 1 for the ragged tail).  The intermediate h of a block never leaves the kernel:
it crosses from the vector to the cube cores through the kernel's workspace, where the
chain of separate ``linear`` kernels writes gate, up and h to HBM and reads them back.
Cube tiles: ``block_tile_shapes`` of the ``linear`` operator (AT-09) for each of the
three projections; the epilogue's vector tiles from ``swiglu_vec_tile``.  No torch here.
"""
from ptogym.atoms.linear import kernel_tile_shapes, linear, projection_violations
from ptogym.atoms.swiglu import swiglu, swiglu_vec_tile
from ptogym.ops.linear.kernel import UNROLL, UNROLL_LARGE_WEIGHT  # token block sizes, as the linear operator's
from ptogym.tune.space import Param, Tuning, token_band

ELEMENT_BYTES = 2
UPSTREAM_CUBE = ((64, 64), (128, 128), (128, 128))
UPSTREAM_VEC_TILE = (64, 128)

#: Build kwargs of other configurations, simulated side by side by the benchmarks.
VARIANTS = {
    # upstream's FFN example (examples/02_intermediate/basic_nn/ffn): fixed cube tiles
    # (64, 128, 128) for every matmul, 32-token batches, (64, 128) vector tiles
    "upstream": {"unroll": (32, 1), "cube": UPSTREAM_CUBE, "vec_tile": UPSTREAM_VEC_TILE},
}


def _vec_tiles(shape) -> tuple:
    """None (``swiglu_vec_tile`` per block), upstream's, or one fixed tile for every
    block: ``swiglu_vec_tile``'s for blocks of 1-64 rows (within its UB budget)."""
    fixed = dict.fromkeys(swiglu_vec_tile(rows, shape["inter"]) for rows in (1, 4, 16, 64))
    return (None, UPSTREAM_VEC_TILE, *(tile for tile in fixed if tile != UPSTREAM_VEC_TILE))


def _tiles_fit(params, shape):
    """pypto's cube tile rules (``projection_violations``) for both projections' tiles
    at every block size."""
    sizes = sorted(set(params["unroll"]) | {1}, reverse=True)
    hidden, inter = shape["hidden"], shape["inter"]
    problems = (projection_violations(hidden, inter, ELEMENT_BYTES, sizes, cube=params["cube"])
                + projection_violations(inter, hidden, ELEMENT_BYTES, sizes, cube=params["cube"]))
    return problems[0] if problems else None


#: what ``ptogym tune`` may change (``ptogym.tune.space``); the values the operator runs
#: are in ``tuned.json`` beside this file, per token band
TUNING = Tuning(
    params={
        "unroll": Param((UNROLL, UNROLL_LARGE_WEIGHT, (256, 64, 16, 4, 1), (64, 16, 4, 1), (32, 8, 2, 1), (16, 4, 1), (32, 1), (8, 1),
                         (1,))),
        "cube": Param((None, UPSTREAM_CUBE)),
        "vec_tile": Param(_vec_tiles),
    },
    band=lambda tokens, hidden, inter: (token_band(tokens),),
    constraints=(_tiles_fit,),
    plain=VARIANTS["upstream"],
)


def build(pypto, *, hidden: int, inter: int, dtype: str, unroll=UNROLL, cube=None, vec_tile=None):
    """Kernel(x, w_gate, w_up, w_down, y): x [rows, hidden], w_gate and w_up [inter,
    hidden], w_down [hidden, inter], y [rows, hidden], all of ``dtype``.  ``cube``
    (three fixed pairs) replaces ``block_tile_shapes``; ``vec_tile`` replaces
    ``swiglu_vec_tile``."""
    dt = getattr(pypto, dtype)
    sizes = sorted(set(unroll) | {1}, reverse=True)

    def mlp_block(x, w_gate, w_up, w_down, y_out, row, size):
        tile = pypto.view(x, [size, hidden], [row, 0])
        pypto.set_cube_tile_shapes(*kernel_tile_shapes(size, hidden, inter, ELEMENT_BYTES, cube=cube))
        gate = linear(pypto, tile, w_gate, dt)
        up = linear(pypto, tile, w_up, dt)
        pypto.set_vec_tile_shapes(*(vec_tile or swiglu_vec_tile(size, inter)))
        h = swiglu(pypto, gate, up, dt)
        pypto.set_cube_tile_shapes(*kernel_tile_shapes(size, inter, hidden, ELEMENT_BYTES, cube=cube))
        pypto.assemble(linear(pypto, h, w_down, dt), [row, 0], y_out)

    @pypto.frontend.jit()
    def swiglu_mlp_kernel(
        x: pypto.Tensor([pypto.DYNAMIC, hidden], dt),
        w_gate: pypto.Tensor([inter, hidden], dt),
        w_up: pypto.Tensor([inter, hidden], dt),
        w_down: pypto.Tensor([hidden, inter], dt),
        y_out: pypto.Tensor([pypto.DYNAMIC, hidden], dt),
    ):
        pypto.experimental.set_operation_options(combine_axis=True)
        for row, size in pypto.loop_unroll(0, x.shape[0], 1, name="LOOP_TOKENS", idx_name="row", unroll_list=sizes):
            mlp_block(x, w_gate, w_up, w_down, y_out, row, size)

    return swiglu_mlp_kernel
