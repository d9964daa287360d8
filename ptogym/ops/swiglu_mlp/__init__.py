"""SwiGLU MLP (AT-07, SK-06): y = (silu(x W_gate^T) * x W_up^T) W_down^T in one kernel, bf16/fp16."""
