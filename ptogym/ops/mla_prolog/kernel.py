# ptogym: noqa OL01 the jit entry is made by pypto.frontend.jit(...) with the caller's runtime options, not a decorator
"""DeepSeek-V4 MLA prolog as one PyPTO kernel (SK-04: C -> V -> C -> V, AT-10 twice).

Per block of tokens x [tokens, H] (fp32 inside every norm, results rounded to the input
dtype at the points upstream rounds them):

    qr = RMSNorm(x @ wq_a) * gamma_cq                      AT-10: cube, then AT-03 (vector)
    q  = RMSNorm_per_head(qr @ wq_b)  [tokens, heads, D]   AT-10 again, no gamma
    kv = RMSNorm(x @ wkv) * gamma_ckv                      AT-10 on the kv branch
    q[..., D-R:], kv[..., D-R:] = interleaved RoPE          AT-04 (ptogym.atoms.rope)

The norms are upstream's variant B (``rsqrt_mode="sqrt_div"``: 1 / sqrt(mean + eps)).
The weights are K-major as upstream passes them (wq_a [H, q_lora_rank], wq_b
[q_lora_rank, heads * D], wkv [H, D]), so the matmuls run without b_trans: the
``ptogym.atoms.linear`` atom is written for torch's [N, K] layout and is not used here.
The interleaved rotation is one matmul with the constant signed permutation
``rotation`` [R, R] (exact; see ptogym/atoms/rope.py).

Tokens are one dynamic axis walked with ``loop_unroll`` over the tuned table's ``unroll``
(``UNROLL``; ``TUNING`` below is what ``ptogym tune`` may change).

No torch here: ``build`` receives the ``pypto`` namespace.
"""
from ptogym.atoms.jit_options import jit_pass_options
from ptogym.atoms.linear import (INT8_PREFILL_PASS_OPTIONS, INT8_PREFILL_TOKENS, L0C_BYTES, L1_BYTES,
                                 block_tile_shapes, cube_tile_shapes, cube_tile_violations)
from ptogym.atoms.quant import dequant, per_token_quant
from ptogym.atoms.rms_norm import rms_norm
from ptogym.atoms.rope import rope, rotation_cube_tiles
from ptogym.tune.space import Param, Tuning

UB_BYTES = 192 * 1024
SUM_BUFFER_BYTES = 64 * 1024
FP32_BYTES = 4
WIDEST_OP_TILES = 3
# Token blocks, largest first.  A block streams the weights once, so prefill wants big
# blocks: cost model, V4 shapes, T=1024: 64-token blocks 2231 us, 128: 1381, 256: 1001,
# 512: 807, 1024: 707 (each m tile of 128 rows shares the block's weight tile loads).
# The largest factors cost only compile time (every factor is compiled; ~2 min at V4).
UNROLL = (1024, 512, 256, 128, 64, 16, 4, 1)
#: Token rows of a multi-head RoPE vector tile.  At 128-token blocks and more, pypto 0.2.0's
#: cost model fails on a [64 tokens, 4 heads, 64] fp32 rope tile (H=256, 4 heads of 128:
#: "Errcode FFFFFF", ParseInput.cpp:378, opSequenceAfterOOO 39 != tileOps 36); [32, 4, 64]
#: passes, as do the V4 shapes' [4, 64, 64].  The single-head kv rope keeps whole-block rows
#: (capping it at 32 costs 707 -> 913 us at T=1024).
ROPE_TILE_TOKENS = 32
DEQUANT_TILE = 4096  # columns of the [tokens, heads * D] fp32 dequant tile (upstream's (4, 4096))

#: Cube tiles: ``ptogym.atoms.linear.block_tile_shapes``, the rule the ``linear`` operator
#: measured (long L1 k tiles: few, large GM -> L1 copies; N spread over the 24 cube cores).
#: Cost model, V4 shapes, against the former per-matmul ``cube_tile_shapes`` (k 256/512-1024,
#: n0 64 for q_a and kv, 512 for q_b): T=1 98.5 -> 75.1 us, T=16 114.9 -> 96.3 (q_a and kv
#: alone: 104.1), T=128 168.1 -> 161.8, T=1024 707.0 -> 653.2.
#: The int8 q_b of the quantised kernel keeps k 256 with k1 up to 4 k0 and n0 up to 1024
#: (half the bytes of a bf16 tile; T=1 32 tasks instead of 64: 81.5 -> 78.8 us): the long-k
#: rule's tiles (whole K = 1024 in L1) and n0 = 2048 or 24 tasks' 1376 / 1408 / 1536
#: columns fail pypto's parser (Errcode FFFFFF).
INT8_Q_B_TILES = (256, 1024, 4)  # (k_tile, n_tile cap, k1 depth in k0 blocks)
#: Heads per vector tile of the quantised kernel's per-head RMSNorm (the sum buffer allows
#: 32 of 512): smaller tiles make more vector tasks in the tail after q_b.  Cost model, V4:
#: T=1 90.0 -> 81.5 us (8 or 4 heads; 16: 87.3), T=128 167.0 -> 144.8 (4: 148.2),
#: T=1024 616.5 -> 574.3.  Not in the bf16 kernel: T=1 98.5 -> 94.5 but T=16 114.9 -> 129.2.
HEAD_TILE_HEADS = 8

#: Pass options per call, read by the operators from the tuned table's token bands (pypto
#: reads pass options once per jit, so one kernel cannot switch them per token block).
#: ``cube_nbuffer_setting`` merges same-structure cube tasks into one (fewer tasks, each
#: paying ~3.5 us of dispatch gap on its core, but less parallelism); its keys are pypto
#: 0.2.0's "hashorder" ids of the groups of same-structure cube subgraphs, numbered per
#: token block's function (-1: every group not named).  Measured by which key halves which
#: stage's task count: in a 128-token block group 4 is q_b's tiles and group 5 the q RoPE
#: rotation's; in blocks of up to 16 tokens group 2 is q_b's.  Merging everything
#: ({-1: 2}) also pairs q_a's and kv's tasks, which then run on 8 of the 24 cube cores
#: (q_a ends at 33.9 us instead of 18.5 at T=128, int8) - hence per-group settings; the
#: group ids are pinned by tests/test_mla_prolog_cube_groups.py (slow, real pypto).
#: ``INT8_PREFILL_PASS_OPTIONS`` (``ptogym.atoms.linear``) lets a 1024-token block's m
#: tiles share their int8 q_b weight tile loads.  Cost model, V4 shapes, us:
#:   bf16, {-1: 2}:               T=1 75.1 -> 93.8, T=16 96.3 -> 110.7, T=128 161.8 -> 147.9,
#:                                T=1024 653.2 -> 569.9 (cube_l1_reuse 2: 708.8)
#:   bf16, T=128, per group:      {4: 2} 136.2, {4: 4} 131.1, {4: 4, 5: 2} 127.5, {4: 4, 5: 4}
#:                                131.3 (others unmerged); T=1 / 16 {2: 2} 94.7 / 111.8
#:   int8, {-1: 2}:               T=1 73.8 -> 66.1, T=16 88.5 -> 84.6, T=128 137.5 -> 131.1
#:                                (with cube_l1_reuse 2 too: 162.0; {-1: 3} 149.8, 4 156.5),
#:                                T=1024 576.3 -> 541.5 (cube_l1_reuse 2: 519.0, both: 532.7)
#:   int8, T=128, per group:      {4: 2} 119.7, {4: 4} 114.2, {4: 8} 117.9, {4: 2, 5: 2} 115.8,
#:                                {4: 4, 5: 2} 110.8, {4: 4, 5: 4} 112.8; T=1024 with the
#:                                prefill option: {4: 4, 5: 2} 577.7, {5: 2} 519.0
#:   int8, T=1 / 16, per group:   {2: 2} 65.2 / 81.8, {2: 4} 83.6 / 98.3, {2: 2, -1: 2}
#:                                66.1 / 84.6
#: vec_nbuffer_setting {-1: 2} / {-1: 4}: int8 T=128 141.2 / 144.1 (before the groups).
#: The tuned table (``tuned.json``) keeps the per-group settings for the token counts whose
#: largest block is one measured (blocks of up to 16 tokens; 128); counts between keep {-1: 2}.
ALL_CUBE_PAIRS = ("cube_nbuffer_setting", ((-1, 2),))
Q_B_CUBE_GROUP_128, Q_ROPE_CUBE_GROUP_128, Q_B_CUBE_GROUP_16 = 4, 5, 2
BLOCK_128_CUBE_GROUPS = ("cube_nbuffer_setting", ((Q_B_CUBE_GROUP_128, 4), (Q_ROPE_CUBE_GROUP_128, 2), (-1, 1)))
SMALL_INT8_CUBE_GROUPS = ("cube_nbuffer_setting", ((Q_B_CUBE_GROUP_16, 2), (-1, 1)))
#: Token counts at which the tuned table's bands start: where the largest block of ``UNROLL``
#: changes the cube groups' numbering (64, 128, 256) and where int8 prefill begins.
BAND_STARTS = (64, 128, 256, INT8_PREFILL_TOKENS)


#: Build kwargs of other configurations, simulated side by side by the benchmarks.
VARIANTS = {
    # upstream models/deepseek_v4/mla_prolog_v4_impl.py with its test's eager configuration:
    # unroll [128, 64, 32, 16, 1], cube m tiles of 32 and its (k, n) tiles per matmul,
    # stitch_function_max_num 128 (max_workspace_kb dropped: the simulator has no such limit)
    "upstream": {"unroll": (128, 64, 32, 16, 1), "cube_m": 32,
                 "cube_kn": (("wq_a", ((512, 512), (64, 64))), ("wq_b", ((128, 128), (256, 256))),
                             ("wkv", ((256, 256), (128, 128)))),
                 "runtime_options": (("stitch_function_max_num", 128),)},
}

#: The same for the quantised kernel (``quant=True``).
QUANT_VARIANTS = {
    # upstream models/deepseek_v4/mla_prolog_quant_v4_impl.py (MLAPrologQuant) as its test runs it:
    # unroll [128, 64, 32, 16, 1], cube m = the block's rows up to 128, its (k, n) tiles per
    # matmul (wkv with enable_split_k), runtime stitch_function_max_num 128 and device_sched_mode 1,
    # pass vec_nbuffer_setting {-1: 2} (max_workspace_kb dropped).  Not reproduced: its q_a
    # matmul is two K halves of 2048 summed, and its own vector tile shapes.
    "upstream": {"unroll": (128, 64, 32, 16, 1),
                 "cube_kn": (("wq_a", ((256, 256), (128, 128))), ("wq_b", ((128, 1024, 512), (256, 256))),
                             ("wkv", ((256, 512), (128, 128), True))),
                 "runtime_options": (("stitch_function_max_num", 128), ("device_sched_mode", 1)),
                 "pass_options": (("vec_nbuffer_setting", ((-1, 2),)),)},
}


def fixed_cube_tiles(kn_tiles, tokens: int, cube_m=None) -> list:
    """``set_cube_tile_shapes`` arguments of a variant's (k, n) tiles, ((k0, k1[, k1b]), (n0,
    n1)[, enable_split_k]), for a block of ``tokens``: m is ``cube_m``, else the block's rows
    up to 128 (upstream's tile_bs)."""
    m = cube_m or min(tokens, 128)
    k_tiles, n_tiles, *split_k = kn_tiles
    return [[m, m], list(k_tiles), list(n_tiles), *split_k]


def block_sizes(unroll) -> list:
    """The token blocks of the kernel's loop, largest first (1 for the ragged tail)."""
    return sorted(set(unroll) | {1}, reverse=True)


def _band(tokens, quant):
    """A precision class (int8 q_b or not), then its token range (``BAND_STARTS``)."""
    precision = "int8" if quant else "half"
    start = next((start for start in BAND_STARTS if tokens < start), None)
    tokens_band = f"tokens<{start}" if start is not None else f"tokens>={BAND_STARTS[-1]}"
    return precision, f"{precision}/{tokens_band}"


def _fixed_tiles_fit(params, shape):
    """pypto's cube tile rules (``cube_tile_violations``) for a variant's fixed (k, n) tiles
    at every block size (wq_b's elements are int8 in the quantised kernel)."""
    for stage, kn_tiles in params.get("cube_kn") or ():
        element_bytes = 1 if shape["quant"] and stage == "wq_b" else 2
        for tokens in block_sizes(params["unroll"]):
            tiles = fixed_cube_tiles(kn_tiles, tokens, params.get("cube_m"))[:3]
            if problems := cube_tile_violations(tiles, element_bytes):
                return f"cube_kn: {stage} tiles for {tokens}-token blocks {tiles}: {'; '.join(problems)}"
    return None


#: what ``ptogym tune`` may change (``ptogym.tune.space``), for this kernel and the quantised
#: one; the values the operators run are in ``tuned.json`` beside this file, per precision
#: class and token range
TUNING = Tuning(
    params={
        "unroll": Param((UNROLL, (512, 256, 128, 64, 16, 4, 1), (256, 128, 64, 16, 4, 1), (128, 64, 16, 4, 1),
                         VARIANTS["upstream"]["unroll"], (64, 16, 4, 1), (16, 4, 1))),
        "pass_options": Param(((), (ALL_CUBE_PAIRS,), (BLOCK_128_CUBE_GROUPS,), (SMALL_INT8_CUBE_GROUPS,),
                               INT8_PREFILL_PASS_OPTIONS, (ALL_CUBE_PAIRS, *INT8_PREFILL_PASS_OPTIONS),
                               QUANT_VARIANTS["upstream"]["pass_options"])),
        "cube_kn": Param((None, VARIANTS["upstream"]["cube_kn"], QUANT_VARIANTS["upstream"]["cube_kn"])),
        "cube_m": Param((None, 32, 16, 64), when=lambda params: params.get("cube_kn") is not None),
        "runtime_options": Param((None, VARIANTS["upstream"]["runtime_options"],
                                  QUANT_VARIANTS["upstream"]["runtime_options"])),
    },
    band=_band,
    constraints=(_fixed_tiles_fit,),
    plain=VARIANTS["upstream"],
)


def vec_tile(tokens: int, heads: int, width: int) -> list:
    """[tokens, heads] of a vector tile over [tokens, heads, width] fp32 data: within
    pypto.sum's buffer and, for the widest op, the UB."""
    budget = min(SUM_BUFFER_BYTES // (FP32_BYTES * width), UB_BYTES // (WIDEST_OP_TILES * FP32_BYTES * width))
    if budget >= heads:
        return [max(1, min(tokens, budget // heads)), heads]
    return [1, max(1, budget)]


def build(pypto, *, hidden: int, q_lora_rank: int, heads: int, head_dim: int, rope_dim: int, dtype: str,
          quant: bool = False, unroll=UNROLL, cube_m=None, cube_kn=None, runtime_options=None, pass_options=None):
    """The jit kernel: kernel(x, wq_a, wq_b, wkv, gamma_cq, gamma_ckv, cos, sin, rotation,
    q_out, kv_out, qr_out, eps); gammas are [1, n] rows.

    quant=True builds the MLAPrologQuant kernel (AT-11 on the q path, see
    ptogym/ops/mla_prolog_quant): wq_b int8 and its per-channel scale [1, heads * D]
    fp32 follow rotation, qr_out is int8 and qr_scale_out [T, 1] fp32 follows it;
    q_a and kv accumulate into fp32 and stay fp32 up to their norms."""
    dt = getattr(pypto, dtype)
    acc_dt = pypto.DT_FP32 if quant else dt  # what the q_a / kv projections produce
    width = heads * head_dim
    nope = head_dim - rope_dim
    unroll_list = block_sizes(unroll)
    fixed_kn = dict(cube_kn or ())
    weight_shape = {"wq_a": (hidden, q_lora_rank), "wq_b": (q_lora_rank, width), "wkv": (hidden, head_dim)}

    def set_cube_tiles(stage, tokens, element_bytes=2):
        k, n = weight_shape[stage]
        if stage in fixed_kn:
            pypto.set_cube_tile_shapes(*fixed_cube_tiles(fixed_kn[stage], tokens, cube_m))
            return
        if element_bytes == 2:
            pypto.set_cube_tile_shapes(*block_tile_shapes(tokens, k, n, element_bytes))
            return
        m = min(128, -(-tokens // 16) * 16)  # the int8 q_b
        k_tile, n_cap, depth = INT8_Q_B_TILES
        m_tiles, k_tiles, n_tiles = cube_tile_shapes(tokens, k, n, element_bytes, k_tile=k_tile,
                                                     n_tile=min(n_cap, L0C_BYTES // (4 * m)))
        deep = min(k, depth * k_tiles[0])
        if deep % k_tiles[0] == 0 and (m + n_tiles[0]) * deep * element_bytes <= L1_BYTES:
            k_tiles = [k_tiles[0], deep]
        pypto.set_cube_tile_shapes(m_tiles, k_tiles, n_tiles)

    def rope_rows(part, tokens, width_heads, cos_rows, sin_rows, rotation):
        """Interleaved RoPE of part [tokens, width_heads, R] (input dtype) -> input dtype."""
        m, k, n = rotation_cube_tiles(tokens * width_heads, rope_dim)
        pypto.set_cube_tile_shapes(m, k, n)
        rows = tokens if width_heads == 1 else min(tokens, ROPE_TILE_TOKENS)
        tile = vec_tile(rows, width_heads, rope_dim)
        pypto.set_vec_tile_shapes(tile[0], tile[1], rope_dim)
        return pypto.cast(rope(pypto, part, cos_rows, sin_rows, "interleave", rotation), dt)

    def q_b_projection(qr_fp32, wq_b, wq_b_scale, qr_out, qr_scale_out, token, count):
        """qr (fp32 after the norm) -> qr_out (and qr_scale_out) and the q_b projection."""
        if not quant:
            qr = pypto.cast(qr_fp32, dt)
            pypto.assemble(qr, [token, 0], qr_out)
            pypto.set_semantic_label("wqb-linear")
            set_cube_tiles("wq_b", count)
            return pypto.matmul(qr, wq_b, dt)
        qr_int8, qr_scale = per_token_quant(pypto, qr_fp32)  # AT-05
        pypto.assemble(qr_int8, [token, 0], qr_out)
        pypto.assemble(qr_scale, [token, 0], qr_scale_out)
        pypto.set_semantic_label("wqb-linear-int8")
        set_cube_tiles("wq_b", count, element_bytes=1)
        acc = pypto.matmul(qr_int8, wq_b, pypto.DT_INT32)
        columns = min(width, DEQUANT_TILE)
        pypto.set_vec_tile_shapes(vec_tile(count, 1, columns)[0], columns)
        return dequant(pypto, acc, qr_scale, wq_b_scale, pypto.DT_FP32)  # AT-06, fp32 into the head norm

    def prolog_block(x, wq_a, wq_b, wkv, gamma_cq, gamma_ckv, cos, sin, rotation, wq_b_scale,
                     q_out, kv_out, qr_out, qr_scale_out, eps, token, count):
        """One block of ``count`` tokens from ``token`` (module docstring)."""
        x_rows = pypto.view(x, [count, hidden], [token, 0])
        rows_q = vec_tile(count, 1, q_lora_rank)[0]
        pypto.set_vec_tile_shapes(rows_q, rope_dim)
        cos_rows = pypto.cast(pypto.view(cos, [count, rope_dim], [token, 0]), pypto.DT_FP32)
        sin_rows = pypto.cast(pypto.view(sin, [count, rope_dim], [token, 0]), pypto.DT_FP32)
        cos_rows = pypto.reshape(cos_rows, [count, 1, rope_dim])
        sin_rows = pypto.reshape(sin_rows, [count, 1, rope_dim])

        # q_a projection + RMSNorm * gamma_cq -> qr
        pypto.set_semantic_label("wqa-linear")
        set_cube_tiles("wq_a", count)
        q_a = pypto.matmul(x_rows, wq_a, acc_dt)
        pypto.set_semantic_label("q-rmsnorm")
        pypto.set_vec_tile_shapes(rows_q, q_lora_rank)
        qr_fp32 = rms_norm(pypto, q_a, eps, gamma=gamma_cq, rsqrt_mode="sqrt_div")[0]
        q_b = q_b_projection(qr_fp32, wq_b, wq_b_scale, qr_out, qr_scale_out, token, count)

        # per-head RMSNorm, RoPE on each head's last R elements
        q_b = pypto.reshape(q_b, [count, heads, head_dim])
        pypto.set_semantic_label("q-head-rmsnorm-rope")
        rows, width_heads = vec_tile(count, heads, head_dim)
        pypto.set_vec_tile_shapes(rows, min(width_heads, HEAD_TILE_HEADS) if quant else width_heads, head_dim)
        q = pypto.cast(rms_norm(pypto, q_b, eps, rsqrt_mode="sqrt_div")[0], dt)
        pypto.assemble(pypto.clone(pypto.view(q, [count, heads, nope], [0, 0, 0])), [token, 0, 0], q_out)
        q_rope = rope_rows(pypto.view(q, [count, heads, rope_dim], [0, 0, nope]), count, heads,
                           cos_rows, sin_rows, rotation)
        pypto.assemble(q_rope, [token, 0, nope], q_out)

        # kv projection + RMSNorm * gamma_ckv, RoPE on the last R elements
        pypto.set_semantic_label("wkv-linear")
        set_cube_tiles("wkv", count)
        kv_a = pypto.matmul(x_rows, wkv, acc_dt)
        pypto.set_semantic_label("kv-rmsnorm-rope")
        pypto.set_vec_tile_shapes(vec_tile(count, 1, head_dim)[0], head_dim)
        kv = pypto.cast(rms_norm(pypto, kv_a, eps, gamma=gamma_ckv, rsqrt_mode="sqrt_div")[0], dt)
        pypto.assemble(pypto.clone(pypto.view(kv, [count, nope], [0, 0])), [token, 0], kv_out)
        kv_rope = pypto.reshape(pypto.view(kv, [count, rope_dim], [0, nope]), [count, 1, rope_dim])
        kv_rope = rope_rows(kv_rope, count, 1, cos_rows, sin_rows, rotation)
        pypto.assemble(pypto.reshape(kv_rope, [count, rope_dim]), [token, nope], kv_out)

    jit = pypto.frontend.jit(runtime_options=dict(runtime_options or ()),
                             pass_options=jit_pass_options(pass_options))
    if quant:
        @jit
        def mla_prolog_quant_kernel(
            x: pypto.Tensor([pypto.DYNAMIC, hidden], dt),
            wq_a: pypto.Tensor([hidden, q_lora_rank], dt),
            wq_b: pypto.Tensor([q_lora_rank, width], pypto.DT_INT8),
            wkv: pypto.Tensor([hidden, head_dim], dt),
            gamma_cq: pypto.Tensor([1, q_lora_rank], dt),
            gamma_ckv: pypto.Tensor([1, head_dim], dt),
            cos: pypto.Tensor([pypto.DYNAMIC, rope_dim], dt),
            sin: pypto.Tensor([pypto.DYNAMIC, rope_dim], dt),
            rotation: pypto.Tensor([rope_dim, rope_dim], dt),
            wq_b_scale: pypto.Tensor([1, width], pypto.DT_FP32),
            q_out: pypto.Tensor([pypto.DYNAMIC, heads, head_dim], dt),
            kv_out: pypto.Tensor([pypto.DYNAMIC, head_dim], dt),
            qr_out: pypto.Tensor([pypto.DYNAMIC, q_lora_rank], pypto.DT_INT8),
            qr_scale_out: pypto.Tensor([pypto.DYNAMIC, 1], pypto.DT_FP32),
            eps: float,
        ):
            pypto.experimental.set_operation_options(combine_axis=True)
            for token, count in pypto.loop_unroll(0, x.shape[0], 1, name="MLA_TOKENS", idx_name="token",
                                                  unroll_list=unroll_list):
                prolog_block(x, wq_a, wq_b, wkv, gamma_cq, gamma_ckv, cos, sin, rotation, wq_b_scale,
                             q_out, kv_out, qr_out, qr_scale_out, eps, token, count)

        return mla_prolog_quant_kernel

    @jit
    def mla_prolog_kernel(
        x: pypto.Tensor([pypto.DYNAMIC, hidden], dt),
        wq_a: pypto.Tensor([hidden, q_lora_rank], dt),
        wq_b: pypto.Tensor([q_lora_rank, width], dt),
        wkv: pypto.Tensor([hidden, head_dim], dt),
        gamma_cq: pypto.Tensor([1, q_lora_rank], dt),
        gamma_ckv: pypto.Tensor([1, head_dim], dt),
        cos: pypto.Tensor([pypto.DYNAMIC, rope_dim], dt),
        sin: pypto.Tensor([pypto.DYNAMIC, rope_dim], dt),
        rotation: pypto.Tensor([rope_dim, rope_dim], dt),
        q_out: pypto.Tensor([pypto.DYNAMIC, heads, head_dim], dt),
        kv_out: pypto.Tensor([pypto.DYNAMIC, head_dim], dt),
        qr_out: pypto.Tensor([pypto.DYNAMIC, q_lora_rank], dt),
        eps: float,
    ):
        pypto.experimental.set_operation_options(combine_axis=True)
        for token, count in pypto.loop_unroll(0, x.shape[0], 1, name="MLA_TOKENS", idx_name="token",
                                              unroll_list=unroll_list):
            prolog_block(x, wq_a, wq_b, wkv, gamma_cq, gamma_ckv, cos, sin, rotation, None,
                         q_out, kv_out, qr_out, None, eps, token, count)

    return mla_prolog_kernel
