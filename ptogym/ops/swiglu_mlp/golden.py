"""Independent reference for the SwiGLU MLP: plain torch, the model's roundings."""
import torch


def swiglu_mlp_golden(x, w_gate, w_up, w_down, compute_dtype=torch.float32, round_to=None):
    """y = (silu(x W_gate^T) * (x W_up^T)) W_down^T in ``compute_dtype``; gate, up,
    silu(gate), their product and y are each rounded to ``round_to`` (default x's dtype),
    as a bf16/fp16 Hugging Face module rounds every op's result."""
    round_to = round_to or x.dtype

    def rounded(t):
        return t.to(round_to).to(compute_dtype)

    xc = x.to(compute_dtype)
    gate = rounded(xc @ torch.transpose(w_gate.to(compute_dtype), 0, 1))
    up = rounded(xc @ torch.transpose(w_up.to(compute_dtype), 0, 1))
    h = rounded(rounded(torch.nn.functional.silu(gate)) * up)
    return (h @ torch.transpose(w_down.to(compute_dtype), 0, 1)).to(round_to)
