"""Kernel atoms: the local computations of the pattern library (``ptogym/patterns``),
as plain Python functions that operator kernels call on tiles.

Every atom takes the ``pypto`` namespace first (the real package or ``ptogym.interp``)
and emits pypto ops on the tiles it receives; it never sets tile shapes, loops or
options - the calling kernel owns the schedule.  Real pypto 0.2.0's jit parser leaves
a call to an undecorated function (``rms_norm(pypto, t, eps)`` or
``atoms.rms_norm.rms_norm(...)``) to its evaluator, which runs it as Python while
the kernel is traced: the ops it emits land in the caller's graph exactly as if they
were written inline (checked under pypto-sim: same tasks, same simulated time, same
numbers for both spellings).  So atoms need no ``pypto.frontend.function`` decorator,
may use ordinary Python control flow on static values, and must not open
``pypto.loop``s (a loop belongs to the kernel's own source).

Stable signatures (other operators and the model kernels build on them):

``rms_norm.rms_norm(pypto, x, eps, *, gamma=None, bias=None, rsqrt_mode="rsqrt") -> (y, rstd)``
    AT-03.  x [rows, D] any float dtype; gamma/bias [1, D] (cast to fp32 unless
    already fp32); rsqrt_mode "rsqrt" or "sqrt_div".  y [rows, D] fp32, rstd [rows, 1] fp32.
``rms_norm.to_fp32(pypto, tile)``
    the tile in fp32 (no op if it already is).
``quant.per_token_quant(pypto, x) -> (x_int8, scale)``
    AT-05.  x [rows, D] fp32; x_int8 [rows, D] int8 = rint(x * 127 / amax);
    scale [rows, 1] fp32 = amax / 127 (the dequant scale; amax floored at
    ``quant.AMAX_FLOOR`` so an all-zero row gives zeros and a finite scale).
``quant.dequant(pypto, acc, scale_a, scale_b, out_dtype)``
    AT-06.  acc [rows, N] int32 * scale_a [rows, 1] * scale_b ([1, N] or [rows, 1]), fp32, cast to out_dtype.
``linear.linear(pypto, x, weight, out_dtype, *, bias=None)``
    AT-09 float form.  x [rows, K], weight [N, K] (b_trans) of one dtype; bias [1, N] fp32.
``linear.linear_w8a8(pypto, x_int8, weight_int8, x_scale, w_scale, out_dtype)``
    AT-09 int8 W8A8 form: int32 matmul, then AT-06 with x_scale [rows, 1], w_scale [1, N].
``linear.cube_tile_shapes(rows, k, n, element_bytes, k_tile=256, n_tile=128, fixed=None)``
    the ``set_cube_tile_shapes`` arguments for a block of ``rows`` tokens (pure numbers).
``linear.projection_tile_shapes(rows, k, n, element_bytes)``, ``linear.wide_block_tile_shapes(...)``
    the cost-model-tuned cube tiles (long L1 k tiles) for blocks of up to 128 / more tokens.

Host side (no pypto ops): ``host`` - argument rules, case inputs, the row launch and
the measured schedule choices (``row_blocks``) of the atom
operators; ``measure`` - cube peak / DDR / copy-asymptote figures for the benchmarks.
"""
