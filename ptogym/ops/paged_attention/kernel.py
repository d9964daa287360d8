"""Paged decode attention (SK-01 whose key blocks come through AT-17) as a PyPTO kernel.

    q [B * Hq, D]; k_cache, v_cache [num_blocks * block_size, Hkv * D] (the caller's
    [num_blocks, block_size, Hkv, D], viewed flat: slot = block * block_size + offset,
    the layout ``ptogym.ops.cache_scatter`` writes); block_table [B, max_blocks] int32;
    seq_lens [B] int32; out [B * Hq, D]

Per sequence b and kv head, the group of Hq / Hkv query heads that share it is one q
tile of ``group`` rows (so the cube multiplies [group, D] by [D, block_size] rather
than one row at a time).  Logical block j of the sequence is physical block
``block_table[b, j]``: its keys and values are views of the caches at row
``block * block_size`` and column ``kv_head * D`` - read in place, never gathered into
a workspace (AT-17).  The sequence's last block is a view with ``valid_shape``
``seq_len - j * block_size`` rows (AT-20); entries of the block table past
ceil(seq_len / block_size) are never read.

Split-KV (flash-decoding, ``kv_splits`` S > 0): one key block after another is a chain
of dependent steps (~16 µs each under pypto's cost model), and the kv heads of one
sequence, as nested-loop iterations, did not overlap there.  So one outer loop runs
every (sequence, kv head, split) at once, split s walking the s-th of S equal runs of
the sequence's blocks (ceil(blocks / S) each; a run past the end is empty and leaves
the start state); its un-normalised state (acc, l, m) goes to fp32 workspaces, and a
second loop merges the S states of each sequence head: m = max m_s, w_s = exp(m_s - m),
out = sum w_s acc_s / sum w_s l_s (an empty split's m is ``MASKED``: w_s = 0).

Several blocks a step (``blocks_per_step`` P > 1): the chain's length, not the bytes,
sets the time, so a step may take P whole blocks at once - P score matmuls writing
one [group, P * block_size] score workspace, one online-softmax update on it, P P·V
matmuls summed into acc (``atoms.attention``: with one kv head a task by one reduction
over a workspace of the products, each read of a task costing ~1400 cycles under the
cost model).  Only full blocks go in such steps: a run's whole blocks in
groups of P, then what is left (fewer than P, the sequence's partial last block among
them) one a step as before, so no step reads a block or a block-table entry past the
run.  With ``step_cascade`` c > 1 the whole blocks left after the groups of P go in
groups of P / c, then P / c², ... (while more than one block), so a tail of up to P - 1
whole blocks takes a few steps instead of one a block: with c = 2, at most one step per
binary digit of its length.

Several kv heads a task (``kv_head_span`` H > 1): under pypto's cost model every GM
copy pays ~1400 cycles before its bytes, so one kv head's [block_size, D] block view
(32 KB at 128 x 128 bf16) loads at a third of the rate a 256 KB one does.  A task then
takes H kv heads of a sequence: its block views are [block_size, H * D] (H heads side by
side in the cache row, contiguous for H = Hkv), and its q tile is the H query groups
laid out block-diagonally, [H * group, H * D] with group i at [i * group, i * D] and
zeros elsewhere, so one score matmul gives every head its own scores (the zeros add
exact 0s; Hkv times the cube FLOPs, which decode has to spare).  The softmax runs on
all H * group rows at once, and of each P·V product [H * group, H * D] only the diagonal
blocks are kept (``atoms.attention.head_diagonal``).

Blocks gathered (``gather_blocks``, the upstream variant only): a step of P > 1 whole
blocks first copies them into one [P * block_size, columns] tile (``pypto.concat``, what
upstream's kernel does with ``pypto.assemble`` into a workspace), so it makes one score
matmul and one P·V matmul instead of P of each.  The operator does not: it reads its
blocks in place (AT-17; issue #22), and a gathered step moves every key and value three
times through DDR (read, written to the workspace, read again) in a bandwidth-bound
kernel - the cost model charges no DDR bandwidth and so favours it (README: Measured).

Isomorphic tasks merged (``cube_nbuffer`` / ``vec_nbuffer`` n, ``ptogym.atoms.jit_options``):
a step of P blocks is P score matmuls, P P·V matmuls (each a few cube tasks along the
width) and their vector epilogues - tasks of the same structure, and thousands of them,
not the cube, bound the long-key bands under the cost model (b16_s4k unmerged: 5136
tasks, the six AICPU scheduler threads busy 90% of the kernel, the cube 31%).  n of
them then make one task.

The long-key bands raise the runtime's pool for a loop iteration's intermediates
(``runtime_options`` ``stitch_function_inner_memory``; pypto's default 10 lets fewer
sequences' steps run at once; docs/pypto-sim.md).

No cube at all (``vector_step``): with one query row a kv head (group 1) the two matmuls
are matrix-vector products, and each costs a cube task (~1.8 µs under the cost model)
plus its hand-offs.  The vector step computes them on the vector unit instead: the
scores are the row sums of K * q ([keys, 1], a column), the online softmax runs down
that column, and P·V is the column sums of V * p, p rounded to the input dtype first as
the cube path's P·V takes it.  It pays for short key runs only (fewer, larger vector
tasks; ``tuned.json`` uses it for ≤ 1024 keys at group 1, 128-key blocks of D ≤ 128)
and needs kv_head_span 1.

No torch here: ``build`` receives the ``pypto`` namespace.
"""
import math

from ptogym.atoms.attention import MASKED, finish, rescale, start_state
from ptogym.atoms.jit_options import jit_pass_options
from ptogym.ops.flash_attention.kernel import VEC_ROWS, attend_step, fixed_tiles_fit
from ptogym.tune.space import Param, Tuning, token_band

#: Build kwargs of other configurations, simulated side by side by the benchmarks.
VARIANTS = {
    # upstream pypto's incremental flash attention (models/experimental/attention/
    # incre_flash_attention_impl.py, r0.2.0): cube tiles 128 x 128 x 128 for both matmuls,
    # vector tiles 64 rows, the softmax chain merged with sg_set_scope, cube_l1_reuse_setting
    # {0: 8}, 4 blocks (512 keys) a step, gathered into one workspace tile first (its
    # pypto.assemble copies; pypto.concat here, the same µs under the cost model).
    "upstream": {"fixed_tiles": (("c1", ((128, 128), (128, 128), (128, 128))), ("v1", (64, 128)),
                                 ("c2", ((128, 128), (128, 128), (128, 128)))),
                 "merge_vector_chain": True, "pass_options": (("cube_l1_reuse_setting", ((0, 8),)),),
                 "kv_splits": 0, "blocks_per_step": 4, "kv_head_span": 1, "vector_step": False,
                 "gather_blocks": True, "step_cascade": 0, "runtime_options": None, "cube_nbuffer": 1,
                 "vec_nbuffer": 0},
    # this kernel with each step's vector chain merged into one task (AT-21), measured beside the default
    "merged": {"merge_vector_chain": True},
}


#: upstream's cube tiles with a [16, 256] softmax tile: one tile holds a 16-row group's
#: scores of 16 blocks of 16 keys (measured at block 16: README, "Fewer reads a step")
WIDE_SOFTMAX_TILES = tuple((name, (16, 256)) if name == "v1" else (name, tiles)
                           for name, tiles in VARIANTS["upstream"]["fixed_tiles"])

#: the gathering copies' vector tile, in elements (128 KB of bf16 / fp16: [128, 512] compiles, [128, 1024] hangs pypto)
GATHER_TILE_ELEMENTS = 65536


def _band(batch, kv_len, group, block_size, head_dim, kv_heads):
    """The batch (decode tokens) band, then the key capacity (block table width x block size)
    band, then the block size in it (how many keys a block-counted step takes), then the
    query group (Hq / Hkv: how many rows a kv head gives a task), then the block's shape
    in that, block_size x D (the vector step's tiles), then in that the (sequence, kv head)
    pairs, batch x Hkv (how many chains of steps there are to run side by side)."""
    kv = f"{token_band(batch)}/kv:{token_band(kv_len)}"
    grouped = f"{kv}/group:{group}"
    block = f"{grouped}/block:{block_size}x{head_dim}"
    return (token_band(batch), kv, f"{kv}/block:{block_size}", grouped, block,
            f"{block}/pairs:{token_band(batch * kv_heads)}")


def vector_step_fits(params, shape):
    """The vector step works on one kv head's [block_size, D] views (a tuning constraint)."""
    if params.get("vector_step") and params.get("kv_head_span", 1) != 1:
        return f"vector_step: needs kv_head_span 1, not {params['kv_head_span']}"
    return None


#: what ``ptogym tune`` may change (``ptogym.tune.space``); the values the operator runs
#: are in ``tuned.json`` beside this file, per batch band and per key capacity band in it
TUNING = Tuning(
    params={
        "vec_rows": Param((VEC_ROWS, 16, 64, 128)),
        "merge_vector_chain": Param((False, True)),
        "fixed_tiles": Param((None, VARIANTS["upstream"]["fixed_tiles"], WIDE_SOFTMAX_TILES)),
        "pass_options": Param(((), VARIANTS["upstream"]["pass_options"])),
        "kv_splits": Param((0, 2, 4, 8, 16, 32)),
        "blocks_per_step": Param((1, 2, 4, 8, 16, 32)),
        "step_cascade": Param((0, 2, 4)),
        "runtime_options": Param((None, (("stitch_function_inner_memory", 1000),))),
        "cube_nbuffer": Param((1, 2, 4, 8, 16, 32)),
        "vec_nbuffer": Param((0, 2, 4, 8, 16, 32)),
        "kv_head_span": Param((1, 2, 4, 8)),
        "vector_step": Param((False, True)),
    },
    band=_band,
    constraints=(fixed_tiles_fit, vector_step_fits),
    plain=VARIANTS["upstream"],
)


def build(pypto, *, batch: int, heads: int, kv_heads: int, head_dim: int, num_blocks: int, block_size: int,
          max_blocks: int, dtype: str, vec_rows: int = VEC_ROWS, fixed_tiles=None, merge_vector_chain: bool = False,
          pass_options=(), kv_splits: int = 0, blocks_per_step: int = 1, kv_head_span: int = 1,
          vector_step: bool = False, gather_blocks: bool = False, step_cascade: int = 0, runtime_options=None,
          cube_nbuffer: int = 1, vec_nbuffer: int = 0):
    """The jit kernel: kernel(q, k_cache, v_cache, block_table, seq_lens, out, scale); the
    tile and merge kwargs as in ``ptogym.ops.flash_attention.kernel.build``.  ``kv_splits``
    > 0 walks each sequence's blocks in that many runs at once (split-KV), else one head's
    blocks in one run; ``blocks_per_step`` whole blocks make one step of a run (the rest
    one a step); ``kv_head_span`` (its gcd with kv_heads) kv heads make one task;
    ``vector_step``, ``gather_blocks``, ``step_cascade``, ``cube_nbuffer`` and ``vec_nbuffer``
    as in the module docstring; ``runtime_options`` (hashable (name, value) pairs) go to the jit."""
    dt = getattr(pypto, dtype)
    fp32 = pypto.DT_FP32
    group = heads // kv_heads
    slots = num_blocks * block_size
    width = kv_heads * head_dim
    span = math.gcd(kv_head_span, kv_heads)  # kv heads a task
    rows, columns = span * group, span * head_dim  # a task's query rows; its block views' width
    spans = kv_heads // span
    # the sizes of the whole-block steps, largest first (step_cascade: each the previous one / c)
    step_sizes = [blocks_per_step] if blocks_per_step > 1 else []
    while step_cascade and step_sizes and step_sizes[-1] // step_cascade > 1:
        step_sizes.append(step_sizes[-1] // step_cascade)
    # the gathering copies' tile rows for a step of each size (at most GATHER_TILE_ELEMENTS a tile)
    gather_rows = {size: min(size * block_size, max(1, GATHER_TILE_ELEMENTS // columns)) for size in step_sizes}
    if vector_step and span != 1:
        raise ValueError(f"vector_step needs one kv head a task, not kv_head_span {kv_head_span}")

    def kv_tiles(k_cache, v_cache, block_table, b, kvh, j, keys):
        """Views of logical block j of sequence b (``keys`` valid rows) in the caches (AT-17),
        kv heads [kvh, kvh + span) side by side."""
        row = block_table[b, j] * block_size
        k_tile = pypto.view(k_cache, [block_size, columns], [row, kvh * head_dim], valid_shape=[keys, columns])
        v_tile = pypto.view(v_cache, [block_size, columns], [row, kvh * head_dim], valid_shape=[keys, columns])
        return k_tile, v_tile

    def task_queries(q, b, kvh):
        """The q tile of the query heads of kv heads [kvh, kvh + span) of sequence b: [rows,
        D], or with span > 1 laid out block-diagonally, [rows, span * D] with kv head i's
        query group at [i * group, i * D] and zeros elsewhere, so that one matmul against
        a block's span kv heads gives every head its own scores (the zeros add exact 0s)."""
        first = b * heads + kvh * group
        if span == 1:
            return pypto.view(q, [group, head_dim], [first, 0])
        pypto.set_vec_tile_shapes(min(group, max(1, 4096 // columns)), columns)
        zeros = pypto.full([group, columns - head_dim], 0.0, dt)
        row_blocks = []
        for i in range(span):
            pieces = [pypto.view(q, [group, head_dim], [first + i * group, 0])]
            if i:
                pieces.insert(0, pypto.view(zeros, [group, i * head_dim], [0, 0]))
            if i < span - 1:
                pieces.append(pypto.view(zeros, [group, (span - 1 - i) * head_dim], [0, 0]))
            row_blocks.append(pypto.concat(pieces, 1))
        return pypto.concat(row_blocks, 0)

    def vector_attend(q_tile, k_tiles, v_tiles, scale, state, fresh):
        """One step with no cube (``vector_step``): per query row g, its scores are the row
        sums of K * q_g ([keys, 1], a column), and its P.V the column sums of V * p.
        ``fresh``: the chain's first step, which reads no state - its old l and m are the
        start state's 0 and ``MASKED`` as constants and its acc is its P.V alone (the same
        numbers the start state gives: alpha = exp(MASKED - m) is an exact 0)."""
        acc, row_sum, row_max = state
        # at most 64 KB of fp32 a tile (pypto.sum's reduction buffer and result rows sit beside
        # it in UB), and 32 rows past D = 128: pypto 0.2.0's cost model fails (ParseInput
        # BuildFunction, Errcode FFFFFF) on [64, 256] tiles of 128-key blocks at batch 2
        pypto.set_vec_tile_shapes(min(vec_rows, block_size, 16384 // head_dim if head_dim <= 128 else 32), head_dim)
        pieces = len(k_tiles)
        ks, vs = [], []
        for i in range(pieces):
            ks.append(pypto.cast(k_tiles[i], fp32))
            vs.append(pypto.cast(v_tiles[i], fp32))
        accs, sums, maxes = [], [], []
        for g in range(group):
            q_row = pypto.cast(pypto.view(q_tile, [1, head_dim], [g, 0]), fp32)
            block_scores = []
            for i in range(pieces):
                block_scores.append(pypto.sum(pypto.mul(ks[i], q_row), dim=-1, keepdim=True))
            s = pypto.mul(block_scores[0] if pieces == 1 else pypto.concat(block_scores, 0), scale)
            if fresh:
                old_sum, old_max = pypto.full([1, 1], 0.0, fp32), pypto.full([1, 1], MASKED, fp32)
            else:
                old_sum, old_max = pypto.view(row_sum, [1, 1], [g, 0]), pypto.view(row_max, [1, 1], [g, 0])
            p, alpha, l_new, m_new = rescale(pypto, s, old_sum, old_max, dim=0)
            sums.append(l_new)
            maxes.append(m_new)
            p = pypto.cast(pypto.cast(p, dt), fp32)  # P rounded to the input dtype, as the cube path's P.V takes it
            o = None
            for i in range(pieces):
                part = p if pieces == 1 else pypto.view(p, [block_size, 1], [i * block_size, 0])
                term = pypto.sum(pypto.mul(vs[i], part), dim=0, keepdim=True)
                o = term if o is None else pypto.add(o, term)
            accs.append(o if fresh else pypto.add(pypto.mul(pypto.view(acc, [1, head_dim], [g, 0]), alpha), o))
        if group == 1:
            acc[:], row_sum[:], row_max[:] = accs[0], sums[0], maxes[0]
        else:
            acc[:], row_sum[:], row_max[:] = (pypto.concat(accs, 0), pypto.concat(sums, 0),
                                              pypto.concat(maxes, 0))

    def attend_blocks(q_tile, k_cache, v_cache, block_table, scale, b, kvh, first, count, keys, state, fresh=False):
        """One step over ``count`` logical blocks from ``first`` (the last with ``keys``
        valid rows; several only when whole); ``fresh`` as in ``vector_attend``."""
        k_tiles, v_tiles = [], []
        for i in range(count):
            k_tile, v_tile = kv_tiles(k_cache, v_cache, block_table, b, kvh, first + i, keys if i == count - 1
                                      else block_size)
            k_tiles.append(k_tile)
            v_tiles.append(v_tile)
        if gather_blocks and count > 1:  # whole blocks: one [count * block_size, columns] tile each
            pypto.set_vec_tile_shapes(gather_rows[count], columns)
            k_tiles, v_tiles = [pypto.concat(k_tiles, 0)], [pypto.concat(v_tiles, 0)]
            keys = count * block_size
        if vector_step:
            return vector_attend(q_tile, k_tiles, v_tiles, scale, state, fresh)
        attend_step(pypto, q_tile, k_tiles, v_tiles, scale, keys, state, dt, vec_rows, None, fixed_tiles,
                    merge_vector_chain, span)

    # a vector-step chain of single blocks over a whole sequence is one loop of at least one
    # step (upstream's structure): its first step starts the state itself (no fill tasks) and
    # its last one ends the chain (the division in that step's task, not one more)
    one_loop = vector_step and not step_sizes and not kv_splits

    def head_blocks(q, k_cache, v_cache, block_table, scale, b, kvh, seq_len, first, stop, on_last=None):
        """The state (acc, l, m) of the query heads of kv heads [kvh, kvh + span) of sequence
        b after its logical blocks [first, stop) (of the sequence's seq_len keys); with
        ``one_loop``, ``on_last(state)`` runs in the last step's body instead."""
        state = (pypto.tensor([rows, head_dim], fp32, "acc"), pypto.tensor([rows, 1], fp32, "row_sum"),
                 pypto.tensor([rows, 1], fp32, "row_max"))
        if not one_loop:
            pypto.set_vec_tile_shapes(min(vec_rows, rows), head_dim)
            start_state(pypto, *state)
        # one kv head's q tile is a view, taken in each step's body: taken once before the
        # loops pypto copies it into a workspace (a task on every chain's critical path)
        shared_q = task_queries(q, b, kvh) if span > 1 else None

        def queries():
            return shared_q if shared_q is not None else task_queries(q, b, kvh)
        singles = first
        whole = (seq_len // block_size).min(stop) if step_sizes else None  # the run's blocks before it are full
        for step in range(len(step_sizes)):
            size = step_sizes[step]
            steps = (whole - singles).max(0) // size
            for g in pypto.loop(steps, name=f"LOOP_GROUPS_OF_{size}", idx_name="g"):
                attend_blocks(queries(), k_cache, v_cache, block_table, scale, b, kvh, singles + g * size,
                              size, block_size, state)
            singles = singles + steps * size
        for j in pypto.loop(singles, stop, name="LOOP_BLOCKS", idx_name="j"):
            def block_step(fresh=False):
                attend_blocks(queries(), k_cache, v_cache, block_table, scale, b, kvh, j, 1,
                              (seq_len - j * block_size).min(block_size), state, fresh)
            if not one_loop:
                block_step()
                continue
            if pypto.cond(pypto.is_loop_begin(j)):
                block_step(fresh=True)
            else:
                block_step()
            if pypto.cond(pypto.is_loop_end(j)):
                pypto.set_vec_tile_shapes(min(vec_rows, rows), head_dim)
                on_last(state)
        pypto.set_vec_tile_shapes(min(vec_rows, rows), head_dim)
        return state

    def sequence_head(q, k_cache, v_cache, block_table, out, scale, b, kvh, seq_len):
        """The query heads of kv heads [kvh, kvh + span) of sequence b against its seq_len keys."""
        def write_out(state):
            o, _ = finish(pypto, *state)
            pypto.assemble(pypto.cast(o, dt), [b * heads + kvh * group, 0], out)

        state = head_blocks(q, k_cache, v_cache, block_table, scale, b, kvh, seq_len, 0,
                            pypto.ceildiv(seq_len, block_size), write_out)
        if not one_loop:
            write_out(state)

    def split_part(q, k_cache, v_cache, block_table, seq_lens, scale, parts, t):
        """Split ``t`` (sequence b, kv heads from kvh, split s): the query heads of those kv
        heads against the s-th of ``kv_splits`` equal runs of the sequence's blocks, its
        un-normalised state written to rows t * rows of the ``parts`` workspaces."""
        b, kvh, split = t // (spans * kv_splits), t // kv_splits % spans * span, t % kv_splits
        seq_len = seq_lens[b]
        blocks = pypto.ceildiv(seq_len, block_size)
        per_split = pypto.ceildiv(blocks, kv_splits)
        state = head_blocks(q, k_cache, v_cache, block_table, scale, b, kvh, seq_len,
                            (split * per_split).min(blocks), ((split + 1) * per_split).min(blocks))
        for index in range(len(parts)):
            pypto.assemble(state[index], [t * rows, 0], parts[index])

    def combine_splits(parts, out, u):
        """Task ``u`` (a sequence's span of kv heads): its splits' states merged (m = max m_s,
        w_s = exp(m_s - m), out = sum w_s acc_s / sum w_s l_s); a split with no block holds
        the start state (w_s = 0)."""
        acc, row_sum, row_max = parts
        pypto.set_vec_tile_shapes(min(vec_rows, rows), head_dim)
        maxes = []
        for s in range(kv_splits):
            maxes.append(pypto.view(row_max, [rows, 1], [(u * kv_splits + s) * rows, 0]))
        top = maxes[0]
        for s in range(1, kv_splits):
            top = pypto.maximum(top, maxes[s])
        total = numerator = None
        for s in range(kv_splits):
            weight = pypto.exp(pypto.sub(maxes[s], top))
            first = (u * kv_splits + s) * rows
            term = pypto.mul(pypto.view(acc, [rows, head_dim], [first, 0]), weight)
            mass = pypto.mul(pypto.view(row_sum, [rows, 1], [first, 0]), weight)
            numerator = term if numerator is None else pypto.add(numerator, term)
            total = mass if total is None else pypto.add(total, mass)
        pypto.assemble(pypto.cast(pypto.div(numerator, total), dt), [u * rows, 0], out)

    def split_kv(q, k_cache, v_cache, block_table, seq_lens, out, scale):
        tasks = batch * spans * kv_splits
        parts = (pypto.tensor([tasks * rows, head_dim], fp32, "split_acc"),
                 pypto.tensor([tasks * rows, 1], fp32, "split_sum"), pypto.tensor([tasks * rows, 1], fp32, "split_max"))
        for t in pypto.loop(tasks, name="LOOP_SPLITS", idx_name="t"):
            split_part(q, k_cache, v_cache, block_table, seq_lens, scale, parts, t)
        for u in pypto.loop(batch * spans, name="LOOP_COMBINE", idx_name="u"):
            combine_splits(parts, out, u)

    def per_head(q, k_cache, v_cache, block_table, seq_lens, out, scale):
        for b in pypto.loop(batch, name="LOOP_B", idx_name="b"):
            seq_len = seq_lens[b]
            for c in pypto.loop(spans, name="LOOP_KVH", idx_name="c"):
                sequence_head(q, k_cache, v_cache, block_table, out, scale, b, c * span, seq_len)

    def attend(q, k_cache, v_cache, block_table, seq_lens, out, scale):
        if kv_splits:
            split_kv(q, k_cache, v_cache, block_table, seq_lens, out, scale)
        else:
            per_head(q, k_cache, v_cache, block_table, seq_lens, out, scale)

    @pypto.frontend.jit(runtime_options=dict(runtime_options or ()),
                        pass_options=jit_pass_options(pass_options, cube_nbuffer, vec_nbuffer))
    def paged_attention_kernel(
        q: pypto.Tensor([batch * heads, head_dim], dt),
        k_cache: pypto.Tensor([slots, width], dt),
        v_cache: pypto.Tensor([slots, width], dt),
        block_table: pypto.Tensor([batch, max_blocks], pypto.DT_INT32),
        seq_lens: pypto.Tensor([batch], pypto.DT_INT32),
        out: pypto.Tensor([batch * heads, head_dim], dt),
        scale: float,
    ):
        attend(q, k_cache, v_cache, block_table, seq_lens, out, scale)

    return paged_attention_kernel
