"""MoE expert gating (AT-15, skeleton SK-12: one vector stage) as a PyPTO kernel.

Per block of token rows (``loop_unroll`` over the dynamic token axis): cast the
router logits to fp32, score them (softmax or sigmoid), add the correction bias for
the choice, drop all but the best groups, take the top k, gather the unbiased
scores and renormalise / scale them (``ptogym.atoms.gating``).  Vector tiles hold
whole rows of E experts (a row's top k needs all of them in one tile).  No torch here.
"""
from ptogym.atoms.gating import (FP32_PER_BLOCK, drop_groups, group_penalties, group_scores, reduction_tile,
                                 router_scores, sort_width, topk_ub_bytes, topk_weights)
from ptogym.atoms.signature import optional_input
from ptogym.ops.inplace_add_rms_norm.kernel import UB_BYTES, vec_tile_rows
from ptogym.tune.space import Param, Tuning, token_band

UNROLL = (128, 32, 8, 1)  # rows per block
TILE_ROWS = 32  # rows per vector tile: a [32, 256] fp32 op's two operands and result take 96 KiB of UB
MAX_TILE_ROWS = 128
# The group stage's [rows, G, E/G] tile sorts at most this many scores, each group padded to
# 32: real pypto 0.2.0 fails larger ones on some group widths (MACHINE "#data.valid: Index out
# of bounds"; e.g. 1440 experts in 8 groups compile at 4 rows, not 8; 384 in 32 at 8, not 16).
GROUP_SORT_ELEMENTS = 8192
SCORINGS = ("softmax", "sigmoid")

#: Build kwargs of other configurations, simulated side by side by the benchmarks.
VARIANTS = {
    # upstream's GLM-4.5 select_experts: one token per loop iteration, the group stage on
    # [rows, G, E / G] tiles (flat_groups=False, as models/glm_v4_5/glm_select_experts.py)
    "upstream": {"unroll": (1,), "tile_rows": 1, "flat_groups": False},
}


def widest_tile_rows(experts: int, num_groups: int = 1, top_k: int = 8) -> int:
    """The most rows, a power of two up to 128, whose tiles all fit: E fp32 scores under
    the vector ops (``vec_tile_rows``), pypto's topk sort of them, and with groups its
    sorts of [rows, G, E / G] and of the group scores (``topk_ub_bytes``); 0 where not one
    row fits (groups of a few experts each pad to 32 in the sort)."""
    widest = vec_tile_rows(reduction_tile(experts), max_rows=MAX_TILE_ROWS)
    group = experts // num_groups

    def fits(rows):
        sorts = [(rows, experts, top_k)]
        if num_groups > 1:
            sorts += [(rows * num_groups, group, 2), (rows, num_groups, num_groups)]
        return rows <= widest and all(topk_ub_bytes(*sort) <= UB_BYTES for sort in sorts)

    rows = MAX_TILE_ROWS
    while rows and not fits(rows):
        rows //= 2
    return rows


def group_tile_rows(rows: int, num_groups: int, group_size: int) -> int:
    """The group stage's rows: ``rows`` halved until its tile sorts at most
    GROUP_SORT_ELEMENTS scores (at least one row)."""
    for _ in range(rows.bit_length()):  # (no while in kernel code: pypto's parser has none)
        if rows == 1 or rows * num_groups * sort_width(group_size) <= GROUP_SORT_ELEMENTS:
            break
        rows //= 2
    return rows


def _tile_rows(shape) -> tuple:
    """Powers of two up to ``widest_tile_rows``."""
    widest = widest_tile_rows(shape["experts"], shape["num_groups"], shape["top_k"])
    return tuple(rows for rows in (TILE_ROWS, 1, 2, 4, 8, 16, 64, 128) if rows <= widest)


def _bands(tokens: int, experts: int, num_groups: int, top_k: int) -> tuple:
    """The token band, then that band narrowed to the router shapes whose tiles hold the
    same widest power of two of rows (a winner at 64 experts said nothing about 256:
    measured 7.4x slower there)."""
    band = token_band(tokens)
    return band, f"{band}/tile_rows<={widest_tile_rows(experts, num_groups, top_k)}"


#: what ``ptogym tune`` may change (``ptogym.tune.space``); the values the operator runs
#: are in ``tuned.json`` beside this file, per token band
TUNING = Tuning(
    params={
        "unroll": Param((UNROLL, (256, 64, 16, 4, 1), (64, 16, 4, 1), (32, 8, 1), (16, 4, 1), (8, 1), (1,))),
        "tile_rows": Param(_tile_rows),
        "flat_groups": Param((True, False)),
    },
    band=_bands,
    plain=VARIANTS["upstream"],
)


def build(pypto, *, experts: int, top_k: int, dtype: str, scoring: str = "softmax", num_groups: int = 1,
          topk_groups: int = 1, has_bias: bool = False, renormalize: bool = True, scaling: float = 1.0,
          unroll=UNROLL, tile_rows=TILE_ROWS, flat_groups=False):
    """Kernel(logits, weights, ids, bias): logits [rows, experts] of ``dtype``; weights
    [rows, top_k] fp32 and ids [rows, top_k] int32 written; bias [1, experts] fp32 when
    has_bias (the only case that reads it), else None.  ``tile_rows`` is capped at
    ``widest_tile_rows`` (the default's 32 rows of 1000 experts would not fit);
    ``flat_groups``: the group stage's layout (``atoms.gating.group_scores``)."""
    if scoring not in SCORINGS:
        raise ValueError(f"scoring: {scoring!r} is not one of {SCORINGS}")
    dt = getattr(pypto, dtype)
    group_size = experts // num_groups
    widest = widest_tile_rows(experts, num_groups, top_k)
    if not widest:
        raise ValueError(f"num_groups: {num_groups} groups of {group_size} experts: one token's tiles exceed UB")
    if num_groups > 1 and group_size % FP32_PER_BLOCK:
        # groups of a width that is no 32-byte multiple: blocks of one tile (real pypto 0.2.0
        # fails blocks of several, MACHINE "#data.valid: Index out of bounds": 1644 experts in
        # 2 groups at 33 tokens compiles in 8-row blocks, not in 32- or 16-row ones)
        unroll = [min(size, tile_rows, widest) for size in unroll]
    sizes = sorted(set(unroll) | {1}, reverse=True)

    def gate_block(logits, bias, weights_out, ids_out, row, size):
        rows = min(size, tile_rows, widest)
        group_rows = group_tile_rows(rows, num_groups, group_size)
        pypto.set_vec_tile_shapes(rows, reduction_tile(experts))
        tile = pypto.view(logits, [size, experts], [row, 0])
        scores = router_scores(pypto, tile if dtype == "DT_FP32" else pypto.cast(tile, pypto.DT_FP32), scoring)
        choice = pypto.add(scores, bias) if has_bias else scores
        if num_groups > 1:
            if flat_groups:  # the [rows * G, E / G] ops' tile, then the [rows, G] ones'
                pypto.set_vec_tile_shapes(group_rows * num_groups, reduction_tile(group_size))
                scores_of_groups = group_scores(pypto, choice, num_groups)
                pypto.set_vec_tile_shapes(group_rows, reduction_tile(num_groups))
                penalties = group_penalties(pypto, scores_of_groups, topk_groups)
                pypto.set_vec_tile_shapes(group_rows * num_groups, reduction_tile(group_size))
            else:
                pypto.set_vec_tile_shapes(group_rows, num_groups, reduction_tile(group_size))
                penalties = group_penalties(pypto, group_scores(pypto, choice, num_groups, False), topk_groups)
            choice = drop_groups(pypto, choice, penalties, flat_groups)
            pypto.set_vec_tile_shapes(rows, reduction_tile(experts))
        _, ids = pypto.topk(choice, top_k, -1, True)
        # Without a bias the kept experts' choice scores are their scores bit for bit (+0):
        # gathered from there, because real pypto 0.2.0 fails (MACHINE "#data.valid: Index
        # out of bounds") to gather from a tensor the group stage also reshaped to 3-D.
        unbiased = choice if num_groups > 1 and not has_bias else scores
        pypto.assemble(topk_weights(pypto, unbiased, ids, renormalize, scaling), [row, 0], weights_out)
        pypto.assemble(ids, [row, 0], ids_out)

    @pypto.frontend.jit()
    def moe_gating_topk_kernel(
        logits: pypto.Tensor([pypto.DYNAMIC, experts], dt),
        weights_out: pypto.Tensor([pypto.DYNAMIC, top_k], pypto.DT_FP32),
        ids_out: pypto.Tensor([pypto.DYNAMIC, top_k], pypto.DT_INT32),
        bias: optional_input(pypto, has_bias, [1, experts], pypto.DT_FP32),
    ):
        for row, size in pypto.loop_unroll(0, logits.shape[0], 1, name="LOOP_TOKENS", idx_name="row",
                                           unroll_list=sizes):
            gate_block(logits, bias, weights_out, ids_out, row, size)

    return moe_gating_topk_kernel
