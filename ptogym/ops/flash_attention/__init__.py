"""Flash attention, prefill (SK-01): softmax(q k^T * scale [+ causal mask]) v, GQA/MQA, optional lse."""
