"""Routed-expert FFN (SK-07): y[t] = sum_k w[t,k] * SwiGLU-MLP_{id[t,k]}(x[t]), tokens grouped per expert in-kernel."""
