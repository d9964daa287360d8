"""AT-07 SwiGLU on tiles: h = silu(gate) * up, rounded as a bf16/fp16 model module rounds.

    gate, up  = x W_gate^T, x W_up^T      (the cube's outputs, already in the model dtype)
    s         = silu(gate) = gate * sigmoid(gate)    fp32, rounded to the model dtype
    h         = fp32(s) * fp32(up)                    fp32, rounded to the model dtype

The two roundings are the ones Hugging Face's bf16 ``act_fn(gate_proj(x)) *
up_proj(x)`` performs (``silu`` and the product each return a bf16 tensor); the
arithmetic itself is fp32, as torch computes a bf16 op.  pypto 0.2.0 has no silu:
``sigmoid`` composes ``1 / (1 + exp(-x))``.
"""
from .rms_norm import to_fp32


def swiglu(pypto, gate, up, out_dtype):
    """gate, up [rows, I] of one float dtype -> h [rows, I] of ``out_dtype``."""
    gate_fp32 = to_fp32(pypto, gate)
    silu = pypto.mul(gate_fp32, pypto.sigmoid(gate_fp32))
    if out_dtype != pypto.DT_FP32:  # the model's silu returns its own dtype
        silu = pypto.cast(pypto.cast(silu, out_dtype), pypto.DT_FP32)
    return pypto.cast(pypto.mul(silu, to_fp32(pypto, up)), out_dtype)


#: the vector unit's budget for the SwiGLU epilogue: fp32 elements per tile such that
#: the widest op (an fp32 binary op: two operands and a result) fits the 192 KiB UB
#: of DAV_2201 with room for the bf16 inputs
SWIGLU_TILE_ELEMENTS = 8192


def swiglu_vec_tile(rows: int, width: int, elements: int = SWIGLU_TILE_ELEMENTS):
    """(tile rows, tile columns) for the epilogue on a [rows, width] block: whole rows
    when they fit (``width`` <= ``elements``), else column strips of a power of two
    (one row); never more rows than the block has."""
    columns = width
    while columns > elements and columns % 2 == 0:
        columns //= 2
    return max(1, min(rows, elements // columns)), columns
