"""fused RMSNorm + per-token int8 quant + W8A8 linear + dequant (AT-11, V->C->V)."""
