"""Independent reference for the KV-cache scatter: plain torch indexing on a copy."""


def cache_scatter_golden(cache, values, slot_mapping):
    """A new cache with row slot_mapping[t] replaced by values[t] for every slot >= 0."""
    result = cache.clone()
    for token, slot in enumerate(slot_mapping.tolist()):
        if slot >= 0:
            result[slot] = values[token]
    return result
