"""AT-09 linear projection on tiles: y = x @ weight^T (+ bias), weight [N, K] as in torch.

The cube multiplies with ``b_trans=True``, so the weight keeps torch's [N, K] layout;
float operands accumulate in fp32 and round once to ``out_dtype``.  The int8 W8A8
form multiplies int8 x int8 into an exact int32 accumulator and dequantises it
(AT-06) with the per-token activation scale and the per-channel weight scale.
"""
from .quant import dequant


def linear(pypto, x, weight, out_dtype, *, bias=None):
    """x [rows, K] and weight [N, K] of one float dtype; bias [1, N] fp32 or None."""
    if bias is None:
        return pypto.matmul(x, weight, out_dtype, b_trans=True)
    y = pypto.matmul(x, weight, pypto.DT_FP32, b_trans=True)
    return pypto.cast(pypto.add(y, bias), out_dtype)


def linear_w8a8(pypto, x_int8, weight_int8, x_scale, w_scale, out_dtype):
    """x_int8 [rows, K], weight_int8 [N, K], x_scale [rows, 1] fp32, w_scale [1, N] fp32."""
    acc = pypto.matmul(x_int8, weight_int8, pypto.DT_INT32, b_trans=True)
    return dequant(pypto, acc, x_scale, w_scale, out_dtype)
