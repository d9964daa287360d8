"""AT-16 KV-cache scatter on tiles: rows of a token block written into cache slots.

    cache[index[i]] = rows[i]        for the i-th row of the block

``pypto.scatter_update`` along the row axis (-2) of the 2-D [slots, row] cache; the
result is moved back into the cache parameter, so the update happens in place and
only the block's rows are written.  ``index`` is the block's [tokens, 1] int32/int64
slots, every one in [0, slots) and distinct (the operator checks this on the host:
on the device an out-of-range slot writes outside the cache and duplicate slots race).
"""


def scatter_rows(pypto, cache, index, rows):
    """cache [slots, row] (a kernel parameter), index [tokens, 1], rows [tokens, row] of
    cache's dtype; the vector tile must be set for ``rows``."""
    cache.move(pypto.scatter_update(cache, -2, index, rows))
