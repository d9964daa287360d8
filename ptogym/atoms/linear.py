"""AT-09 linear projection on tiles: y = x @ weight^T (+ bias), weight [N, K] as in torch.

The cube multiplies with ``b_trans=True``, so the weight keeps torch's [N, K] layout;
float operands accumulate in fp32 and round once to ``out_dtype``.  The int8 W8A8
form multiplies int8 x int8 into an exact int32 accumulator and dequantises it
(AT-06) with the per-token activation scale and the per-channel weight scale.
"""
from .quant import dequant


def linear(pypto, x, weight, out_dtype, *, bias=None):
    """x [rows, K] and weight [N, K] of one float dtype; bias [1, N] fp32 or None."""
    if bias is None:
        return pypto.matmul(x, weight, out_dtype, b_trans=True)
    y = pypto.matmul(x, weight, pypto.DT_FP32, b_trans=True)
    return pypto.cast(pypto.add(y, bias), out_dtype)


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


CUBE_CORES = 24  # DAV_2201


def n_tile_for(rows: int, n: int, block: int, cube_cores: int = CUBE_CORES) -> int:
    """The n tile for a projection of ``rows`` tokens in blocks of ``block``: 128 when
    that already makes a wave of cube tasks (m tiles x N/128 >= cube cores; m tiles are
    <= 128 rows), else 64 to double the tasks.  Measured (cost model, 4096 -> 1024):
    16 tokens 22.2 µs at 128, 18.8 at 64 (36.0 at 32: two waves); 1024 tokens 88.4 µs
    at 128, 150.7 at 64."""
    m_tiles = -(-rows // min(block, 128))
    return 128 if m_tiles * -(-n // 128) >= cube_cores else 64


def linear_mxfp8(pypto, x_fp8, weight_fp8, x_scale, w_scale, out_dtype):
    """MX fp8 projection through ``scaled_mm``: x_fp8 [rows, K] and weight_fp8 [N, K]
    of one fp8 type; x_scale [rows, K/64, 2] and w_scale [N, K/64, 2] e8m0 in pypto's
    MX layout (entry [r, j, h] scales the 32 elements K[(2j + h) * 32, +32) of row r),
    fp32 accumulation, one rounding to ``out_dtype``.  Real pypto 0.2.0 accepts fp8
    operands only for DAV_3510 (see ``ptogym/ops/linear/README.md``)."""
    return pypto.scaled_mm(x_fp8, weight_fp8, out_dtype, x_scale, w_scale, b_trans=True, scale_b_trans=True)
