"""Paged decode attention (SK-01 over AT-17): the kernel against an fp64 reference written
here (keys found slot by slot through the block table) and torch's SDPA, on ragged
lengths, GQA ratios 1/4/8, one-key sequences, long sequences with a partial last block,
shuffled and strided block tables with garbage past each length; caches written by
cache_scatter; the caches stay unchanged; torch.library; errors."""
import json
import math
from pathlib import Path

import pytest
import torch

import ptogym.ops
from ptogym.ops.paged_attention import kernel
from ptogym.ops.paged_attention.golden import paged_attention_golden
from ptogym.ops.paged_attention.op import paged_attention, table_shape
from ptogym.tune.table import override, tuned_params
from ptogym.verify import detailed_tensor_compare

TOL = {torch.bfloat16: 8e-3, torch.float16: 2e-3}


def make(batch, heads, kv_heads, head_dim, block_size, seq_lens, spare_blocks=3, dtype=torch.bfloat16, seed=0,
         garbage=-1):
    """Random q and caches; each sequence's blocks drawn at random (shuffled) from a pool
    with spare blocks; block-table entries past a sequence's blocks hold ``garbage``."""
    g = torch.Generator().manual_seed(seed)
    needed = [math.ceil(n / block_size) for n in seq_lens]
    max_blocks = max(needed) + 1
    num_blocks = sum(needed) + spare_blocks
    q = torch.randn(batch, heads, head_dim, generator=g).to(dtype)
    k_cache, v_cache = (torch.randn(num_blocks, block_size, kv_heads, head_dim, generator=g).to(dtype)
                        for _ in range(2))
    table = torch.full((batch, max_blocks), garbage, dtype=torch.int32)
    pool = torch.randperm(num_blocks, generator=g)
    start = 0
    for b, count in enumerate(needed):
        table[b, :count] = pool[start:start + count]
        start += count
    return q, k_cache, v_cache, table, torch.tensor(seq_lens, dtype=torch.int32)


def kernel_shape(q, k_cache, v_cache, block_table, seq_lens):
    """The shape a call of these inputs passes to the tuned table."""
    return table_shape(q.shape, k_cache.shape, block_table.shape)


def reference_fp64(q, k_cache, v_cache, block_table, seq_lens, scale):
    """Each sequence's keys read slot by slot: key t is slot block_table[b, t // bs] * bs + t % bs."""
    block_size, kv_heads = k_cache.shape[1], k_cache.shape[2]
    k_slots, v_slots = (c.reshape(-1, kv_heads, c.shape[-1]).double() for c in (k_cache, v_cache))
    out = torch.zeros(q.shape, dtype=torch.float64)
    group = q.shape[1] // kv_heads
    for b in range(q.shape[0]):
        slots = [int(block_table[b, t // block_size]) * block_size + t % block_size for t in range(int(seq_lens[b]))]
        for h in range(q.shape[1]):
            keys, values = k_slots[slots, h // group], v_slots[slots, h // group]
            p = torch.softmax(keys @ q[b, h].double() * scale, dim=0)
            out[b, h] = p @ values
    return out


def sdpa_reference(q, k_cache, v_cache, block_table, seq_lens, scale):
    rows = []
    for b in range(q.shape[0]):
        n = int(seq_lens[b])
        blocks = block_table[b, :math.ceil(n / k_cache.shape[1])].long()
        k, v = (c[blocks].reshape(-1, *c.shape[2:])[:n].double().transpose(0, 1) for c in (k_cache, v_cache))
        rows.append(torch.nn.functional.scaled_dot_product_attention(
            q[b].double()[:, None], k, v, scale=scale, enable_gqa=True)[:, 0])
    return torch.stack(rows)


def assert_close(name, actual, expected, tol):
    result = detailed_tensor_compare(actual, expected, name, rtol=tol, atol=tol)
    assert result.all_close, result.report()


MATRIX = [  # batch, Hq, Hkv, D, block_size, seq_lens, dtype
    (2, 4, 4, 128, 128, [1, 128], torch.bfloat16),            # ratio 1: one key; exactly one whole block
    (3, 16, 4, 128, 128, [300, 5, 1000], torch.bfloat16),     # ratio 4, ragged, partial last blocks
    (2, 8, 1, 64, 16, [17, 250], torch.float16),              # ratio 8 (MQA), small blocks
    (1, 8, 1, 128, 128, [4100], torch.bfloat16),              # long: 33 blocks, the last with 4 keys
    (2, 4, 2, 256, 32, [33, 64], torch.bfloat16),             # D = 256
]


@pytest.mark.parametrize("batch, heads, kv_heads, head_dim, block_size, seq_lens, dtype", MATRIX)
def test_matches_fp64_and_sdpa_caches_unchanged(batch, heads, kv_heads, head_dim, block_size, seq_lens, dtype):
    args = make(batch, heads, kv_heads, head_dim, block_size, seq_lens, dtype=dtype, seed=sum(seq_lens))
    before = [t.clone() for t in args]
    out = paged_attention(*args)
    assert all(torch.equal(a, b) for a, b in zip(before, args)), "an input changed"
    assert out.dtype == dtype and out.shape == args[0].shape
    scale = head_dim ** -0.5
    assert_close("out", out, reference_fp64(*args, scale), TOL[dtype])
    assert_close("out_vs_sdpa", out, sdpa_reference(*args, scale), TOL[dtype])


@pytest.mark.parametrize("kv_splits", [2, 5, 16])
@pytest.mark.parametrize("batch, heads, kv_heads, head_dim, block_size, seq_lens, dtype", MATRIX[1:4])
def test_split_kv_matches_fp64(kv_splits, batch, heads, kv_heads, head_dim, block_size, seq_lens, dtype):
    """Split-KV: each sequence's blocks in ``kv_splits`` runs, merged after; more splits than
    a sequence has blocks leaves empty ones (the 1- and 5-key sequences), which weigh 0."""
    args = make(batch, heads, kv_heads, head_dim, block_size, seq_lens, dtype=dtype, seed=sum(seq_lens))
    with override(kernel, {"kv_splits": kv_splits}):
        out = paged_attention(*args, backend="interp")
    assert_close("out", out, reference_fp64(*args, head_dim ** -0.5), TOL[dtype])


@pytest.mark.parametrize("gather_blocks", [False, True])
@pytest.mark.parametrize("kv_splits", [0, 5])
@pytest.mark.parametrize("blocks_per_step", [2, 3, 4, 32])
@pytest.mark.parametrize("batch, heads, kv_heads, head_dim, block_size, seq_lens, dtype", MATRIX[1:4])
def test_blocks_per_step_matches_fp64(blocks_per_step, kv_splits, gather_blocks, batch, heads, kv_heads, head_dim,
                                      block_size, seq_lens, dtype):
    """Several whole blocks a step: a run's whole blocks in groups of P, the rest (the partial
    last block among them) one a step; runs of fewer than P whole blocks have no group.
    Gathered: each group copied into one tile first (one matmul each, not P)."""
    args = make(batch, heads, kv_heads, head_dim, block_size, seq_lens, dtype=dtype, seed=sum(seq_lens))
    with override(kernel, {"kv_splits": kv_splits, "blocks_per_step": blocks_per_step,
                           "gather_blocks": gather_blocks, "step_cascade": 0}):
        out = paged_attention(*args, backend="interp")
    assert_close("out", out, reference_fp64(*args, head_dim ** -0.5), TOL[dtype])


@pytest.mark.parametrize("gather_blocks", [False, True])
@pytest.mark.parametrize("kv_splits", [0, 3])
@pytest.mark.parametrize("blocks_per_step, step_cascade", [(16, 2), (16, 4), (32, 2), (3, 2)])
def test_step_cascade_matches_fp64(blocks_per_step, step_cascade, kv_splits, gather_blocks):
    """The whole blocks left after the groups of P in groups of P / c, P / c², ...: 31 whole
    blocks and a partial one at P = 16, c = 2 are steps of 16, 8, 4, 2, 1 block and the
    partial one; 16 whole blocks are one step; 15 keys none; P = 3 has no smaller group."""
    seq_lens = [31 * 16 + 5, 16 * 16, 15, 7 * 16]
    args = make(4, 8, 2, 64, 16, seq_lens, dtype=torch.float16, seed=7)
    with override(kernel, {"kv_splits": kv_splits, "blocks_per_step": blocks_per_step, "step_cascade": step_cascade,
                           "gather_blocks": gather_blocks, "vector_step": False}):
        out = paged_attention(*args, backend="interp")
    assert_close("out", out, reference_fp64(*args, 64 ** -0.5), TOL[torch.float16])


@pytest.mark.parametrize("kv_splits, blocks_per_step", [(0, 1), (3, 2)])
@pytest.mark.parametrize("kv_head_span", [2, 8])
@pytest.mark.parametrize("batch, heads, kv_heads, head_dim, block_size, seq_lens, dtype",
                         [MATRIX[1], MATRIX[4], (2, 16, 8, 64, 16, [70, 9], torch.float16)])
def test_kv_head_span_matches_fp64(kv_head_span, kv_splits, blocks_per_step, batch, heads, kv_heads, head_dim,
                                   block_size, seq_lens, dtype):
    """Several kv heads a task (their query heads block-diagonal against the block's kv
    heads side by side): a span larger than Hkv takes its gcd with Hkv (8 on 4 heads: 4;
    on 2 heads: 2)."""
    args = make(batch, heads, kv_heads, head_dim, block_size, seq_lens, dtype=dtype, seed=sum(seq_lens) + kv_heads)
    with override(kernel, {"kv_head_span": kv_head_span, "kv_splits": kv_splits, "blocks_per_step": blocks_per_step}):
        out = paged_attention(*args, backend="interp")
    assert_close("out", out, reference_fp64(*args, head_dim ** -0.5), TOL[dtype])


@pytest.mark.parametrize("kv_splits, blocks_per_step", [(0, 1), (0, 2), (3, 2)])
@pytest.mark.parametrize("vec_rows", [32, 128])
@pytest.mark.parametrize("batch, heads, kv_heads, head_dim, block_size, seq_lens, dtype",
                         [MATRIX[0], MATRIX[1], MATRIX[2], MATRIX[4], (3, 8, 8, 64, 16, [1, 17, 300], torch.float16)])
def test_vector_step_matches_fp64(vec_rows, kv_splits, blocks_per_step, batch, heads, kv_heads, head_dim, block_size,
                                  seq_lens, dtype):
    """Both products on the vector unit (row sums of K * q, column sums of V * p), per query
    row of the group, with splits, grouped whole blocks and partial last blocks; with single
    blocks and no split the chain is one loop whose first step starts the state itself
    (no fills) and whose last writes the output (pypto.cond branches), one-block
    sequences (both in one step) included."""
    args = make(batch, heads, kv_heads, head_dim, block_size, seq_lens, dtype=dtype, seed=sum(seq_lens) + 7)
    with override(kernel, {"vector_step": True, "vec_rows": vec_rows, "kv_head_span": 1, "kv_splits": kv_splits,
                           "blocks_per_step": blocks_per_step}):
        out = paged_attention(*args, backend="interp")
    assert_close("out", out, reference_fp64(*args, head_dim ** -0.5), TOL[dtype])


@pytest.mark.parametrize("batch, kv_len, group, block_size, head_dim, kv_heads, vector", [
    (2, 512, 1, 128, 128, 8, True), (1, 1024, 1, 128, 64, 8, True), (16, 1024, 1, 128, 128, 1, True),
    (2, 512, 4, 128, 128, 2, False), (2, 2048, 1, 128, 128, 8, False), (17, 512, 1, 128, 128, 8, False),
    (2, 512, 1, 16, 64, 8, False), (2, 512, 1, 256, 128, 8, False), (2, 512, 1, 128, 256, 8, False),
    (16, 1024, 1, 128, 128, 8, False), (8, 1024, 1, 128, 64, 8, False), (16, 1024, 1, 128, 128, 16, False)])
def test_table_takes_the_vector_step_only_where_it_was_measured_faster(batch, kv_len, group, block_size, head_dim,
                                                                        kv_heads, vector):
    """Group 1, <= 16 tokens, <= 1024 keys, 128-key blocks of D 64 or 128, at most 16
    (sequence, kv head) pairs; with more, 8 kv heads a task on the cube, merged (README: Measured)."""
    params = tuned_params(kernel, batch=batch, kv_len=kv_len, group=group, block_size=block_size, head_dim=head_dim,
                          kv_heads=kv_heads)
    assert params["vector_step"] is vector
    assert params["step_cascade"] == (0 if vector else 2)  # the cascade slows the vector step (README: Measured)
    if batch <= 16 < batch * kv_heads and group == 1 and block_size == 128 and head_dim <= 128 and kv_len <= 1024:
        assert (params["kv_head_span"], params["cube_nbuffer"], params["vec_nbuffer"]) == (8, 4, 4)
    assert not kernel.TUNING.violations(params, {})


@pytest.mark.parametrize("batch, kv_heads, head_dim, seq_lens", [
    (16, 8, 128, [1, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 660, 720, 780, 840, 900]),
    (8, 8, 64, [5, 100, 250, 400, 530, 700, 810, 900])])
def test_many_group_one_pairs_band_matches_fp64(batch, kv_heads, head_dim, seq_lens):
    """The band that takes group-1 batches off the vector step (8 kv heads a task, merged)
    computes the right numbers."""
    args = make(batch, kv_heads, kv_heads, head_dim, 128, seq_lens, seed=batch)
    assert not tuned_params(kernel, **kernel_shape(*args))["vector_step"]
    assert_close("out", paged_attention(*args, backend="interp"), reference_fp64(*args, head_dim ** -0.5),
                 TOL[torch.bfloat16])


@pytest.mark.pypto
def test_many_group_one_pairs_band_on_pypto_sim():
    """Real pypto compiles that band's schedule (8 kv heads a task, 4 blocks a step,
    isomorphic tasks merged 4/4) and computes the numbers (24 pairs, ragged lengths)."""
    pytest.importorskip("pypto")
    from ptogym.backends._pypto_worker import stop_workers

    args = make(3, 8, 8, 64, 128, [40, 7, 130], seed=3)
    params = tuned_params(kernel, **kernel_shape(*args))
    assert (params["vector_step"], params["kv_head_span"], params["cube_nbuffer"]) == (False, 8, 4)
    try:
        out = paged_attention(*args, backend="pypto-sim")
    finally:
        stop_workers()
    assert_close("out", out, reference_fp64(*args, 64 ** -0.5), TOL[torch.bfloat16])


def test_vector_step_needs_one_kv_head_a_task():
    assert kernel.TUNING.violations({"vector_step": True, "kv_head_span": 2}, {}) == [
        "vector_step: needs kv_head_span 1, not 2"]
    args = make(1, 8, 2, 64, 16, [20])
    with override(kernel, {"vector_step": True, "kv_head_span": 2}), pytest.raises(ValueError, match="kv_head_span"):
        paged_attention(*args, backend="interp")


def test_step_tiles_are_legal_for_every_span_width():
    """The wide operands of several kv heads a task (up to 8 x 256) get cube tiles pypto
    accepts, whatever the rows and keys (a fuzz found [1024, 1024] k tiles against 16-key
    blocks overflowing L0A)."""
    from ptogym.atoms.linear import cube_tile_violations
    from ptogym.ops.flash_attention.kernel import step_tiles

    for rows in (1, 4, 8, 16, 32, 64, 128, 256):
        for keys in (16, 32, 48, 64, 128, 384, 512, 4096):  # a block, or a gathered step of blocks
            for width in (64, 128, 256, 512, 1024, 2048):
                tiles = step_tiles(rows, keys, width, 32)
                for stage in ("c1", "c2"):
                    assert not cube_tile_violations(tiles[stage], 2), (rows, keys, width, stage, tiles[stage])


def test_the_operator_reads_blocks_in_place_and_only_the_upstream_variant_gathers():
    """Issue #22: blocks are read through views, not gathered by copy instructions - the
    tuner cannot choose gathering and no band of the table does."""
    from ptogym.tune.trial import load_level

    assert "gather_blocks" not in kernel.TUNING.params and kernel.VARIANTS["upstream"]["gather_blocks"]
    levels = json.loads(Path(kernel.__file__).with_name("cases.json").read_text())["levels"]
    for level in levels:
        spec, case, _, _ = load_level("paged_attention", level["id"])
        assert not tuned_params(kernel, **spec.extra["tuning_shape"](case)).get("gather_blocks", False), level["id"]


def test_long_key_bands_merge_isomorphic_tasks_and_short_ones_keep_pypto_defaults():
    """The table merges a step's same-structure tasks (cube_nbuffer, vec_nbuffer) where the
    cost model measured it faster - the long-key levels - and leaves pypto's defaults
    (no cube merge, its own vector merge) where it measured slower (README: Measured);
    the upstream variant runs upstream's own options."""
    from ptogym.tune.trial import load_level

    merged = {}
    for level in ("level0", "level1", "level2", "level3", "b1_s16k", "b16_s4k", "b64_s1k"):
        spec, case, _, _ = load_level("paged_attention", level)
        params = tuned_params(kernel, **spec.extra["tuning_shape"](case))
        merged[level] = (params["cube_nbuffer"], params["vec_nbuffer"])
    assert merged == {"level0": (1, 0), "level1": (1, 0), "level2": (4, 0), "level3": (4, 4), "b1_s16k": (8, 8),
                      "b16_s4k": (16, 8), "b64_s1k": (8, 8)}
    assert (kernel.VARIANTS["upstream"]["cube_nbuffer"], kernel.VARIANTS["upstream"]["vec_nbuffer"]) == (1, 0)


def test_task_merges_reach_pypto_as_its_nbuffer_settings():
    """cube_nbuffer / vec_nbuffer n become the jit's pass options {-1: n} beside the others;
    pypto's defaults (1, 0) add nothing."""
    import types

    seen = []

    def jit(**options):
        seen.append(options["pass_options"])
        return lambda function: function

    fake = types.SimpleNamespace(DT_BF16="bf16", DT_FP32="fp32", DT_INT32="int32", Tensor=lambda *shape_dtype: None,
                                 frontend=types.SimpleNamespace(jit=jit))
    shape = dict(batch=1, heads=8, kv_heads=2, head_dim=64, num_blocks=4, block_size=16, max_blocks=4, dtype="DT_BF16")
    reuse = (("cube_l1_reuse_setting", ((0, 8),)),)
    kernel.build(fake, **shape, pass_options=reuse, cube_nbuffer=16, vec_nbuffer=8)
    kernel.build(fake, **shape, pass_options=reuse)
    assert seen == [{"cube_l1_reuse_setting": {0: 8}, "cube_nbuffer_setting": {-1: 16}, "vec_nbuffer_setting": {-1: 8}},
                    {"cube_l1_reuse_setting": {0: 8}}]


@pytest.mark.parametrize("group, head_dim, kv_heads, tiles", [(8, 64, 1, "wide"), (1, 128, 8, "wide"), (4, 64, 2, None)])
def test_block16_band_takes_the_wide_softmax_tile(group, head_dim, kv_heads, tiles):
    """<= 16 sequences, <= 1024 keys, 16-key blocks: upstream's cube tiles beside a [16, 256]
    softmax tile (README: "The q tile in the step's body"); the group-4 band, several kv
    heads a task, keeps its own tile rule."""
    params = tuned_params(kernel, batch=3, kv_len=320, group=group, block_size=16, head_dim=head_dim,
                          kv_heads=kv_heads)
    expected = kernel.WIDE_SOFTMAX_TILES if tiles == "wide" else None
    assert params["fixed_tiles"] == expected
    assert dict(kernel.WIDE_SOFTMAX_TILES)["v1"] == (16, 256)
    assert dict(kernel.WIDE_SOFTMAX_TILES)["c1"] == dict(kernel.VARIANTS["upstream"]["fixed_tiles"])["c1"]


@pytest.mark.parametrize("batch, block_size, blocks_per_step", [(1, 16, 32), (16, 16, 32), (16, 32, 16), (1, 64, 8),
                                                                 (16, 128, 4)])
def test_table_takes_512_keys_a_step_at_any_block_size(batch, block_size, blocks_per_step):
    """<= 1024 keys: upstream's 512 keys a step for blocks of 16, 32 and 64 keys too, and the
    whole blocks left after them in halving steps (README: Measured)."""
    params = tuned_params(kernel, batch=batch, kv_len=1024, group=8, block_size=block_size, head_dim=64, kv_heads=1)
    assert (params["blocks_per_step"], params["step_cascade"]) == (blocks_per_step, 2)


def _wide_table_call(head_dim, block_size, seq_len, backend):
    """64/8 heads through a block table wider than 1024 keys (the 8-kv-heads-a-task band),
    unused entries -1: (out, the fp64 reference)."""
    q, k_cache, v_cache, table, seq_lens = make(1, 64, 8, head_dim, block_size, [seq_len], seed=head_dim)
    wide = torch.full((1, 1025 // block_size + 1), -1, dtype=torch.int32)
    wide[:, :table.shape[1]] = table
    out = paged_attention(q, k_cache, v_cache, wide, seq_lens, backend=backend)
    return out, reference_fp64(q, k_cache, v_cache, table, seq_lens, head_dim ** -0.5)


@pytest.mark.parametrize("head_dim, block_size", [(128, 16), (256, 32)])
def test_wide_table_on_small_blocks(head_dim, block_size):
    """The wide band also with small blocks (the fuzz's repro: 16-key blocks, 65 table
    columns, one key)."""
    out, expected = _wide_table_call(head_dim, block_size, 1, "interp")
    assert_close("out", out, expected, TOL[torch.bfloat16])


@pytest.mark.pypto
def test_wide_table_on_small_blocks_on_pypto_sim():
    """Real pypto compiles the wide band's tiles on 16-key blocks and computes the numbers."""
    pytest.importorskip("pypto")
    from ptogym.backends._pypto_worker import stop_workers

    try:
        out, expected = _wide_table_call(128, 16, 40, "pypto-sim")
    finally:
        stop_workers()
    assert_close("out", out, expected, TOL[torch.bfloat16])


@pytest.mark.parametrize("blocks_per_step, step_cascade", [(1, 0), (4, 0), (16, 2)])
@pytest.mark.parametrize("garbage", [-1, 2**31 - 1, 0])
def test_entries_past_the_length_are_never_read(garbage, blocks_per_step, step_cascade):
    # 650 keys in 128-key blocks: 5 whole blocks and a partial one; at P = 4 one group of 4, then 2 singles;
    # at P = 16 cascaded no group of 16 or 8, one of 4, then 2 singles
    args = make(2, 8, 2, 128, 128, [650, 7], garbage=garbage)
    with override(kernel, {"blocks_per_step": blocks_per_step, "step_cascade": step_cascade}):
        out = paged_attention(*args)
    assert_close("out", out, reference_fp64(*args, 128 ** -0.5), TOL[torch.bfloat16])


def test_strided_block_table_and_q_custom_scale():
    q, k_cache, v_cache, table, seq_lens = make(3, 8, 2, 64, 16, [40, 1, 90])
    wide = torch.full((3, 2 * table.shape[1]), 99, dtype=torch.int32)
    wide[:, ::2] = table
    strided_q = torch.randn(8, 3, 64).bfloat16().transpose(0, 1)
    out = paged_attention(strided_q, k_cache, v_cache, wide[:, ::2], seq_lens, scale=0.2)
    assert_close("out", out, reference_fp64(strided_q, k_cache, v_cache, table, seq_lens, 0.2), TOL[torch.bfloat16])


def test_attends_over_caches_written_by_cache_scatter():
    """k/v of each sequence written token by token with cache_scatter (slot = block *
    block_size + offset), then attended over; the reference sees the tokens themselves."""
    g = torch.Generator().manual_seed(11)
    batch, heads, kv_heads, head_dim, block_size, num_blocks = 3, 8, 2, 128, 16, 20
    seq_lens = [5, 33, 48]
    table = torch.full((batch, 4), -1, dtype=torch.int32)
    pool = torch.randperm(num_blocks, generator=g)
    k_cache, v_cache = (torch.zeros(num_blocks, block_size, kv_heads, head_dim, dtype=torch.bfloat16)
                        for _ in range(2))
    q = torch.randn(batch, heads, head_dim, generator=g).bfloat16()
    out64 = torch.zeros(q.shape, dtype=torch.float64)
    start = 0
    for b, n in enumerate(seq_lens):
        count = math.ceil(n / block_size)
        table[b, :count] = pool[start:start + count]
        start += count
        k, v = (torch.randn(n, kv_heads, head_dim, generator=g).bfloat16() for _ in range(2))
        slots = torch.tensor([int(table[b, t // block_size]) * block_size + t % block_size for t in range(n)],
                             dtype=torch.int64)
        ptogym.ops.cache_scatter(k_cache.view(-1, kv_heads, head_dim), k, slots)
        ptogym.ops.cache_scatter(v_cache.view(-1, kv_heads, head_dim), v, slots)
        for h in range(heads):
            p = torch.softmax(k[:, h // 4].double() @ q[b, h].double() * head_dim ** -0.5, dim=0)
            out64[b, h] = p @ v[:, h // 4].double()
    caches = [k_cache.clone(), v_cache.clone()]
    out = paged_attention(q, k_cache, v_cache, table, torch.tensor(seq_lens, dtype=torch.int32))
    assert torch.equal(caches[0], k_cache) and torch.equal(caches[1], v_cache)
    assert_close("out", out, out64, TOL[torch.bfloat16])


def test_golden_tracks_fp64():
    args = make(3, 8, 2, 64, 16, [1, 40, 77])
    assert_close("out", paged_attention_golden(*args), reference_fp64(*args, 0.125), TOL[torch.bfloat16])


def test_registry_and_empty_batch():
    args = make(1, 4, 4, 64, 16, [20])
    assert ptogym.ops.paged_attention(*args).shape == args[0].shape
    q, k_cache, v_cache, _, _ = args
    empty = paged_attention(q[:0], k_cache, v_cache, torch.zeros(0, 2, dtype=torch.int32),
                            torch.zeros(0, dtype=torch.int32))
    assert empty.shape == (0, 4, 64)


def test_opcheck():
    args = make(2, 4, 2, 64, 16, [20, 3])
    torch.library.opcheck(torch.ops.ptogym.paged_attention.default, (*args, 0.125))


def test_torch_compile_fullgraph():
    def step(*args):
        return ptogym.ops.paged_attention(*args) * 2

    torch._dynamo.reset()
    args = make(2, 4, 2, 64, 16, [20, 3])
    assert torch.equal(torch.compile(step, fullgraph=True)(*args), step(*args))


def _table(t, b, j, value):
    t = t.clone()
    t[b, j] = value
    return t


BAD_INPUTS = [
    ("q dtype", lambda q, k, v, t, s: (q.float(), k, v, t, s), TypeError, "q: dtype"),
    ("cache dtype", lambda q, k, v, t, s: (q, k.half(), v, t, s), TypeError, "k_cache: dtype"),
    ("table dtype", lambda q, k, v, t, s: (q, k, v, t.long(), s), TypeError, "block_table: dtype"),
    ("lens dtype", lambda q, k, v, t, s: (q, k, v, t, s.long()), TypeError, "seq_lens: dtype"),
    ("q rank", lambda q, k, v, t, s: (q[None], k, v, t, s), ValueError, r"q: needs shape \[B, Hq, D\]"),
    ("cache rank", lambda q, k, v, t, s: (q, k[0], v, t, s), ValueError, "k_cache: needs shape"),
    ("v shape", lambda q, k, v, t, s: (q, k, v[:-1], t, s), ValueError, "v_cache: shape"),
    ("group", lambda q, k, v, t, s: (q[:, :3], k, v, t, s), ValueError, "multiple of Hkv"),
    ("block size", lambda q, k, v, t, s: (q, k[:, :8], v[:, :8], t, s), ValueError, "block_size = 8"),
    ("table batch", lambda q, k, v, t, s: (q, k, v, t[:1], s), ValueError, "block_table: shape"),
    ("lens shape", lambda q, k, v, t, s: (q, k, v, t, s[:1]), ValueError, "seq_lens: shape"),
    ("zero length", lambda q, k, v, t, s: (q, k, v, t, torch.tensor([0, 5], dtype=torch.int32)), ValueError,
     r"seq_lens\[0\] = 0"),
    ("too long", lambda q, k, v, t, s: (q, k, v, t, torch.tensor([20, 10**4], dtype=torch.int32)), ValueError,
     r"seq_lens\[1\] = 10000"),
    ("used entry out of range", lambda q, k, v, t, s: (q, k, v, _table(t, 0, 1, 1000), s), ValueError,
     r"block_table\[0, 1\] = 1000"),
    ("used entry negative", lambda q, k, v, t, s: (q, k, v, _table(t, 1, 0, -1), s), ValueError,
     r"block_table\[1, 0\] = -1"),
    ("strided cache", lambda q, k, v, t, s: (q, k.transpose(0, 1).contiguous().transpose(0, 1), v, t, s),
     ValueError, "k_cache: must be contiguous"),
    ("not a tensor", lambda q, k, v, t, s: (q, k, v, t.tolist(), s), TypeError, "block_table: expected a torch"),
]


@pytest.mark.parametrize("label, corrupt, error, message", BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_is_rejected_untouched(label, corrupt, error, message):
    args = corrupt(*make(2, 4, 2, 64, 16, [20, 3]))
    before = [t.clone() for t in args if isinstance(t, torch.Tensor)]
    with pytest.raises(error, match=message):
        paged_attention(*args)
    assert all(torch.equal(a, b) for a, b in zip(before, [t for t in args if isinstance(t, torch.Tensor)]))


@pytest.mark.parametrize("scale", [float("inf"), 10**400, True])
def test_bad_scale(scale):
    with pytest.raises(ValueError, match="scale: must be a finite"):
        paged_attention(*make(1, 4, 2, 64, 16, [5]), scale=scale)


def test_numpy_scale_is_a_number():
    import numpy as np

    args = make(1, 4, 2, 64, 16, [5])
    out = paged_attention(*args, scale=np.float32(0.25))
    assert_close("out", out, reference_fp64(*args, 0.25), TOL[torch.bfloat16])


def test_case_file_rules():
    import dataclasses

    from ptogym.ops import get_op
    from ptogym.verify.cases import load_cases

    spec = get_op("paged_attention")
    case = next(c for c in load_cases(spec.cases_path, spec) if c.id == "level2")
    assert spec.check_case(dataclasses.replace(case, attrs={"seq_lens": [1, 2]})) == [
        "attrs.seq_lens: [1, 2] must be an int or a list of 3 ints in [1, 320]"]
    assert spec.check_case(dataclasses.replace(case, attrs={"seq_lens": 320})) == [
        "k_cache: 30 blocks < the 60 the sequences need"]


@pytest.mark.pypto
def test_compiles_and_matches_on_pypto_sim():
    """Real pypto: ragged GQA sequences through a shuffled block table compile, simulate
    and compute the numbers."""
    pytest.importorskip("pypto")
    from ptogym.backends._pypto_worker import stop_workers

    args = make(2, 8, 2, 64, 16, [40, 7], seed=4)
    try:
        out = paged_attention(*args, backend="pypto-sim")
        with override(kernel, {"kv_splits": 3}):  # split-KV: runs of one block, empty ones for the 7 keys
            split = paged_attention(*args, backend="pypto-sim")
        with override(kernel, {"kv_splits": 0, "blocks_per_step": 2}):  # 40 keys: a group of 2 blocks, 1 single
            grouped = paged_attention(*args, backend="pypto-sim")
        with override(kernel, {"kv_splits": 0, "blocks_per_step": 2, "gather_blocks": True}):
            gathered = paged_attention(*args, backend="pypto-sim")  # the group copied into one tile first
        with override(kernel, {"kv_splits": 2, "blocks_per_step": 2, "kv_head_span": 2, "fixed_tiles": None,
                               "gather_blocks": True}):
            spanned = paged_attention(*args, backend="pypto-sim")  # both kv heads a task, blocks gathered
        with override(kernel, {"vector_step": True, "vec_rows": 128, "kv_head_span": 1, "blocks_per_step": 2}):
            vector = paged_attention(*args, backend="pypto-sim")  # no cube: both products on the vector unit
        with override(kernel, {"vector_step": True, "vec_rows": 128, "kv_head_span": 1, "blocks_per_step": 1,
                               "kv_splits": 0}):
            one_loop = paged_attention(*args, backend="pypto-sim")  # first / last steps as cond branches
        with override(kernel, {"kv_splits": 0, "blocks_per_step": 4, "step_cascade": 2}):
            cascaded = paged_attention(*args, backend="pypto-sim")  # 40 keys: no group of 4, one of 2, 1 single
        with override(kernel, {"kv_splits": 0, "blocks_per_step": 2,
                               "runtime_options": (("stitch_function_inner_memory", 1000),)}):
            pooled = paged_attention(*args, backend="pypto-sim")  # the long bands' runtime option
        with override(kernel, {"kv_splits": 2, "blocks_per_step": 2, "kv_head_span": 2, "fixed_tiles": None,
                               "cube_nbuffer": 4, "vec_nbuffer": 4}):
            merged = paged_attention(*args, backend="pypto-sim")  # isomorphic tasks merged, 4 a task
    finally:
        stop_workers()
    assert_close("out", out, reference_fp64(*args, 0.125), TOL[torch.bfloat16])
    assert_close("split", split, reference_fp64(*args, 0.125), TOL[torch.bfloat16])
    assert_close("grouped", grouped, reference_fp64(*args, 0.125), TOL[torch.bfloat16])
    assert_close("gathered", gathered, reference_fp64(*args, 0.125), TOL[torch.bfloat16])
    assert_close("spanned", spanned, reference_fp64(*args, 0.125), TOL[torch.bfloat16])
    assert_close("vector", vector, reference_fp64(*args, 0.125), TOL[torch.bfloat16])
    assert_close("one_loop", one_loop, reference_fp64(*args, 0.125), TOL[torch.bfloat16])
    assert_close("cascaded", cascaded, reference_fp64(*args, 0.125), TOL[torch.bfloat16])
    assert_close("pooled", pooled, reference_fp64(*args, 0.125), TOL[torch.bfloat16])
    assert_close("merged", merged, reference_fp64(*args, 0.125), TOL[torch.bfloat16])
