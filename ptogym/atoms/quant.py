"""AT-05 symmetric per-token int8 quantisation and AT-06 dequantisation, on tiles.

Quantisation of a row x (fp32):

    amax  = max(|x|, AMAX_FLOOR)               per row, fp32
    q     = x * (127 / amax)                   fp32, |q| <= 127
    x_int8 = trunc_sat_int8(round_fp16(rint_int32(q)))
    scale = amax / 127                          the dequant scale, [rows, 1] fp32

The three casts are upstream's rounding chain: RINT (nearest, ties to even) into
int32, ROUND into fp16 (exact: |q| <= 127), TRUNC with saturation into int8 (exact
again; the saturation guards the int8 range).  So x_int8 = rint(q), ties to even.

An all-zero row has amax = 0 and 127 / 0 = inf, and 0 * inf = NaN: upstream's card
divides by zero there.  The floor ``AMAX_FLOOR`` (1e-30, far below any activation
that carries information; 127 / 1e-30 is finite in fp32) makes such a row quantise to
zeros with scale 1e-30 / 127 (finite, and dequantising gives exact zeros).  Rows whose
amax is below the floor quantise to zeros too.  A row holding NaN gets a NaN
amax (on the device: as the unit's max treats NaN), so NaN products that cast to 0; a
row holding inf has 127 / inf = 0, so every element quantises to 0 (inf * 0 = NaN ->
0) with scale inf.  Neither is a supported input; the operators document it.
"""
QMAX = 127.0
AMAX_FLOOR = 1e-30


def per_token_quant(pypto, x):
    """Quantise the rows of fp32 tile ``x`` [rows, D]; returns (x_int8, scale [rows, 1] fp32)."""
    amax = pypto.maximum(pypto.amax(pypto.abs(x), -1, keepdim=True), AMAX_FLOOR)
    to_int = pypto.div(pypto.full(amax.shape, QMAX, pypto.DT_FP32), amax)
    scaled = pypto.mul(x, to_int)
    as_int32 = pypto.cast(scaled, pypto.DT_INT32, pypto.CastMode.CAST_RINT)
    as_fp16 = pypto.cast(as_int32, pypto.DT_FP16, pypto.CastMode.CAST_ROUND)
    x_int8 = pypto.cast(as_fp16, pypto.DT_INT8, pypto.CastMode.CAST_TRUNC, pypto.SaturationMode.ON)
    return x_int8, pypto.mul(amax, 1.0 / QMAX)


def dequant(pypto, acc, scale_a, scale_b, out_dtype):
    """``acc`` [rows, N] int32 (an int8 matmul's accumulator) times scale_a [rows, 1]
    and scale_b ([1, N] per channel or [rows, 1] per token), fp32, cast to ``out_dtype``."""
    value = pypto.mul(pypto.mul(pypto.cast(acc, pypto.DT_FP32), scale_a), scale_b)
    return pypto.cast(value, out_dtype)
