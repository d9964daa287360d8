"""RMSNorm + Linear (pattern AT-10, V -> C) and RMSNorm + Linear + Quant (AT-11,
V -> C -> V) as one PyPTO kernel.

Per block of token rows (``ptogym.atoms``):

    AT-10:  normed = rms_norm(x, eps, gamma) (fp32)  -> cast to x's dtype
            y = matmul(normed, weight^T) (fp32 acc)  [+ bias, fp32]  -> x's dtype
    AT-11:  normed = rms_norm(x, eps, gamma) (fp32)  -> per_token_quant (int8, scale)
            acc = matmul(x_int8, weight_int8^T) (int32)  -> dequant(acc, scale, w_scale)
            -> out_dtype

What fusing buys on DAV_2201: its vector and cube cores are separate
(``cube_vector_combine=split`` in A2A3.ini), so the normed block crosses from the
vector to the cube cores through GM/L2 inside the kernel too, and under pypto's cost
model that vector -> cube task dependency costs ~4-6 µs of AICPU polling, successor
resolving and dispatch (README: the cause of the levels where fusing loses).  The
gain is the kernel boundary: the cube tasks of one block start as soon as its rows
are normalised and overlap the other blocks' norms.  AT-11 quantises the fp32
normed rows directly (no bf16 rounding in between).

Schedule: ``loop_unroll`` over the token axis in static blocks of ``unroll`` rows
(1 takes the ragged tail; 128-row blocks only for weights of 8 MiB or more).  Per
block the vector stage runs as tasks of ``norm_task_rows_for`` rows (``sg_set_scope``
ids alternate so neighbours stay apart; vector tile (``vec_tile_rows(K)``, K))
whose results are concatenated for the cube; left to the compiler, a 128-row
block's norm became dozens of 4-row tasks serialised in front of the cube.  Then the
cube tiles of ``block_tile_shapes``, the ``linear`` operator's (long L1 k tiles: few,
large copies; n 256 above 128 tokens) and
the (``vec_tile_rows(N)``, N) tiles of the dequant epilogue (a bias is added by the
cube: ``linear_cube_bias``).  No torch here.
"""
from ptogym.atoms.jit_options import jit_pass_options
from ptogym.atoms.linear import (CUBE_TILE_PARAMS, UNROLL_ALTERNATIVES, UPSTREAM_CUBE, kernel_tile_shapes, linear,
                                 linear_cube_bias, linear_w8a8, tiles_fit)
from ptogym.atoms.quant import per_token_quant
from ptogym.atoms.rms_norm import rms_norm
from ptogym.atoms.signature import optional_input
from ptogym.ops.inplace_add_rms_norm.kernel import MAX_HIDDEN, vec_tile_rows
from ptogym.tune.space import Param, Tuning, token_band

# token block sizes: every block streams the whole weight, so fewer, larger blocks win at
# 1024 tokens (4096 -> 1024: 333 µs in 128-token blocks, 601 in 64, 2071 in 16, 110 in one
# 1024-token block, before projection_tile_shapes); 128 tokens run as two 64-token blocks
# (more cube tasks in one wave: 4096 -> 512 23.2 µs against 28.3 in one block) unless the
# weight is large (2048 -> 4096, 16 MiB streamed twice: 45.2 µs against 31.5 in one block);
# 32 and 2 cut ragged counts into fewer blocks (99 tokens, 512 -> 256: 64 + 32 + 2 + 1,
# 17.8 -> 16.9 µs; int8 17.7 -> 16.5)
UNROLL = (1024, 256, 64, 32, 16, 4, 2, 1)
UNROLL_LARGE_WEIGHT = (1024, 256, 128, 64, 32, 16, 4, 2, 1)
LARGE_WEIGHT_BYTES = 8 << 20
MAX_K = MAX_HIDDEN
NORM_TASK_ROWS = "auto"  # rows per vector task of the norm stage: norm_task_rows_for (measured, README)


def norm_task_rows_for(size: int, k: int) -> int:
    """Rows per vector task of the norm stage for a block of ``size`` tokens of ``k``
    features (cost model): blocks of 17-128 tokens in tasks of ~16K elements, at least
    4 rows (more tasks in parallel: 64-token blocks at 4096 -> 512 25.6 -> 23.2 µs in
    4-row tasks; at K = 512 more, smaller tasks only wait longer for dispatch and a
    wider join: 99 tokens 20.7 µs in 4-row tasks, 17.8 in 32-row ones); 1024-token
    blocks in tasks of ~64K elements within 24-32 rows, one wave of the 48 vector cores
    (README: 16-row tasks make two waves, and the task size also changes how the
    compiler merges the cube tasks: 24 rows measured best at K = 4096, 32 at 2048); 256-token
    blocks in 16-row tasks; blocks up to 16 tokens in tasks of up to 8 rows (16 tokens at
    4096 -> 1024: one 16-row task 19.9 µs, whole kernel 25.6; two 8-row tasks 19.7 and
    24.0; four 4-row tasks 19.7 and 27.2)."""
    if size <= 16:
        return min(size, 8)
    if size <= 128:
        return max(4, min(size, 16384 // k))
    return min(32, max(24, 65536 // k)) if size >= 1024 else 16

#: Build kwargs of other configurations, simulated side by side by the benchmarks.
VARIANTS = {
    # upstream SK-03: one token unroll value (128, tail in 1-row blocks), cube tiles
    # [32, 32] [512, 512] [64, 64] as in the MLA prolog's q_a projection
    "upstream": {"unroll": (128, 1), "cube": UPSTREAM_CUBE, "norm_task_rows": None},
}


def _band(tokens, k, n, element_bytes):
    """Token bands within the two weight classes the unroll lists were tuned for."""
    weight = "weight>=8MiB" if n * k * element_bytes >= LARGE_WEIGHT_BYTES else "weight<8MiB"
    return weight, f"{weight}/{'int8' if element_bytes == 1 else 'half'}/{token_band(tokens)}"


def block_sizes(k: int, n: int, element_bytes: int, unroll=None) -> list:
    """The kernel's token block sizes, largest first: ``unroll`` (None: picked from the
    weight's size) with 1 for the ragged tail."""
    if unroll is None:
        unroll = UNROLL_LARGE_WEIGHT if n * k * element_bytes >= LARGE_WEIGHT_BYTES else UNROLL
    return sorted(set(unroll) | {1}, reverse=True)


#: what ``ptogym tune`` may change (``ptogym.tune.space``); the values the operator runs
#: are in ``tuned.json`` beside this file, per weight class and token band
TUNING = Tuning(
    params={
        "unroll": Param((UNROLL, UNROLL_LARGE_WEIGHT, *UNROLL_ALTERNATIVES)),
        "norm_task_rows": Param(("auto", None, 1, 2, 4, 8, 16, 32)),
        **CUBE_TILE_PARAMS,
    },
    band=_band,
    constraints=(tiles_fit(block_sizes),),
    plain=VARIANTS["upstream"],
)


def build(pypto, *, k: int, n: int, dtype: str, quant: bool = False, out_dtype: str = None, has_bias: bool = False,
          unroll=None, cube=None, k_tile: int = 256, n_tile: int = None, norm_task_rows=NORM_TASK_ROWS,
          pass_options=()):
    """Kernel(x, gamma, weight, y, bias, eps), with ``quant`` kernel(x, gamma, weight,
    w_scale, y, eps): x [rows, k] and gamma [1, k] of ``dtype``; weight [n, k] of
    ``dtype`` (int8 with ``quant``); bias [1, n] of ``dtype`` when has_bias, else None;
    w_scale [1, n] fp32; y [rows, n] of ``out_dtype`` (default ``dtype``).  The vector stage of a token
    block runs as tasks of ``norm_task_rows`` rows ("auto": ``norm_task_rows_for``)
    joined for the cube; ``norm_task_rows=None`` leaves the split to the compiler
    (upstream's layout).  ``unroll=None`` picks the token blocks from the weight's size;
    ``cube`` (fixed tiles) or ``n_tile`` select AT-09's ``cube_tile_shapes`` instead of
    ``block_tile_shapes``.  ``pass_options``: the jit's, as hashable (name, ((key,
    value), ...)) pairs (the operator passes ``atoms.linear.int8_prefill_options``)."""
    dt = getattr(pypto, dtype)
    w_dt = pypto.DT_INT8 if quant else dt
    out_dt = getattr(pypto, out_dtype or dtype)
    element_bytes = 1 if quant else 2
    sizes = block_sizes(k, n, element_bytes, unroll)
    norm_rows, out_rows = vec_tile_rows(k, sizes[0]), vec_tile_rows(n, sizes[0])

    def vector_stage(x, gamma, eps, row, size):
        """Norm (and quant) of rows [row, row + size): (activations, x_scale or None)."""
        pypto.set_vec_tile_shapes(norm_rows, k)
        normed, _ = rms_norm(pypto, pypto.view(x, [size, k], [row, 0]), eps, gamma=gamma)
        return per_token_quant(pypto, normed) if quant else (pypto.cast(normed, dt), None)

    def staged_vector_stage(x, gamma, eps, row, size):
        """The vector stage in tasks of ``norm_task_rows`` rows (alternating scope ids
        keep neighbours apart), joined for the cube stage."""
        task_rows = norm_task_rows_for(size, k) if norm_task_rows == "auto" else norm_task_rows
        parts = []
        for offset in range(0, size, task_rows):
            pypto.set_pass_options(sg_set_scope=1 + (offset // task_rows) % 2)
            parts.append(vector_stage(x, gamma, eps, row + offset, min(task_rows, size - offset)))
        pypto.set_pass_options(sg_set_scope=-1)
        if len(parts) == 1:
            return parts[0]
        activations = pypto.concat([a for a, _ in parts], 0)
        return activations, pypto.concat([s for _, s in parts], 0) if quant else None

    def norm_project_block(x, gamma, weight, bias, w_scale, y_out, eps, row, size):
        if norm_task_rows:
            activations, x_scale = staged_vector_stage(x, gamma, eps, row, size)
        else:
            activations, x_scale = vector_stage(x, gamma, eps, row, size)
        pypto.set_cube_tile_shapes(*kernel_tile_shapes(size, k, n, element_bytes, cube=cube, k_tile=k_tile,
                                                       n_tile=n_tile))
        pypto.set_vec_tile_shapes(out_rows, n)
        if quant:
            y = linear_w8a8(pypto, activations, weight, x_scale, w_scale, out_dt)
        else:
            y = linear_cube_bias(pypto, activations, weight, bias, out_dt) if has_bias else linear(
                pypto, activations, weight, out_dt)
        pypto.assemble(y, [row, 0], y_out)

    # Two signatures, each with only the inputs it reads (a bias a tensor only when given:
    # ``optional_input``); the same blocks either way.
    options = jit_pass_options(pass_options)
    if quant:
        @pypto.frontend.jit(pass_options=options)
        def rms_norm_linear_kernel(
            x: pypto.Tensor([pypto.DYNAMIC, k], dt),
            gamma: pypto.Tensor([1, k], dt),
            weight: pypto.Tensor([n, k], w_dt),
            w_scale: pypto.Tensor([1, n], pypto.DT_FP32),
            y_out: pypto.Tensor([pypto.DYNAMIC, n], out_dt),
            eps: float,
        ):
            pypto.experimental.set_operation_options(combine_axis=True)
            for row, size in pypto.loop_unroll(0, x.shape[0], 1, name="LOOP_TOKENS", idx_name="row",
                                               unroll_list=sizes):
                norm_project_block(x, gamma, weight, None, w_scale, y_out, eps, row, size)
    else:
        @pypto.frontend.jit(pass_options=options)
        def rms_norm_linear_kernel(  # ptogym: noqa OL01 one kernel per build: the float signature
            x: pypto.Tensor([pypto.DYNAMIC, k], dt),
            gamma: pypto.Tensor([1, k], dt),
            weight: pypto.Tensor([n, k], w_dt),
            y_out: pypto.Tensor([pypto.DYNAMIC, n], out_dt),
            bias: optional_input(pypto, has_bias, [1, n], dt),
            eps: float,
        ):
            pypto.experimental.set_operation_options(combine_axis=True)
            for row, size in pypto.loop_unroll(0, x.shape[0], 1, name="LOOP_TOKENS", idx_name="row",
                                               unroll_list=sizes):
                norm_project_block(x, gamma, weight, bias, None, y_out, eps, row, size)

    return rms_norm_linear_kernel
