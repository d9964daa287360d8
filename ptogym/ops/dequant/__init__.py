"""int32 accumulator -> float (AT-06): y = acc * scale_a * scale_b, per-token and per-channel scales."""
