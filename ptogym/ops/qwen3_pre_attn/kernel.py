"""Qwen3 pre-attention as one PyPTO kernel (SK-03 V->C, then SK-05's V phase).

Per block of tokens (all maths fp32 inside, each stage rounded to the input dtype as
the model's bf16 modules do):

    residual  <- hidden + residual                       in place (AT-03's add)
    normed     = RMSNorm(residual) * input_gamma         AT-03   (vector)
    q, k, v    = normed @ w_qkv[q|k|v rows]^T            AT-09   (cube, three matmuls)
    q, k       = RMSNorm per head * q/k_norm_gamma        AT-03   (vector, [tokens, heads, D])
    q, k       = RoPE, half layout, cos/sin [T, D]        AT-04   (vector)
    k_cache[slot], v_cache[slot] = k, v                   AT-16   (scatter_update)
    q_out      = q

Tokens are one dynamic axis walked with ``loop_unroll`` over the tuned table's ``unroll``
block sizes (``UNROLL``; ``TUNING`` below is what ``ptogym tune`` may change).
The caches are 2-D [slots, kv_heads * D] views; the scatter moves the update back
into the cache parameters themselves.  A batch with padding slots (negative, as in
``ptogym.ops.cache_scatter``) uses the ``kv_rows_out`` form, which returns the k/v
rows for a cache_scatter launch instead (``build``'s docstring).  ``residual`` is passed twice, as input and as
the ``residual_out`` output at the same address: every block reads its rows before
it writes them (as InplaceAddRmsNorm).

No torch here: ``build`` receives the ``pypto`` namespace.
"""
from ptogym.atoms.cache_scatter import scatter_rows
from ptogym.atoms.linear import cube_tile_shapes, cube_tile_violations, linear
from ptogym.atoms.rms_norm import rms_norm
from ptogym.atoms.rope import rope
from ptogym.atoms.signature import optional_input
from ptogym.tune.space import Param, Tuning, token_band

UB_BYTES = 192 * 1024
SUM_BUFFER_BYTES = 64 * 1024
FP32_BYTES = 4
WIDEST_OP_TILES = 3  # an fp32 binary op: two operands and the result in UB
UNROLL = (128, 16, 4, 1)  # a block of 128 streams the weights once for T = 128

#: Build kwargs of other configurations, simulated side by side by the benchmarks.
VARIANTS = {
    # upstream pypto-gym qwen3_pre_attn_fused: blocks of 8 tokens, cube tiles [8, 8], [128, 512], [128, 128]
    "upstream": {"unroll": (8,), "cube_fixed": ((8, 8), (128, 512), (128, 128))},
}


def block_sizes(unroll) -> list:
    """The token blocks of the kernel's loop, largest first (1 for the ragged tail)."""
    return sorted(set(unroll) | {1}, reverse=True)


def _tiles_fit(params, shape):
    """pypto's cube tile rules (``cube_tile_violations``) for the QKV projection's tiles
    (``cube_tile_shapes``, as the kernel sets them) at every block size."""
    for tokens in block_sizes(params["unroll"]):
        tiles = cube_tile_shapes(tokens, shape["hidden"], shape["q_width"], 2, fixed=params["cube_fixed"])
        if problems := cube_tile_violations(tiles, 2):
            return f"cube tiles for {tokens}-token blocks {tiles}: {'; '.join(problems)}"
    return None


#: what ``ptogym tune`` may change (``ptogym.tune.space``); the values the operator runs
#: are in ``tuned.json`` beside this file, per token band
TUNING = Tuning(
    params={
        "unroll": Param((UNROLL, (256, 128, 16, 4, 1), (64, 16, 4, 1), (32, 8, 1), (16, 4, 1),
                         VARIANTS["upstream"]["unroll"])),
        "cube_fixed": Param((None, VARIANTS["upstream"]["cube_fixed"])),
    },
    band=lambda tokens, hidden, q_width: (token_band(tokens),),
    constraints=(_tiles_fit,),
    plain=VARIANTS["upstream"],
)


def vec_rows(width: int, limit: int) -> int:
    """Rows of ``width`` fp32 elements per vector tile: within pypto.sum's buffer and,
    for the widest op, the UB; at most ``limit``."""
    row_bytes = width * FP32_BYTES
    return max(1, min(limit, SUM_BUFFER_BYTES // row_bytes, UB_BYTES // (WIDEST_OP_TILES * row_bytes)))


def build(pypto, *, hidden: int, heads: int, kv_heads: int, head_dim: int, dtype: str, index_dtype: str,
          unroll=UNROLL, cube_fixed=None, kv_rows_out: bool = False):
    """The jit kernel: kernel(hidden, residual, input_gamma, w_qkv, q_norm_gamma, k_norm_gamma, cos, sin,
    k_cache, v_cache, residual_out, q_out, index, eps); input_gamma [1, H], index [T, 1], caches
    [slots, kv_heads * head_dim]; the head gammas come repeated per head, [1, heads, head_dim]
    (pypto broadcasts along one axis only: [1, 1, D] against [tokens, heads, D] does not compile).

    ``kv_rows_out`` (batches with padding slots): k_cache and v_cache are [T, kv_heads *
    head_dim] outputs that receive every token's k and v rows at the token's own row
    (index is None: not read), and the operator writes the kept ones into the caches with
    ``ptogym.ops.cache_scatter`` (pypto has no row-wise conditional write, and a
    dynamic-T staging workspace inside the kernel is not allowed)."""
    dt, index_dt = getattr(pypto, dtype), getattr(pypto, index_dtype)
    q_width, kv_width = heads * head_dim, kv_heads * head_dim
    unroll_list = block_sizes(unroll)

    def front_block(hidden_states, residual, input_gamma, w_qkv, q_norm_gamma, k_norm_gamma, cos, sin,
                    residual_out, q_out, eps, token, count):
        """Everything of one token block up to the cache write; returns its k and v rows
        [count, kv_width]."""
        # V: residual add + input RMSNorm
        pypto.set_semantic_label("add-rmsnorm")
        pypto.set_vec_tile_shapes(vec_rows(hidden, count), hidden)
        added = pypto.add(pypto.cast(pypto.view(hidden_states, [count, hidden], [token, 0]), pypto.DT_FP32),
                          pypto.cast(pypto.view(residual, [count, hidden], [token, 0]), pypto.DT_FP32))
        new_residual = pypto.cast(added, dt)
        pypto.assemble(new_residual, [token, 0], residual_out)
        normed, _ = rms_norm(pypto, new_residual, eps, gamma=input_gamma)
        normed = pypto.cast(normed, dt)

        # C: QKV projection, one matmul per part of w_qkv
        pypto.set_semantic_label("qkv-linear")
        pypto.set_cube_tile_shapes(*cube_tile_shapes(count, hidden, q_width, 2, fixed=cube_fixed))
        q = linear(pypto, normed, pypto.view(w_qkv, [q_width, hidden], [0, 0]), dt)
        k = linear(pypto, normed, pypto.view(w_qkv, [kv_width, hidden], [q_width, 0]), dt)
        v = linear(pypto, normed, pypto.view(w_qkv, [kv_width, hidden], [q_width + kv_width, 0]), dt)

        # V: per-head RMSNorm and RoPE of q and k
        pypto.set_semantic_label("qk-norm-rope")
        rows = vec_rows(q_width, count)
        pypto.set_vec_tile_shapes(rows, head_dim)
        cos_rows = pypto.cast(pypto.view(cos, [count, head_dim], [token, 0]), pypto.DT_FP32)
        sin_rows = pypto.cast(pypto.view(sin, [count, head_dim], [token, 0]), pypto.DT_FP32)
        cos_rows = pypto.reshape(cos_rows, [count, 1, head_dim])
        sin_rows = pypto.reshape(sin_rows, [count, 1, head_dim])
        pypto.set_vec_tile_shapes(rows, heads, head_dim)
        q_heads = pypto.reshape(q, [count, heads, head_dim])
        q_heads = pypto.cast(rms_norm(pypto, q_heads, eps, gamma=q_norm_gamma)[0], dt)
        q_heads = pypto.cast(rope(pypto, q_heads, cos_rows, sin_rows, "half"), dt)
        pypto.assemble(q_heads, [token, 0, 0], q_out)
        pypto.set_vec_tile_shapes(rows, kv_heads, head_dim)
        k_heads = pypto.reshape(k, [count, kv_heads, head_dim])
        k_heads = pypto.cast(rms_norm(pypto, k_heads, eps, gamma=k_norm_gamma)[0], dt)
        k_heads = pypto.cast(rope(pypto, k_heads, cos_rows, sin_rows, "half"), dt)
        return pypto.reshape(k_heads, [count, kv_width]), v

    def scatter_into_caches(index, k_cache, v_cache, k_rows, v_rows, token, count):
        """k and v rows of the block into their cache slots (AT-16)."""
        pypto.set_semantic_label("kv-cache-scatter")
        pypto.set_vec_tile_shapes(vec_rows(kv_width, count), kv_width)
        slots = pypto.view(index, [count, 1], [token, 0])
        scatter_rows(pypto, k_cache, slots, k_rows)
        scatter_rows(pypto, v_cache, slots, v_rows)

    def rows_out(index, k_out, v_out, k_rows, v_rows, token, count):
        """k and v rows of the block at the block's own rows of [T, kv_width] outputs."""
        pypto.set_semantic_label("kv-rows-out")
        pypto.set_vec_tile_shapes(vec_rows(kv_width, count), kv_width)
        pypto.assemble(k_rows, [token, 0], k_out)
        pypto.assemble(v_rows, [token, 0], v_out)

    write_kv = rows_out if kv_rows_out else scatter_into_caches  # chosen while building (pypto's parser has no
    #                                                              `if` on a Python value)

    @pypto.frontend.jit()
    def qwen3_pre_attn_kernel(
        hidden_states: pypto.Tensor([pypto.DYNAMIC, hidden], dt),
        residual: pypto.Tensor([pypto.DYNAMIC, hidden], dt),
        input_gamma: pypto.Tensor([1, hidden], dt),
        w_qkv: pypto.Tensor([q_width + 2 * kv_width, hidden], dt),
        q_norm_gamma: pypto.Tensor([1, heads, head_dim], dt),
        k_norm_gamma: pypto.Tensor([1, kv_heads, head_dim], dt),
        cos: pypto.Tensor([pypto.DYNAMIC, head_dim], dt),
        sin: pypto.Tensor([pypto.DYNAMIC, head_dim], dt),
        k_cache: pypto.Tensor([pypto.DYNAMIC, kv_width], dt),
        v_cache: pypto.Tensor([pypto.DYNAMIC, kv_width], dt),
        residual_out: pypto.Tensor([pypto.DYNAMIC, hidden], dt),
        q_out: pypto.Tensor([pypto.DYNAMIC, heads, head_dim], dt),
        index: optional_input(pypto, not kv_rows_out, [pypto.DYNAMIC, 1], index_dt),
        eps: float,
    ):
        for token, count in pypto.loop_unroll(0, hidden_states.shape[0], 1, name="LOOP_TOKENS",
                                              idx_name="token", unroll_list=unroll_list):
            k_rows, v_rows = front_block(hidden_states, residual, input_gamma, w_qkv, q_norm_gamma, k_norm_gamma,
                                         cos, sin, residual_out, q_out, eps, token, count)
            write_kv(index, k_cache, v_cache, k_rows, v_rows, token, count)

    return qwen3_pre_attn_kernel
