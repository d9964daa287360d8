"""Independent reference for MoE expert gating: plain torch, Hugging Face's order of steps."""
import torch


def moe_gating_topk_golden(router_logits, top_k, scoring="softmax", num_groups=1, topk_groups=1,
                           correction_bias=None, renormalize=True, routed_scaling_factor=1.0,
                           compute_dtype=torch.float32):
    """(weights [T, k] in compute_dtype, ids [T, k] int32), ids in descending order of
    the choice score; torch.topk breaks ties.  Dropped groups' experts are masked with
    -inf, as Hugging Face's DeepSeek-V3 router does."""
    logits = router_logits.to(compute_dtype)
    scores = torch.softmax(logits, dim=-1) if scoring == "softmax" else torch.sigmoid(logits)
    choice = scores if correction_bias is None else scores + correction_bias.to(compute_dtype)
    if num_groups > 1:
        tokens, experts = choice.shape
        grouped = choice.view(tokens, num_groups, experts // num_groups)
        group_score = grouped.topk(2, dim=-1).values.sum(dim=-1)
        kept = torch.topk(group_score, topk_groups, dim=-1).indices
        keep = torch.zeros_like(group_score, dtype=torch.bool).scatter_(1, kept, True)
        choice = grouped.masked_fill(~keep.unsqueeze(-1), float("-inf")).view(tokens, experts)
    ids = torch.topk(choice, top_k, dim=-1).indices
    weights = scores.gather(1, ids)
    if renormalize:
        weights = weights / (weights.sum(dim=-1, keepdim=True) + 1e-20)
    return weights * routed_scaling_factor, ids.to(torch.int32)
