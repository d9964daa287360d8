"""Independent reference for the routed-expert FFN: plain torch, expert by expert."""
import torch

from ptogym.ops.swiglu_mlp.golden import swiglu_mlp_golden


def moe_experts_golden(x, topk_weights, topk_ids, w_gate, w_up, w_down, compute_dtype=torch.float32):
    """y[t] = sum_k w[t, k] * MLP_{ids[t, k]}(x[t]): each expert's SwiGLU MLP (the
    model's roundings, ``swiglu_mlp_golden``) on the tokens routed to it, weighted in
    ``compute_dtype``, summed over k in ``compute_dtype`` and rounded once to x's dtype."""
    total = torch.zeros(x.shape[0], x.shape[1], dtype=compute_dtype)
    for expert in torch.unique(topk_ids).tolist():
        token, slot = torch.nonzero(topk_ids == expert, as_tuple=True)
        out = swiglu_mlp_golden(x[token], w_gate[expert], w_up[expert], w_down[expert], compute_dtype)
        total.index_add_(0, token, out.to(compute_dtype) * topk_weights[token, slot].to(compute_dtype).unsqueeze(-1))
    return total.to(x.dtype)
