"""Flash attention, prefill (SK-01: C1 scores, V1 online softmax, C2 P·V) as a PyPTO kernel.

    q [B * Sq, Hq * D], k, v [B * Skv, Hkv * D] (the caller's [B, S, H, D], viewed flat)
    out [B * Sq, Hq * D] in q's dtype; lse [B * Hq * Sq, 1] fp32

Per batch b, kv head, query head of its group and block of ``q_block`` query rows:
the rows' q tile is a strided view of q (row b * Sq + q0, column h * D), each key
block a view of k and v (``kv_block`` rows), and the state (``ptogym.atoms.attention``)
folds one key block after another.  Sq is static, so the last, shorter q block is a
second static instance of the block code; a key block shorter than ``kv_block`` (the
sequence's tail, or the causal prefix) is a view with a smaller ``valid_shape`` (AT-20).

Causal (aligned bottom-right as flash-attn: query row i sees keys j <= i + Skv - Sq):
for the q block [q0, q0 + rows) every key before q0 + Skv - Sq is visible to every
row, so those are walked in whole key blocks without a mask; the block's diagonal
square [q0 + Skv - Sq, + rows) comes last with a fixed lower-triangular bias
(``mask``, [q_block, q_block], 0 / ``MASKED``: the operator builds it once).  Every
row of the diagonal sees its own diagonal key, so no row of a block is ever all
masked.  Rows i < Sq - Skv see no key at all (``first_row``): the kernel writes their
out = 0 and lse = -inf without attending.  With Sq = 1 (decode-shaped calls) the
query heads of a kv head are stacked into one q tile instead (``grouped_token``).

No torch here: ``build`` receives the ``pypto`` namespace.
"""
from ptogym.atoms.attention import (accumulate, accumulated, finish, raw_scores, rescale, rescale_state, standard_softmax,
                                    start_state, values)
from ptogym.atoms.jit_options import jit_pass_options
from ptogym.atoms.linear import L0A_BYTES, L0B_BYTES, L0C_BYTES, L1_BYTES, cube_tile_violations
from ptogym.atoms.signature import optional_input
from ptogym.tune.space import Param, Tuning, token_band

Q_BLOCK = 128
KV_BLOCK = 128
VEC_ROWS = 32  # [32, 128] fp32 vector tiles: three operands of a binary op in 48 KB of the 192 KB UB

#: Build kwargs of other configurations, simulated side by side by the benchmarks
#: (hashable: ``fixed_tiles`` and ``pass_options`` as pairs).
VARIANTS = {
    # upstream pypto's Python flash-attention step (python/tests/st/operator/test_page_attention.py,
    # r0.2.0): 32 query rows against one 128-key block per step, cube tiles m 32, k 64, n 128
    # for both matmuls, vector tiles [32, 64]; applied to this kernel's loop structure.
    "upstream": {"q_block": 32, "kv_block": 128, "unrolled": False, "merge_vector_chain": False,
                 "fixed_tiles": (("c1", ((32, 32), (64, 64), (128, 128))), ("v1", (32, 64)),
                                 ("c2", ((32, 32), (64, 64), (128, 128)))), "cube_nbuffer": 1, "vec_nbuffer": 0},
    # the block loops with workspaces and an unmerged vector chain, whatever the sizes
    "loops": {"unrolled": False, "merge_vector_chain": False},
    # 512-key blocks (upstream's incremental flash attention steps 512 keys at a time)
    "kv512": {"kv_block": 512},
}


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def cube_rows(extent: int) -> int:
    """A cube tile edge for ``extent`` rows: rounded up to the 16-row fractal, at most 128."""
    return min(128, ceil_div(extent, 16) * 16)


UNROLL_STEPS = 64  # the most key-block steps per query head that ``schedule`` unrolls in Python


def head_steps(q_len: int, kv_len: int, causal: bool, q_block: int = Q_BLOCK, kv_block: int = KV_BLOCK) -> int:
    """Key-block steps one query head takes (every q block's key blocks, the causal diagonal included)."""
    row0 = first_row(q_len, kv_len, causal)
    steps = 0
    for q0 in range(row0, q_len, q_block):
        visible = q0 + kv_len - q_len if causal else kv_len
        steps += ceil_div(visible, kv_block) + causal
    return steps


def schedule(q_len: int, kv_len: int, causal: bool, params: dict) -> dict:
    """``params`` (the tuned table's build kwargs) with an "auto" ``unrolled`` and
    ``merge_vector_chain`` chosen from the sizes (pypto 0.2.0 cost model, README): heads of
    up to ``UNROLL_STEPS`` steps walk their blocks in Python with the state as values
    (level2, B1 S512 32/8 causal: 1963.9 -> 426.6 µs); longer ones keep the block loops,
    with each step's vector chain merged into one task (1963.9 -> 1818.5 µs)."""
    unrolled, merge = params["unrolled"], params["merge_vector_chain"]
    if unrolled == "auto":
        unrolled = head_steps(q_len, kv_len, causal, params["q_block"], params["kv_block"]) <= UNROLL_STEPS
    return {**params, "unrolled": unrolled, "merge_vector_chain": not unrolled if merge == "auto" else merge}


def _band(q_len, kv_len, causal):
    """The mask, then the query and key length bands."""
    mask = "causal" if causal else "full"
    return mask, f"{mask}/q:{token_band(q_len)}/kv:{token_band(kv_len)}"


def _unrolled_steps_fit(params, shape):
    """An unrolled head is compiled step by step: at most ``UNROLL_STEPS`` of them."""
    if params["unrolled"] is True:
        steps = head_steps(shape["q_len"], shape["kv_len"], shape["causal"], params["q_block"], params["kv_block"])
        if steps > UNROLL_STEPS:
            return f"unrolled: {steps} key-block steps a head > {UNROLL_STEPS} (UNROLL_STEPS)"
    return None


def fixed_tiles_fit(params, shape):
    """pypto's cube tile rules (``cube_tile_violations``) for fixed C1 / C2 tiles (a tuning
    constraint, paged attention's too)."""
    for stage, tiles in params.get("fixed_tiles") or ():
        if stage != "v1" and (problems := cube_tile_violations(tiles, 2)):
            return f"fixed_tiles: {stage} {tiles}: {'; '.join(problems)}"
    return None


#: what ``ptogym tune`` may change (``ptogym.tune.space``); the values the operator runs
#: are in ``tuned.json`` beside this file ("auto": ``schedule``'s choice), per mask and
#: query / key length band
TUNING = Tuning(
    params={
        "q_block": Param((Q_BLOCK, 64, 32, 256)),
        "kv_block": Param((KV_BLOCK, 256, 512, 64)),
        "vec_rows": Param((VEC_ROWS, 16, 64)),
        "unrolled": Param(("auto", True, False)),
        "merge_vector_chain": Param(("auto", True, False)),
        "fixed_tiles": Param((None, VARIANTS["upstream"]["fixed_tiles"])),
        "cube_nbuffer": Param((1, 2, 4, 8, 16, 32)),
        "vec_nbuffer": Param((0, 2, 4, 8, 16, 32)),
    },
    band=_band,
    constraints=(_unrolled_steps_fit, fixed_tiles_fit),
    plain=VARIANTS["upstream"],
)


def first_row(q_len: int, kv_len: int, causal: bool) -> int:
    """The first query row that sees a key (0 unless causal with Sq > Skv)."""
    return max(0, q_len - kv_len) if causal else 0


def step_tiles(rows: int, keys: int, head_dim: int, vec_rows: int) -> dict:
    """Tile shapes of one C1-V1-C2 step for a [rows, head_dim] q tile and a ``keys``-row key
    tile: the score matmul (C1), its vector chain (V1), the P·V matmul (C2).  Along
    head_dim (wide when several heads sit side by side: ``paged_attention``'s
    ``kv_head_span``) the L0 tile is the whole of it or the largest power of two the L0
    buffers hold, the L1 tile the most of it L1 holds (``_wide_tiles``); at D <= 256 both
    are the whole head_dim."""
    m, n = cube_rows(rows), cube_rows(keys)
    c1_k = _wide_tiles(head_dim, min(L0A_BYTES // (2 * m), L0B_BYTES // (2 * n)), L1_BYTES // (2 * (m + n)))
    c2_n = _wide_tiles(head_dim, min(L0B_BYTES // (2 * n), L0C_BYTES // (4 * m)), (L1_BYTES // 2 - m * n) // n)
    return {"c1": ([m, m], c1_k, [n, n]), "v1": (min(vec_rows, rows), n), "c2": ([m, m], [n, n], c2_n)}


def _wide_tiles(width: int, l0_most: int, l1_most: int) -> list:
    """[L0, L1] tiles along an operand axis of ``width`` (a power of two times 16): the
    whole width where L0 holds it, else the largest power of two within ``l0_most``; L1
    the largest multiple of L0 within ``l1_most`` that divides the width."""
    l0 = width if width <= l0_most else 1 << (l0_most.bit_length() - 1)
    l1 = l0
    while l1 * 2 <= min(width, l1_most) and width % (l1 * 2) == 0:
        l1 *= 2
    return [l0, l1]


def step_scores(pypto, q_tile, k_tiles, scale, keys, vec_rows: int, bias, fixed_tiles, merge_vector_chain):
    """C1 of a step over the key tiles ``k_tiles`` side by side (AT-12, plus the optional
    additive ``bias``); returns (s, tiles) with the vector tile set for V1 and, with
    ``merge_vector_chain``, the V1 scope opened (AT-21)."""
    tiles = dict(fixed_tiles or ()) or step_tiles(q_tile.shape[0], k_tiles[0].shape[0], q_tile.shape[1], vec_rows)
    pypto.set_cube_tile_shapes(*tiles["c1"])
    pypto.set_vec_tile_shapes(*tiles["v1"])
    s = raw_scores(pypto, q_tile, k_tiles, keys)
    if merge_vector_chain:
        pypto.set_pass_options(sg_set_scope=1)
    s = pypto.mul(s, scale)
    if bias is not None:
        s = pypto.add(s, bias)
    return s, tiles


def attend_step(pypto, q_tile, k_tiles, v_tiles, scale, keys, state, p_dtype, vec_rows: int, bias=None,
                fixed_tiles=None, merge_vector_chain=False, heads: int = 1):
    """One C1-V1-C2 step: scores of q_tile [rows, D] against the key tiles [tile_keys, D]
    (one, valid ``keys`` rows; or several whole ones, side by side), the optional
    additive ``bias`` [rows, tile_keys], then one online-softmax update and the P·V
    products into the workspaces ``state``.  Sets the tiles each stage needs
    (``step_tiles`` of one key tile, or ``fixed_tiles``: pairs with the same keys);
    ``merge_vector_chain`` makes the mask and state update one task (``sg_set_scope``,
    AT-21).  ``heads`` > 1: q_tile and the tiles hold that many heads laid out for one
    matmul each (``atoms.attention.values``), the state one row per query row."""
    s, tiles = step_scores(pypto, q_tile, k_tiles, scale, keys, vec_rows, bias, fixed_tiles, merge_vector_chain)
    acc, row_sum, row_max = state
    p, alpha = rescale_state(pypto, s, row_sum, row_max)
    p = pypto.cast(p, p_dtype)  # in the merged chain's task (AT-21)
    if merge_vector_chain:
        pypto.set_pass_options(sg_set_scope=-1)
    pypto.set_cube_tile_shapes(*tiles["c2"])
    accumulate(pypto, p, v_tiles, acc, alpha, heads)


def fold_block(pypto, q_tile, k_tile, v_tile, scale, state, p_dtype, vec_rows: int, bias=None, fixed_tiles=None,
               merge_vector_chain=False):
    """``attend_step`` on one static key tile with the state as values: returns the new
    (acc, l, m); ``state`` None starts it (standard softmax, AT-02)."""
    keys = k_tile.shape[0]
    s, tiles = step_scores(pypto, q_tile, [k_tile], scale, keys, vec_rows, bias, fixed_tiles, merge_vector_chain)
    if state is None:
        p, row_max, row_sum = standard_softmax(pypto, s)
        alpha = acc = None
    else:
        acc, row_sum, row_max = state
        p, alpha, row_sum, row_max = rescale(pypto, s, row_sum, row_max)
    p = pypto.cast(p, p_dtype)
    if merge_vector_chain:
        pypto.set_pass_options(sg_set_scope=-1)
    pypto.set_cube_tile_shapes(*tiles["c2"])
    if state is None:
        acc = values(pypto, p, [v_tile])
    else:
        acc = accumulated(pypto, p, [v_tile], acc, alpha)
    return acc, row_sum, row_max


def reads_mask(q_len: int, heads: int, kv_heads: int, causal: bool) -> bool:
    """Whether the kernel reads the diagonal block's mask: causal, unless Sq = 1 with a
    query group, whose one row sees every key (``grouped_token``)."""
    return causal and not (q_len == 1 and heads // kv_heads > 1)


def build(pypto, *, batch: int, q_len: int, kv_len: int, heads: int, kv_heads: int, head_dim: int, dtype: str,
          causal: bool, q_block: int = Q_BLOCK, kv_block: int = KV_BLOCK, vec_rows: int = VEC_ROWS,
          fixed_tiles=None, merge_vector_chain: bool = False, pass_options=(), unrolled: bool = False,
          cube_nbuffer: int = 1, vec_nbuffer: int = 0):
    """The jit kernel: kernel(q, k, v, out, lse, mask, scale); mask [q_block, q_block] fp32 is the
    diagonal block's bias, a tensor only where the kernel reads it (``reads_mask``), else None.  ``fixed_tiles`` ({"c1", "v1", "c2"}, as ``step_tiles``)
    replaces the tile rule, ``merge_vector_chain`` merges each step's vector chain into one task,
    ``pass_options``, ``cube_nbuffer`` and ``vec_nbuffer`` go to the jit (``atoms.jit_options``); ``unrolled`` walks
    the q and key blocks of a head in Python (static views, state as values, no workspace)."""
    dt = getattr(pypto, dtype)
    fp32 = pypto.DT_FP32
    group = heads // kv_heads
    shift = kv_len - q_len  # query row i is aligned with key row i + shift
    row0 = first_row(q_len, kv_len, causal)
    kv_blocks = ceil_div(kv_len, kv_block)

    def attend(q_tile, k, v, bias, scale, state, rows, key_row, keys, kv_col, tile_keys):
        """Fold keys [key_row, key_row + keys) of k/v (column kv_col) into state."""
        k_tile = pypto.view(k, [tile_keys, head_dim], [key_row, kv_col], valid_shape=[keys, head_dim])
        v_tile = pypto.view(v, [tile_keys, head_dim], [key_row, kv_col], valid_shape=[keys, head_dim])
        attend_step(pypto, q_tile, [k_tile], [v_tile], scale, keys, state, dt, vec_rows, bias, fixed_tiles,
                    merge_vector_chain)

    def all_keys(q_tile, k, v, mask, scale, state, b, q0, rows, kv_col):
        """Non-causal: every key block of the sequence."""
        for kb in pypto.loop(kv_blocks, name="LOOP_KV", idx_name="kb"):
            keys = (kv_len - kb * kv_block).min(kv_block)
            attend(q_tile, k, v, None, scale, state, rows, b * kv_len + kb * kv_block, keys, kv_col, kv_block)

    def causal_keys(q_tile, k, v, mask, scale, state, b, q0, rows, kv_col):
        """Causal: the keys every row sees, then the diagonal square under the mask."""
        visible = q0 + shift
        for kb in pypto.loop(pypto.ceildiv(visible, kv_block), name="LOOP_KV", idx_name="kb"):
            keys = (visible - kb * kv_block).min(kv_block)
            attend(q_tile, k, v, None, scale, state, rows, b * kv_len + kb * kv_block, keys, kv_col, kv_block)
        bias = pypto.view(mask, [rows, rows], [0, 0])
        attend(q_tile, k, v, bias, scale, state, rows, b * kv_len + visible, rows, kv_col, rows)

    walk_keys = causal_keys if causal else all_keys

    def static_block(q, k, v, mask, out, lse, scale, b, kvh, h, q0, rows):
        """Rows [q0, q0 + rows) with every key block static (a Python loop): the state
        stays values, no workspace (SK-02 when there is one block)."""
        q_tile = pypto.view(q, [rows, head_dim], [b * q_len + q0, h * head_dim])
        visible = q0 + shift if causal else kv_len
        spans = [(start, min(kv_block, visible - start)) for start in range(0, visible, kv_block)]
        state = None
        for start, keys in spans + ([(visible, rows)] if causal else []):
            k_tile, v_tile = (pypto.view(t, [keys, head_dim], [b * kv_len + start, kvh * head_dim]) for t in (k, v))
            bias = pypto.view(mask, [rows, rows], [0, 0]) if start == visible else None
            state = fold_block(pypto, q_tile, k_tile, v_tile, scale, state, dt, vec_rows, bias, fixed_tiles,
                               merge_vector_chain)
        pypto.set_vec_tile_shapes(min(vec_rows, rows), head_dim)
        write_rows(out, lse, b, h, q0, *finish(pypto, *state))

    def write_rows(out, lse, b, h, q0, o, row_lse):
        pypto.assemble(pypto.cast(o, dt), [b * q_len + q0, h * head_dim], out)
        pypto.assemble(row_lse, [(b * heads + h) * q_len + q0, 0], lse)

    def query_block(q, k, v, mask, out, lse, scale, b, kvh, h, q0, rows):
        """Rows [q0, q0 + rows) of query head h (a static count) -> out, lse."""
        state = (pypto.tensor([rows, head_dim], fp32, "acc"), pypto.tensor([rows, 1], fp32, "row_sum"),
                 pypto.tensor([rows, 1], fp32, "row_max"))
        pypto.set_vec_tile_shapes(min(vec_rows, rows), head_dim)
        start_state(pypto, *state)
        q_tile = pypto.view(q, [rows, head_dim], [b * q_len + q0, h * head_dim])
        walk_keys(q_tile, k, v, mask, scale, state, b, q0, rows, kvh * head_dim)
        pypto.set_vec_tile_shapes(min(vec_rows, rows), head_dim)
        write_rows(out, lse, b, h, q0, *finish(pypto, *state))

    def unseen_block(out, lse, b, h, q0, rows):
        """Rows [q0, q0 + rows) that see no key: out = 0, lse = -inf = log(0) (pypto clamps
        an fp32 fill of -inf to -FP32_MAX: probe full_fp32_clamped)."""
        pypto.set_vec_tile_shapes(min(vec_rows, rows), head_dim)
        pypto.assemble(pypto.full([rows, head_dim], 0.0, dt), [b * q_len + q0, h * head_dim], out)
        empty_sum = pypto.full([rows, 1], 0.0, fp32)
        pypto.assemble(pypto.log(empty_sum), [(b * heads + h) * q_len + q0, 0], lse)

    def in_blocks(first, count, name, visit):
        """visit(q0, rows) for rows [first, first + count): whole q blocks in a loop, then
        the shorter tail (static sizes both)."""
        whole, tail = divmod(count, q_block)
        if unrolled:
            for start in range(first, first + count, q_block):
                visit(start, min(q_block, first + count - start))
        elif whole:
            for qb in pypto.loop(whole, name=name, idx_name="qb"):
                visit(first + qb * q_block, q_block)
        if tail and not unrolled:
            visit(first + whole * q_block, tail)

    def query_blocks(q, k, v, mask, out, lse, scale, b, kvh, h):
        in_blocks(0, row0, "LOOP_UNSEEN", lambda q0, rows: unseen_block(out, lse, b, h, q0, rows))
        in_blocks(row0, q_len - row0, "LOOP_Q",
                  lambda q0, rows: visit_block(q, k, v, mask, out, lse, scale, b, kvh, h, q0, rows))

    visit_block = static_block if unrolled or (not causal and kv_len <= kv_block) else query_block

    def grouped_token(q, k, v, mask, out, lse, scale, b, kvh, h):
        """Sq = 1 (every key visible, causal or not): the kv head's whole group of query
        heads as one [group, D] q tile, as paged decode does - a group-times fewer steps
        with group-times taller cube tiles.  (h is the group's first head.)"""
        state = (pypto.tensor([group, head_dim], fp32, "acc"), pypto.tensor([group, 1], fp32, "row_sum"),
                 pypto.tensor([group, 1], fp32, "row_max"))
        pypto.set_vec_tile_shapes(min(vec_rows, group), head_dim)
        start_state(pypto, *state)
        width = group * head_dim
        q_tile = pypto.reshape(pypto.view(q, [1, width], [b, h * head_dim]), [group, head_dim])
        all_keys(q_tile, k, v, mask, scale, state, b, 0, group, kvh * head_dim)
        pypto.set_vec_tile_shapes(min(vec_rows, group), head_dim)
        o, row_lse = finish(pypto, *state)
        pypto.assemble(pypto.reshape(pypto.cast(o, dt), [1, width]), [b, h * head_dim], out)
        pypto.assemble(row_lse, [b * heads + h, 0], lse)

    one_token = q_len == 1 and group > 1
    head_steps = 1 if one_token else group  # query heads per kv head visited one by one
    visit_heads = grouped_token if one_token else query_blocks

    @pypto.frontend.jit(pass_options=jit_pass_options(pass_options, cube_nbuffer, vec_nbuffer))
    def flash_attention_kernel(
        q: pypto.Tensor([batch * q_len, heads * head_dim], dt),
        k: pypto.Tensor([batch * kv_len, kv_heads * head_dim], dt),
        v: pypto.Tensor([batch * kv_len, kv_heads * head_dim], dt),
        out: pypto.Tensor([batch * q_len, heads * head_dim], dt),
        lse: pypto.Tensor([batch * heads * q_len, 1], fp32),
        mask: optional_input(pypto, reads_mask(q_len, heads, kv_heads, causal), [q_block, q_block], fp32),
        scale: float,
    ):
        pypto.set_vec_tile_shapes(vec_rows, head_dim)
        for b in pypto.loop(batch, name="LOOP_B", idx_name="b"):
            for kvh in pypto.loop(kv_heads, name="LOOP_KVH", idx_name="kvh"):
                for g in pypto.loop(head_steps, name="LOOP_G", idx_name="g"):
                    visit_heads(q, k, v, mask, out, lse, scale, b, kvh, kvh * group + g)

    return flash_attention_kernel
