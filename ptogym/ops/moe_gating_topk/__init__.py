"""MoE expert gating (AT-15, SK-12): softmax (Qwen3-MoE) or sigmoid + bias + groups (DeepSeek-V3) top-k routing."""
