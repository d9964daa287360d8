"""per-token symmetric int8 quantisation (AT-05): x -> (int8, amax/127 scale per row)."""
