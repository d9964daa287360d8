"""RoPE (AT-04) as a PyPTO kernel: rotary embedding of the last R elements of every head.

    x [T, heads, D], cos/sin [T, R] (R <= D, even), rotation [R, R]  ->  y [T, heads, D]
    y[..., :D-R] = x[..., :D-R]                                   (copied)
    y[..., D-R:] = x_r * cos + rot(x_r) * sin   in fp32, rounded once   (ptogym.atoms.rope.rope)

Tokens are one dynamic axis walked with ``loop_unroll`` over ``UNROLL`` token counts
(largest first, then the tail); every step views its tokens, computes and assembles
them.  The vector tile is [tokens, heads, R] sized so that the widest op (an fp32
binary op: two operands and a result) fits the 192 KB unified buffer.

``TUNING`` below is what ``ptogym tune`` may change; the values the operator runs are
in ``tuned.json`` beside this file.

No torch here: ``build`` receives the ``pypto`` namespace.
"""
from ptogym.atoms.linear import cube_tile_violations
from ptogym.atoms.rope import rope, rotation_cube_tiles
from ptogym.atoms.signature import optional_input
from ptogym.tune.space import Param, Tuning, token_band

UB_BYTES = 192 * 1024
FP32_BYTES = 4
WIDEST_OP_TILES = 3
UNROLL = (32, 8, 1)
ELEMENT_BYTES = 2  # bf16 / fp16 (the operator's dtypes)


def _band(tokens, heads, head_dim, rope_dim, dtype, layout):
    """Token bands per layout (the interleaved one adds a cube stage)."""
    return layout, f"{layout}/{token_band(tokens)}"


def _rotation_tiles_fit(params, shape):
    """pypto's cube tile rules for the rotation matmul of every block size (interleave)."""
    if shape["layout"] != "interleave":
        return None
    for count in sorted(set(params["unroll"]) | {1}):
        tiles = rotation_cube_tiles(count * shape["heads"], shape["rope_dim"])
        if problems := cube_tile_violations(tiles, ELEMENT_BYTES):
            return f"{count}-token blocks: rotation cube tiles {tiles}: {'; '.join(problems)}"
    return None


#: what ``ptogym tune`` may change (``ptogym.tune.space``); the values the operator runs
#: are in ``tuned.json`` beside this file, per layout and token band; plain: a token a step
TUNING = Tuning(
    params={"unroll": Param((UNROLL, (64, 16, 4, 1), (16, 4, 1), (8, 2, 1), (4, 1), (2, 1), (1,)))},
    band=_band,
    constraints=(_rotation_tiles_fit,),
    plain={"unroll": (1,)},
)


def tile_for(tokens: int, heads: int, width: int):
    """[tokens, heads] of a vector tile over [tokens, heads, width] fp32 data."""
    budget = UB_BYTES // (WIDEST_OP_TILES * FP32_BYTES * width)
    if budget >= heads:
        return [max(1, min(tokens, budget // heads)), heads]
    return [1, max(1, budget)]


def build(pypto, *, heads: int, head_dim: int, rope_dim: int, dtype: str, layout: str, unroll=UNROLL):
    """The jit kernel: kernel(x, cos, sin, y, rotation); ``rotation`` is a tensor only in
    the interleaved layout, which reads it (see ptogym.atoms.rope), else None."""
    dt = getattr(pypto, dtype)
    nope = head_dim - rope_dim
    has_nope = nope > 0  # pypto's parser takes a bool or symbolic condition, not an int
    interleave = layout == "interleave"
    unroll_list = sorted(set(unroll) | {1}, reverse=True)

    @pypto.frontend.jit()
    def rope_kernel(
        x: pypto.Tensor([pypto.DYNAMIC, heads, head_dim], dt),
        cos: pypto.Tensor([pypto.DYNAMIC, rope_dim], dt),
        sin: pypto.Tensor([pypto.DYNAMIC, rope_dim], dt),
        y: pypto.Tensor([pypto.DYNAMIC, heads, head_dim], dt),
        rotation: optional_input(pypto, interleave, [rope_dim, rope_dim], dt),
    ):
        for token, count in pypto.loop_unroll(0, x.shape[0], 1, name="LOOP_TOKENS", idx_name="token",
                                              unroll_list=unroll_list):
            if has_nope:
                nope_tile = tile_for(count, heads, nope)
                pypto.set_vec_tile_shapes(nope_tile[0], nope_tile[1], nope)
                kept = pypto.view(x, [count, heads, nope], [token, 0, 0])
                pypto.assemble(pypto.clone(kept), [token, 0, 0], y)
            tile = tile_for(count, heads, rope_dim)
            pypto.set_vec_tile_shapes(tile[0], rope_dim)
            cos_rows = pypto.cast(pypto.view(cos, [count, rope_dim], [token, 0]), pypto.DT_FP32)
            sin_rows = pypto.cast(pypto.view(sin, [count, rope_dim], [token, 0]), pypto.DT_FP32)
            pypto.set_vec_tile_shapes(tile[0], tile[1], rope_dim)
            if interleave:
                m, k, n = rotation_cube_tiles(count * heads, rope_dim)
                pypto.set_cube_tile_shapes(m, k, n)
            part = pypto.view(x, [count, heads, rope_dim], [token, 0, nope])
            rotated = rope(pypto, part, pypto.reshape(cos_rows, [count, 1, rope_dim]),
                           pypto.reshape(sin_rows, [count, 1, rope_dim]), layout, rotation)
            pypto.assemble(pypto.cast(rotated, dt), [token, 0, nope], y)

    return rope_kernel
