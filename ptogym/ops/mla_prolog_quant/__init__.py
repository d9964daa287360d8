"""DeepSeek-V4 MLA prolog, quantised (AT-11 on the q path): see README.md, op.py (API), golden.py (torch).
The kernel is ptogym/ops/mla_prolog/kernel.py built with quant=True."""
