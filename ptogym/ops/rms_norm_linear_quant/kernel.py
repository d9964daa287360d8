# ptogym: noqa OL01 the jit kernel is rms_norm_linear's builder with quant=True (one source for AT-10 and AT-11)
"""RMSNorm + Linear + Quant (pattern AT-11, V -> C -> V): the AT-10 kernel of
``ptogym.ops.rms_norm_linear.kernel`` built with ``quant=True`` (its docstring has
the flow, the numerics and the schedule): fp32 norm, per-token int8 quantisation,
int8 x int8 -> int32 matmul, dequantisation with the per-token and per-channel
scales.  No torch here."""
from ptogym.ops.rms_norm_linear.kernel import TUNING, VARIANTS
from ptogym.ops.rms_norm_linear.kernel import build as build_norm_linear


def build(pypto, **static):
    """Kernel(x, gamma, weight_int8, w_scale, y, eps); see rms_norm_linear.kernel.build."""
    return build_norm_linear(pypto, quant=True, **static)


__all__ = ["build", "TUNING", "VARIANTS"]  # TUNING: rms_norm_linear's table serves both
