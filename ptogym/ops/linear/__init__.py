"""linear projection (AT-09): y = x @ W^T (+ bias), bf16/fp16 or int8 W8A8 with fused dequant."""
