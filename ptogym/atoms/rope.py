"""AT-04 rotary position embedding on tiles, in fp32.

For a rope part x of width R (the last R elements of a head) at one token, with that
token's cos and sin rows (width R):

    y = x * cos + rot(x) * sin

``rot`` is the layout's rotation:

* ``"half"`` (Hugging Face ``rotate_half``): rot(x) = [-x[R/2:], x[:R/2]];
* ``"interleave"`` (DeepSeek): the pairs (x[2i], x[2i+1]) rotate, rot(x)[2i] =
  -x[2i+1] and rot(x)[2i+1] = x[2i].  Upstream reaches it by de-interleaving the
  pairs, applying rotate_half and re-interleaving; the same permutation is one
  multiplication by a constant signed permutation matrix ``rotation`` [R, R]
  (``rotation[2i+1, 2i] = -1``, ``rotation[2i, 2i+1] = 1``).

Why a matrix for the interleaved layout: on the vector cores the pairs need two
transposes (de-interleave [.., R/2, 2] -> [.., 2, R/2], swap, re-interleave), and
pypto 0.2.0's cost model charges them heavily: in the MLA prolog (int8, V4 shapes,
T=128) vector-only RoPE took 183-188 us against 131 with the matrix (vector busy time
3178 against 1140 core-us), despite saving the two cube hops.  On the cube, x
(bf16/fp16) times a matrix holding one +-1 per column accumulates exactly one
product per output element in fp32: rot(x) is exact, and the vector side keeps
aligned [tokens, heads, R] tiles only.

Like every atom, these emit ops only: the caller sets the vector tile (rank 3, for
[tokens, heads, R]) and, for "interleave", the cube tiles (``rotation_cube_tiles``).
"""
LAYOUTS = ("interleave", "half")


def rotation_cube_tiles(rows: int, rope_dim: int):
    """Cube tile shapes (m, k, n) for x [rows, R] @ rotation [R, R]: m up to 128 rows."""
    m = min(128, -(-rows // 16) * 16)
    return [m, m], [rope_dim, rope_dim], [rope_dim, rope_dim]


def rotate(pypto, x, x_fp32, layout: str, rotation=None):
    """rot(x) in fp32 for the rope part ``x`` [tokens, heads, R] (input dtype) whose fp32
    copy is ``x_fp32``; ``rotation`` [R, R] (input dtype) is needed for "interleave"."""
    tokens, heads, rope_dim = x.shape
    if layout == "half":
        half = rope_dim // 2
        first = pypto.view(x_fp32, [tokens, heads, half], [0, 0, 0])
        second = pypto.view(x_fp32, [tokens, heads, half], [0, 0, half])
        return pypto.concat([pypto.mul(second, -1.0), pypto.add(first, 0.0)], -1)
    if layout != "interleave":
        raise ValueError(f"layout: {layout!r} is not one of {LAYOUTS}")
    flat = pypto.reshape(x, [tokens * heads, rope_dim])
    return pypto.reshape(pypto.matmul(flat, rotation, pypto.DT_FP32), [tokens, heads, rope_dim])


def rope(pypto, x, cos, sin, layout: str, rotation=None):
    """y = x * cos + rot(x) * sin in fp32 for ``x`` [tokens, heads, R] (input dtype) and
    ``cos``, ``sin`` [tokens, 1, R] fp32 (broadcast over heads); returns y fp32."""
    x_fp32 = pypto.cast(x, pypto.DT_FP32)
    rotated = rotate(pypto, x, x_fp32, layout, rotation)
    return pypto.add(pypto.mul(x_fp32, cos), pypto.mul(rotated, sin))
