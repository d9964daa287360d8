"""AT-15 expert gating on tiles: router logits -> (top-k weights, top-k expert ids).

    scores  = softmax(logits) | sigmoid(logits)                    fp32
    choice  = scores + correction_bias                             (selection only)
    groups  : each of G groups scored by the sum of its two largest choice scores;
              the topk_groups best groups stay, the others' experts drop out
    ids     = top-k of choice (descending; ties as the backend's topk breaks them)
    weights = scores[ids] (unbiased), / their sum when renormalising, * scaling

Softmax is exp(x - rowmax) / rowsum.  A dropped group's experts are pushed to
``-DROPPED_GROUP_PENALTY`` (Hugging Face fills -inf): the kept experts' choice scores
are unchanged bit for bit, so the selection among them is the same.
"""
FP32_PER_BLOCK = 8  # fp32 elements in 32 bytes
SORT_GROUP = 32  # pypto's bitsort sorts the last axis in whole groups of 32 elements
DROPPED_GROUP_PENALTY = 1e30
RENORM_EPS = 1e-20  # DeepSeek-V3's denominator guard; below one fp32 ulp of any sum of scores >= 1e-12


def reduction_tile(extent: int) -> int:
    """A vector tile's last dim for fp32 rows of ``extent`` reduced along that axis: pypto
    refuses a reduction under a last tile dim that is not 32-byte aligned (FC1001, C-TILE-09),
    and clamps a larger one to the extent, so ``extent`` rounded up to 8."""
    return -(-extent // FP32_PER_BLOCK) * FP32_PER_BLOCK


def sort_width(extent: int) -> int:
    """The sorted axis as pypto's bitsort pads it: whole groups of 32."""
    return -(-extent // SORT_GROUP) * SORT_GROUP


def topk_ub_bytes(lead: int, extent: int, k: int) -> int:
    """The UB bytes pypto's topk holds at once on a tile of ``lead`` rows (its leading dims
    multiplied) of ``extent`` fp32: the input, the bitsort's (value, index) pairs over
    ``extent`` rounded up to 32, one scratch row of those and a [lead, k] result, rows in
    whole 32-byte blocks (the interpreter's C-TILE-03 for topk; probes topk_bitsort_*)."""
    padded = sort_width(extent)
    return 4 * (lead * reduction_tile(extent) + 2 * lead * padded + 2 * padded + lead * reduction_tile(k))


def router_scores(pypto, logits_fp32, scoring):
    """[rows, E] fp32 -> [rows, E] fp32 probabilities (softmax) or sigmoids."""
    if scoring == "sigmoid":
        return pypto.sigmoid(logits_fp32)
    shifted = pypto.exp(pypto.sub(logits_fp32, pypto.amax(logits_fp32, -1, keepdim=True)))
    return pypto.div(shifted, pypto.sum(shifted, -1, keepdim=True))


def group_scores(pypto, choice, num_groups, flat=True):
    """[rows, E] -> [rows, G]: per group of E / G consecutive experts, the sum of its two largest.

    ``flat``: the groups as the rows of [rows * G, E / G], their sums made a row by a
    transpose.  Otherwise (upstream's layout) as [rows, G, E / G], whose [rows, G, 1] sums
    pypto reshapes to [rows, G] through GM (under its cost model a copy out and one in,
    ~1700 cycles: 24% of a one-token DeepSeek-V3 router)."""
    rows, experts = choice.shape
    size = experts // num_groups
    if flat:
        top_two, _ = pypto.topk(pypto.reshape(choice, [rows * num_groups, size]), 2, -1, True)
        column = pypto.sum(top_two, -1, keepdim=True)
        return pypto.reshape(pypto.transpose(column, 0, 1), [rows, num_groups])
    top_two, _ = pypto.topk(pypto.reshape(choice, [rows, num_groups, size]), 2, -1, True)
    return pypto.sum(top_two, -1)


def group_penalties(pypto, scores_of_groups, topk_groups):
    """[rows, G] group scores -> [rows, G]: 0 for the ``topk_groups`` best groups,
    -DROPPED_GROUP_PENALTY for the others."""
    rows, num_groups = scores_of_groups.shape
    _, kept = pypto.topk(scores_of_groups, topk_groups, -1, True)
    keep = pypto.scatter_(pypto.full([rows, num_groups], 0.0, pypto.DT_FP32), 1, kept, 1.0)
    return pypto.mul(pypto.sub(keep, 1.0), DROPPED_GROUP_PENALTY)


def drop_groups(pypto, choice, penalties, flat=True):
    """choice [rows, E] plus each group's penalty (``group_penalties``) on its experts (a
    kept expert's score + 0 is itself); ``flat`` as in ``group_scores`` (the penalties a
    column by a transpose, not a [rows, G, 1] unsqueeze, which pypto moves through GM)."""
    rows, experts = choice.shape
    num_groups = penalties.shape[-1]
    size = experts // num_groups
    if flat:
        column = pypto.transpose(pypto.reshape(penalties, [1, rows * num_groups]), 0, 1)
        masked = pypto.add(pypto.reshape(choice, [rows * num_groups, size]), column)
    else:
        masked = pypto.add(pypto.reshape(choice, [rows, num_groups, size]), pypto.unsqueeze(penalties, -1))
    return pypto.reshape(masked, [rows, experts])


def topk_weights(pypto, scores, ids, renormalize, scaling):
    """scores [rows, E] fp32 gathered at ids [rows, k], renormalised and scaled."""
    weights = pypto.gather(scores, 1, ids)
    if renormalize:
        weights = pypto.div(weights, pypto.add(pypto.sum(weights, -1, keepdim=True), RENORM_EPS))
    if scaling != 1.0:
        weights = pypto.mul(weights, scaling)
    return weights
