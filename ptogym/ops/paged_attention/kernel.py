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

No torch here: ``build`` receives the ``pypto`` namespace.
"""
from ptogym.atoms.attention import finish, start_state
from ptogym.ops.flash_attention.kernel import VEC_ROWS, attend_block, fixed_tiles_fit
from ptogym.tune.space import Param, Tuning, token_band

#: Build kwargs of other configurations, simulated side by side by the benchmarks.
VARIANTS = {
    # upstream pypto's incremental flash attention (models/experimental/attention/
    # incre_flash_attention_impl.py, r0.2.0): cube tiles 128 x 128 x 128 for both matmuls,
    # vector tiles 64 rows, the softmax chain merged with sg_set_scope, cube_l1_reuse_setting
    # {0: 8}.  Upstream also gathers 4 blocks (512 keys) into a workspace per step; here the
    # blocks stay in-place views, one per step.
    "upstream": {"fixed_tiles": (("c1", ((128, 128), (128, 128), (128, 128))), ("v1", (64, 128)),
                                 ("c2", ((128, 128), (128, 128), (128, 128)))),
                 "merge_vector_chain": True, "pass_options": (("cube_l1_reuse_setting", ((0, 8),)),)},
    # this kernel with each step's vector chain merged into one task (AT-21), measured beside the default
    "merged": {"merge_vector_chain": True},
}


#: what ``ptogym tune`` may change (``ptogym.tune.space``); the values the operator runs
#: are in ``tuned.json`` beside this file, per batch (decode tokens) band
TUNING = Tuning(
    params={
        "vec_rows": Param((VEC_ROWS, 16, 64)),
        "merge_vector_chain": Param((False, True)),
        "fixed_tiles": Param((None, VARIANTS["upstream"]["fixed_tiles"])),
        "pass_options": Param(((), VARIANTS["upstream"]["pass_options"])),
    },
    band=lambda batch: (token_band(batch),),
    constraints=(fixed_tiles_fit,),
    plain=VARIANTS["upstream"],
)


def build(pypto, *, batch: int, heads: int, kv_heads: int, head_dim: int, num_blocks: int, block_size: int,
          max_blocks: int, dtype: str, vec_rows: int = VEC_ROWS, fixed_tiles=None, merge_vector_chain: bool = False,
          pass_options=()):
    """The jit kernel: kernel(q, k_cache, v_cache, block_table, seq_lens, out, scale); the last
    three kwargs as in ``ptogym.ops.flash_attention.kernel.build``."""
    dt = getattr(pypto, dtype)
    fp32 = pypto.DT_FP32
    group = heads // kv_heads
    slots = num_blocks * block_size
    width = kv_heads * head_dim

    def sequence_head(q, k_cache, v_cache, block_table, out, scale, b, kvh, seq_len):
        """The query heads of kv head kvh of sequence b against its seq_len keys."""
        state = (pypto.tensor([group, head_dim], fp32, "acc"), pypto.tensor([group, 1], fp32, "row_sum"),
                 pypto.tensor([group, 1], fp32, "row_max"))
        pypto.set_vec_tile_shapes(min(vec_rows, group), head_dim)
        start_state(pypto, *state)
        q_tile = pypto.view(q, [group, head_dim], [b * heads + kvh * group, 0])
        for j in pypto.loop(pypto.ceildiv(seq_len, block_size), name="LOOP_BLOCKS", idx_name="j"):
            block = block_table[b, j]
            keys = (seq_len - j * block_size).min(block_size)
            k_tile = pypto.view(k_cache, [block_size, head_dim], [block * block_size, kvh * head_dim],
                                valid_shape=[keys, head_dim])
            v_tile = pypto.view(v_cache, [block_size, head_dim], [block * block_size, kvh * head_dim],
                                valid_shape=[keys, head_dim])
            attend_block(pypto, q_tile, k_tile, v_tile, scale, keys, state, dt, vec_rows, None, fixed_tiles,
                         merge_vector_chain)
        pypto.set_vec_tile_shapes(min(vec_rows, group), head_dim)
        o, _ = finish(pypto, *state)
        pypto.assemble(pypto.cast(o, dt), [b * heads + kvh * group, 0], out)

    @pypto.frontend.jit(pass_options={name: dict(pairs) for name, pairs in pass_options})
    def paged_attention_kernel(
        q: pypto.Tensor([batch * heads, head_dim], dt),
        k_cache: pypto.Tensor([slots, width], dt),
        v_cache: pypto.Tensor([slots, width], dt),
        block_table: pypto.Tensor([batch, max_blocks], pypto.DT_INT32),
        seq_lens: pypto.Tensor([batch], pypto.DT_INT32),
        out: pypto.Tensor([batch * heads, head_dim], dt),
        scale: float,
    ):
        for b in pypto.loop(batch, name="LOOP_B", idx_name="b"):
            seq_len = seq_lens[b]
            for kvh in pypto.loop(kv_heads, name="LOOP_KVH", idx_name="kvh"):
                sequence_head(q, k_cache, v_cache, block_table, out, scale, b, kvh, seq_len)

    return paged_attention_kernel
