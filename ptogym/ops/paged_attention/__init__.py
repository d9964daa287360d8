"""Paged decode attention (SK-01 over AT-17): one query token per sequence against its KV blocks read in place through a block table."""
