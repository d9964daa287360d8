"""AT-09 linear projection on tiles: y = x @ weight^T (+ bias), weight [N, K] as in torch.

The cube multiplies with ``b_trans=True``, so the weight keeps torch's [N, K] layout;
float operands accumulate in fp32 and round once to ``out_dtype``.  The int8 W8A8
form multiplies int8 x int8 into an exact int32 accumulator and dequantises it
(AT-06) with the per-token activation scale and the per-channel weight scale.
"""
import functools

from ptogym.tune.space import Param, hashable

from .quant import dequant


def linear(pypto, x, weight, out_dtype, *, bias=None):
    """x [rows, K] and weight [N, K] of one float dtype; bias [1, N] fp32 or None."""
    if bias is None:
        return pypto.matmul(x, weight, out_dtype, b_trans=True)
    y = pypto.matmul(x, weight, pypto.DT_FP32, b_trans=True)
    return pypto.cast(pypto.add(y, bias), out_dtype)


def linear_cube_bias(pypto, x, weight, bias, out_dtype):
    """x [rows, K] @ weight [N, K]^T + bias [1, N] (x's dtype) with the bias added to the
    fp32 accumulator by the cube itself (matmul's ``bias_tensor``): the same numbers as
    ``linear(..., bias=to_fp32(bias))`` without a vector epilogue task."""
    return pypto.matmul(x, weight, out_dtype, b_trans=True, extend_params={"bias_tensor": bias})


def linear_w8a8(pypto, x_int8, weight_int8, x_scale, w_scale, out_dtype):
    """x_int8 [rows, K], weight_int8 [N, K], x_scale [rows, 1] fp32, w_scale [1, N] fp32."""
    acc = pypto.matmul(x_int8, weight_int8, pypto.DT_INT32, b_trans=True)
    return dequant(pypto, acc, x_scale, w_scale, out_dtype)


L0A_BYTES = 64 * 1024  # DAV_2201 (910B) cube buffers
L0B_BYTES = 64 * 1024
L0C_BYTES = 128 * 1024
L1_BYTES = 512 * 1024


def cube_tile_shapes(rows: int, k: int, n: int, element_bytes: int, k_tile: int = 256, n_tile: int = 128,
                     fixed=None):
    """``set_cube_tile_shapes`` arguments ``([m, m], [k0, k1], [n0, n0])`` for a block of
    ``rows`` activations times a [n, k] weight: m is rows rounded up to 16 (the cube's
    fractal) and capped at 128; k0 = ``k_tile`` (halved until L0A/L0B hold it),
    k1 = 2 * k0 when L1 holds both operands double-buffered, else k0; n0 = ``n_tile``.
    Every tile is capped at the dimension itself.  ``fixed`` (three pairs) overrides
    the rule, e.g. upstream's ``((32, 32), (512, 512), (64, 64))``."""
    if fixed:
        return [list(pair) for pair in fixed]
    m = min(128, -(-rows // 16) * 16)
    n0 = min(n_tile, n)
    k0 = min(k_tile, k)
    while k0 > 16 and (m * k0 * element_bytes > L0A_BYTES or k0 * n0 * element_bytes > L0B_BYTES):
        k0 //= 2
    k1 = 2 * k0 if 2 * k0 <= k and (m + n0) * 2 * k0 * element_bytes <= L1_BYTES else k0
    return [m, m], [k0, k1], [n0, n0]


#: Pass options for int8 projections of ``INT8_PREFILL_TOKENS`` tokens or more, chosen per
#: call by an operator (pypto reads pass options once per jit, so one kernel cannot switch
#: them per token block).  ``cube_l1_reuse_setting {-1: 2}`` lets the compiler merge two
#: cube tasks that copy the same GM tile: a 1024-token block's m tiles share their int8
#: weight tile loads in pairs.  Cost model, fused kernels: RMSNorm+Linear+Quant level5
#: (1024 tokens, 4096 -> 1024) 77.2 -> 67.7 us, qwen3_t1024 108.0 -> 98.1, MLA prolog quant
#: T=1024 576.3 -> 519.0.  Not used where it did not pay: smaller calls (MLA quant T=128
#: 137.5 -> 148.4: one m tile, merged tasks only run fewer at a time), bf16 projections
#: (RMSNorm+Linear qwen3_t1024, 24-row norm tasks: 114.2 -> 117.4; MLA bf16 T=1024 653.2 -> 708.8) and the int8
#: ``linear`` operator alone (1024 x 2048 -> 4096: 68.7 -> 71.1).
INT8_PREFILL_TOKENS = 1024
INT8_PREFILL_PASS_OPTIONS = (("cube_l1_reuse_setting", ((-1, 2),)),)


def int8_prefill_options(tokens: int) -> dict:
    """Build kwargs for a fused kernel with int8 projections over ``tokens`` tokens."""
    return {"pass_options": INT8_PREFILL_PASS_OPTIONS} if tokens >= INT8_PREFILL_TOKENS else {}


CUBE_CORES = 24  # DAV_2201
BIG_X_TILE_BYTES = 1 << 20
MIN_TASK_WEIGHT_BYTES = 128 << 10


def _round_up(value: int, step: int) -> int:
    return -(-value // step) * step


def projection_tile_shapes(rows: int, k: int, n: int, element_bytes: int, cube_cores: int = CUBE_CORES):
    """``set_cube_tile_shapes`` arguments for one block of ``rows`` tokens times a
    [n, k] weight, tuned under pypto 0.2.0's cost model (numbers in the AT-10 card).

    The cost model charges every GM -> L1 copy ~1400 cycles plus ~95 bytes a cycle,
    and a cube task copies its activation tile and its weight tile once per L1 k step,
    one after the other: with ``cube_tile_shapes``' 512-long k steps a 1-token block
    spends 16 copies on K = 4096.  So for blocks of up to 128 tokens the L1 k tile is
    as long as L1 (512 KiB) holds both tiles, whole K when it fits (few, large
    copies), and the n tile spreads the weight over the cube cores: up to 16 tokens
    (m = 16) one wave of ceil(N / cores) columns (rounded up to 32 bytes); 17-128 tokens (m up to 128, an
    activation tile as large as the weight tile) N / 16 columns within [64, 256]; never
    less than 128 KiB of weight per task (a copy's fixed cost is ~130 KiB of transfer)
    unless the [m, n] fp32 accumulator would overflow L0C.
    Larger blocks (many m tiles, several waves) take n 256 when the activation tile
    holds 1 MiB or more, else 128."""
    m = min(128, _round_up(rows, 16))
    if rows > 128:
        n0 = 256 if m * k * element_bytes >= BIG_X_TILE_BYTES else 128
    elif rows <= 16:
        # pypto: nL0 * sizeof(dtype) must be 32-byte aligned (int8: multiples of 32)
        n0 = _round_up(-(-n // cube_cores), 32 // element_bytes)
    else:
        n0 = min(256, max(64, _round_up(-(-n // 16), 64)))
    # a task streaming less weight than ~one copy's fixed cost is not worth its dispatch, but the
    # [m, n0] fp32/int32 accumulator must fit L0C (pypto fails to compile past it: K = 128 made 512)
    n0 = min(max(n0, _round_up(-(-MIN_TASK_WEIGHT_BYTES // (k * element_bytes)), 16)), n, L0C_BYTES // (4 * m))
    return [m, m], _long_k_tiles(m, k, n0, element_bytes), [n0, n0]


def _long_k_tiles(m: int, k: int, n0: int, element_bytes: int) -> list:
    """[k0, k1]: the L0 k tile the L0 buffers hold (from 512 bytes of K), and the
    longest L1 k tile L1 holds for both operands: the whole K when it fits (one copy
    per operand), else k0 doubled while K and L1 allow - always a multiple of k0
    (halving K instead ends at 224 < 256 for K = 7168, which pypto refuses:
    L1 % L0 != 0)."""
    align = CUBE_ALIGN_BYTES // element_bytes  # pypto: kL0 * bytes 32-byte aligned
    k0 = min(256 * 2 // element_bytes, k)
    while k0 > align and (m * k0 * element_bytes > L0A_BYTES or k0 * n0 * element_bytes > L0B_BYTES):
        k0 = max(align, k0 // 2 // align * align)  # halved, kept aligned (K = 144: 72 -> 64)
    if k % k0 == 0 and (m + n0) * k * element_bytes <= L1_BYTES:
        return [k0, k]
    k1 = k0
    while 2 * k1 <= k and (m + n0) * 2 * k1 * element_bytes <= L1_BYTES:
        k1 *= 2
    return [k0, k1]


def wide_block_tile_shapes(rows: int, k: int, n: int, element_bytes: int, n_tile: int = 256):
    """``projection_tile_shapes`` for blocks of more than 128 tokens with the n tile
    ``n_tile`` whatever K: m 128, the L0 k tile the L0 buffers hold, the longest L1 k
    tile (the L0 one doubled, up to K) L1 holds for both operands.  Measured (cost model,
    1024 tokens, 2048 -> 4096 bf16): n 256 k 128/512 103.6 µs, where
    ``projection_tile_shapes`` (n 128 below a 1 MiB activation tile, k 256/1024) gives
    151.3 and ``cube_tile_shapes`` (n 128, k 256/512) 146.2."""
    m, n0 = 128, min(n_tile, n)
    return [m, m], _long_k_tiles(m, k, n0, element_bytes), [n0, n0]


def block_tile_shapes(rows: int, k: int, n: int, element_bytes: int):
    """The cube tiles ``ptogym.ops.linear`` measured best for a block of ``rows`` tokens:
    ``projection_tile_shapes`` up to 128 tokens, ``wide_block_tile_shapes`` above."""
    if rows > 128:
        return wide_block_tile_shapes(rows, k, n, element_bytes)
    return projection_tile_shapes(rows, k, n, element_bytes)


def kernel_tile_shapes(rows: int, k: int, n: int, element_bytes: int, *, cube=None, k_tile: int = 256,
                       n_tile: int = None):
    """The cube tiles a projection kernel (``linear``, ``rms_norm_linear``) sets for a
    block of ``rows`` tokens: ``cube`` (fixed tiles) or ``n_tile`` select
    ``cube_tile_shapes``, else ``block_tile_shapes``."""
    if cube or n_tile:
        return cube_tile_shapes(rows, k, n, element_bytes, k_tile, n_tile or 128, fixed=cube)
    return block_tile_shapes(rows, k, n, element_bytes)


#: upstream SK-03's fixed cube tiles, as in the MLA prolog's q_a projection
UPSTREAM_CUBE = ((32, 32), (512, 512), (64, 64))
#: the projection kernels' cube tile parameters for ``ptogym tune`` (``kernel_tile_shapes``' keywords):
#: upstream's fixed tiles, or ``cube_tile_shapes`` with an n tile (and its k tile), else ``block_tile_shapes``
CUBE_TILE_PARAMS = {
    "cube": Param((None, UPSTREAM_CUBE)),
    "n_tile": Param((None, 64, 128, 256), when={"cube": None}),
    "k_tile": Param((256, 128, 512), when=lambda params: params.get("n_tile") is not None
                    and params.get("cube") is None),
}
#: token block lists a projection kernel's sweep tries beside its hand-tuned ones
UNROLL_ALTERNATIVES = ((256, 64, 16, 4, 1), (128, 16, 1), (64, 16, 4, 1), (32, 8, 2, 1), (16, 4, 1), (16, 1),
                       (128, 1), (8, 1), (1,))


ND_INNER_AXIS_LIMIT = 65535  # pypto: an ND matmul operand's inner (last) axis must be below it
CUBE_ALIGN_BYTES = 32


def cube_tile_violations(tiles, element_bytes: int) -> list[str]:
    """What pypto 0.2.0 refuses in ``set_cube_tile_shapes`` tiles of a matmul with
    ``element_bytes`` operands on DAV_2201 (the rules the interpreter checks as C-TILE-05):
    0 < L0 <= L1 and L1 % L0 == 0 per axis, nL0 and kL0 * bytes 32-byte aligned, and the L0A, L0B,
    L0C (fp32 accumulator) and L1 footprints within their buffers."""
    (m0, m1), (k0, k1, *_), (n0, n1) = tiles
    problems = [f"{axis} tile [{l0}, {l1}] needs 0 < L0 <= L1 and L1 % L0 == 0"
                for axis, (l0, l1) in (("m", (m0, m1)), ("k", (k0, k1)), ("n", (n0, n1)))
                if not (0 < l0 <= l1 and l1 % l0 == 0)]
    if n0 * element_bytes % CUBE_ALIGN_BYTES:
        problems.append(f"nL0 {n0} x {element_bytes} B = {n0 * element_bytes} B is not {CUBE_ALIGN_BYTES}-byte "
                        f"aligned")
    if k0 * element_bytes % CUBE_ALIGN_BYTES:
        problems.append(f"kL0 {k0} x {element_bytes} B = {k0 * element_bytes} B is not {CUBE_ALIGN_BYTES}-byte "
                        f"aligned")
    needs = {"L0A": (m0 * k0 * element_bytes, L0A_BYTES), "L0B": (k0 * n0 * element_bytes, L0B_BYTES),
             "L0C": (m0 * n0 * 4, L0C_BYTES), "L1": ((m1 * k1 + k1 * n1) * element_bytes, L1_BYTES)}
    problems += [f"needs {need} B of {buffer} > {have} B" for buffer, (need, have) in needs.items() if need > have]
    return problems


def inner_axis_violations(k: int) -> list[str]:
    if k >= ND_INNER_AXIS_LIMIT:
        return [f"weight: K={k} must be < {ND_INNER_AXIS_LIMIT} (pypto: an ND matmul operand's inner axis)"]
    return []


def projection_violations(k: int, n: int, element_bytes: int, block_sizes, **tile_options) -> list[str]:
    """Why a projection kernel cannot multiply by a [n, k] weight, before it runs: K at
    or past the ND inner-axis limit, or a block size whose tiles (``kernel_tile_shapes``,
    the function the kernel itself calls) pypto refuses.  Every block size of the
    kernel's ``loop_unroll`` is checked, as pypto compiles them all.  (Operators ask on
    every call, and the answer depends on these numbers alone: it is remembered.)"""
    options = tuple(sorted((name, hashable(value)) for name, value in tile_options.items()))
    return list(_projection_violations(k, n, element_bytes, tuple(block_sizes), options))


@functools.lru_cache(maxsize=1024)
def _projection_violations(k: int, n: int, element_bytes: int, block_sizes: tuple, tile_options: tuple) -> tuple:
    if problems := inner_axis_violations(k):
        return tuple(problems)
    tile_options = dict(tile_options)
    for rows in block_sizes:
        tiles = kernel_tile_shapes(rows, k, n, element_bytes, **tile_options)
        if problems := cube_tile_violations(tiles, element_bytes):
            return (f"weight: [N={n}, K={k}] with {element_bytes}-byte elements cannot be tiled for the cube: for "
                    f"{rows}-token blocks the tiles m{tiles[0]} k{tiles[1]} n{tiles[2]}: {'; '.join(problems)} "
                    f"(pypto's cube tile rules)",)
    return ()


def tiles_fit(block_sizes):
    """A projection kernel's ``TUNING`` constraint: pypto's cube tile rules
    (``projection_violations``) for every block size ``block_sizes(k, n, element_bytes,
    unroll)`` gives (the kernel's own rule)."""
    def check(params, shape):
        k, n, element_bytes = shape["k"], shape["n"], shape["element_bytes"]
        problems = projection_violations(k, n, element_bytes, block_sizes(k, n, element_bytes, params["unroll"]),
                                         cube=params["cube"], k_tile=params["k_tile"], n_tile=params["n_tile"])
        return problems[0] if problems else None
    return check


def linear_mxfp8(pypto, x_fp8, weight_fp8, x_scale, w_scale, out_dtype):
    """MX fp8 projection through ``scaled_mm``: x_fp8 [rows, K] and weight_fp8 [N, K]
    of one fp8 type; x_scale [rows, K/64, 2] and w_scale [N, K/64, 2] e8m0 in pypto's
    MX layout (entry [r, j, h] scales the 32 elements K[(2j + h) * 32, +32) of row r),
    fp32 accumulation, one rounding to ``out_dtype``.  Real pypto 0.2.0 accepts fp8
    operands only for DAV_3510 (see ``ptogym/ops/linear/README.md``)."""
    return pypto.scaled_mm(x_fp8, weight_fp8, out_dtype, x_scale, w_scale, b_trans=True, scale_b_trans=True)


def blocks_up_to(rows: int, ladder) -> tuple:
    """The sizes of a ``loop_unroll`` ladder a loop over at most ``rows`` rows can use
    (1 always).  pypto compiles every size of a kernel's ladder, so an operator that
    builds one kernel per such tuple keeps a decode call from compiling its 1024-row body."""
    return tuple(size for size in ladder if size <= max(rows, 1)) or (1,)
