# ptogym: noqa OL01 the jit kernel is mla_prolog's builder with quant=True (op.py launches it; one source for both)
"""The quantised MLA prolog's kernel is ``ptogym.ops.mla_prolog.kernel.build`` with
``quant=True`` (its docstring has the flow and the int8 q path).  This module names the
tuning space ``ptogym tune mla_prolog_quant`` searches: the MLA prolog's ``TUNING``,
whose table (``ptogym/ops/mla_prolog/tuned.json``) serves both operators.  No torch here."""
from ptogym.ops.mla_prolog.kernel import TUNING

__all__ = ["TUNING"]
