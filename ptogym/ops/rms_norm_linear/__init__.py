"""fused RMSNorm + linear (AT-10, V->C): bf16 normed rows straight into the cube."""
