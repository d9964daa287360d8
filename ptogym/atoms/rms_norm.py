"""AT-03 RMSNorm on one tile of rows, in fp32.

    rstd = 1 / sqrt(mean(x^2) + eps)        ("rsqrt": one rsqrt; "sqrt_div": 1 / sqrt)
    y    = x * rstd [* gamma] [+ bias]

Everything after the cast to fp32 stays in fp32 (a sum of D squares in bf16 would
lose the low bits of every addend); the caller casts y to its output dtype.
"""
RSQRT_MODES = ("rsqrt", "sqrt_div")


def to_fp32(pypto, tile):
    """``tile`` in fp32 (no op when it already is)."""
    return tile if tile.dtype == pypto.DT_FP32 else pypto.cast(tile, pypto.DT_FP32)


def rms_norm(pypto, x, eps, *, gamma=None, bias=None, rsqrt_mode="rsqrt"):
    """Normalise the rows of tile ``x`` [rows, D] (any float dtype).

    gamma, bias: [1, D] tiles (any float dtype, cast to fp32 here unless already fp32;
    cast them once outside a row loop to save a cast per block).  Returns
    ``(y, rstd)``: y [rows, D] fp32 and rstd [rows, 1] fp32.
    """
    if rsqrt_mode not in RSQRT_MODES:
        raise ValueError(f"rsqrt_mode: {rsqrt_mode!r} is not one of {RSQRT_MODES}")
    x_fp32 = to_fp32(pypto, x)
    mean_square = pypto.mul(pypto.sum(pypto.mul(x_fp32, x_fp32), -1, keepdim=True), 1.0 / x.shape[-1])
    variance = pypto.add(mean_square, eps)
    if rsqrt_mode == "rsqrt":
        rstd = pypto.rsqrt(variance)
    else:
        rstd = pypto.div(pypto.full(variance.shape, 1.0, pypto.DT_FP32), pypto.sqrt(variance))
    y = pypto.mul(x_fp32, rstd)
    if gamma is not None:
        y = pypto.mul(y, to_fp32(pypto, gamma))
    if bias is not None:
        y = pypto.add(y, to_fp32(pypto, bias))
    return y, rstd
