"""Cube ops: ``matmul`` (2-, 3- or 4-D with batch broadcasting; fp32 accumulation,
int8 -> int32 wrapping like the int32 accumulator; ``extend_params`` bias, dequant
scale, ReLU and TF32 rounding) and the block-scaled fp8 ``scaled_mm``, with the cube
tile checks (C-TILE-05/06, C-API-02)."""
from __future__ import annotations

import builtins
import time

import torch

from .. import runtime
from ..checks import violation
from ..dtypes import DataType
from ..images import converted, derived
from ..platform import platform
from ..tensor import Tensor, note_operand, wrap


# Operand dtype -> the out dtypes pypto 0.2.0 compiles and computes (recorded for every pair:
# fixtures/result_dtypes_compiled_pypto.json; int32/int64 operands fail its passes).
_ANY_OUT = ("DT_FP32", "DT_FP16", "DT_BF16", "DT_INT32")
_MATMUL_OUT = {
    "DT_FP16": _ANY_OUT, "DT_BF16": _ANY_OUT, "DT_FP32": _ANY_OUT, "DT_INT16": _ANY_OUT,
    "DT_INT8": _ANY_OUT,  # int32 accumulator, then converted (measured)
}
_ND_INNER_AXIS_LIMIT = 65535  # pypto: "when input is ND format, inner axis must be less than 65535"


_FRACTAL = 16  # a cube buffer holds whole 16-element blocks along m, k and n


def effective_cube_tile(tile: tuple, extent: int) -> tuple:
    """The (L0, L1) tile pypto uses on an axis of ``extent``: each clamped to the extent
    (its matmul tiling takes ``min(view - offset, tile)``, cube_operation_impl.cpp) and
    rounded up to the 16-element fractal block."""
    def clamp(size):
        return -(-min(size, extent) // _FRACTAL) * _FRACTAL

    return tuple(clamp(size) for size in tile)


def _check_cube(op: str, a: Tensor, b: Tensor, m: int, k: int, n: int) -> None:
    """C-TILE-05: the alignment rules apply to the declared tile (pypto's CheckCubeTiling),
    the capacities to the tile pypto uses, clamped to the operands (measured: probes
    ``tile_cube_l0_*``)."""
    cube = runtime.current().cube_tile
    if cube is None:
        violation("C-TILE-06", f"pypto.{op} before any pypto.set_cube_tile_shapes")
        return
    (m0, m1), (k0, k1, *_), (n0, n1), _ = cube
    prof, nbytes = platform.profile, a.dtype.nbytes
    for axis, l0 in (("nL0", n0), ("kL0", k0)):  # pypto's CheckCubeTiling (measured: int8 with 16 is refused,
        if op == "matmul" and l0 * nbytes % 32:  # probes tile_cube_n_alignment, tile_cube_k_alignment)
            violation("C-TILE-05", f"pypto.{op}: cube tile {axis} {l0} x {nbytes} B ({a.dtype}) = {l0 * nbytes} B is "
                                   f"not 32-byte aligned")
    (em0, em1), (ek0, ek1), (en0, en1) = (effective_cube_tile(t, e) for t, e in (((m0, m1), m), ((k0, k1), k),
                                                                                 ((n0, n1), n)))
    needs = {"L0A": (em0 * ek0 * nbytes, prof.l0a_bytes), "L0B": (ek0 * en0 * nbytes, prof.l0b_bytes),
             "L0C": (em0 * en0 * 4, prof.l0c_bytes), "L1": ((em1 * ek1 + ek1 * en1) * nbytes, prof.l1_bytes)}
    for buffer, (need, have) in needs.items():
        if need > have:
            violation("C-TILE-05", f"pypto.{op}: cube tile m{[m0, m1]} k{[k0, k1]} n{[n0, n1]} on a [{m}, {k}] x "
                                   f"[{k}, {n}] matmul uses m{[em0, em1]} k{[ek0, ek1]} n{[en0, en1]} with "
                                   f"{a.dtype}: {need} B of {buffer} > {have} B")


def _matmul_operands(op: str, input: Tensor, mat2: Tensor, out_dtype: DataType, a_trans: bool, b_trans: bool):
    note_operand(input)
    note_operand(mat2)
    allowed = _MATMUL_OUT.get(input.dtype.name, ())
    if input.dtype is not mat2.dtype or out_dtype.name not in allowed:
        violation("C-API-02", f"pypto.{op}: {input.dtype} x {mat2.dtype} -> {out_dtype}; pairs allowed: "
                              f"{ {k: list(v) for k, v in _MATMUL_OUT.items()} } (same dtype on both sides)")
    if input.dim() != mat2.dim() or input.dim() not in (2, 3, 4):
        violation("C-API-06", f"pypto.{op}: operands must both be 2-, 3- or 4-D, got {input.dim()}-D x {mat2.dim()}-D")
    for operand in (input, mat2):
        inner = operand.data.shape[-1]
        if inner >= _ND_INNER_AXIS_LIMIT:
            violation("C-API-06", f"pypto.{op}: inner (last) axis {inner} of {operand.name or 'an operand'} "
                                  f"{list(operand.data.shape)}; an ND operand's must be < {_ND_INNER_AXIS_LIMIT}")
    a = input.data.transpose(-1, -2) if a_trans else input.data
    b = mat2.data.transpose(-1, -2) if b_trans else mat2.data
    if a.shape[-1] != b.shape[-2]:
        violation("C-API-06", f"pypto.{op}: inner dims differ: {list(a.shape)} x {list(b.shape)} "
                              f"(a_trans={a_trans}, b_trans={b_trans})")
    for x, y in zip(a.shape[:-2], b.shape[:-2]):
        if x != y and 1 not in (x, y):
            violation("C-API-06", f"pypto.{op}: batch dims {list(a.shape[:-2])} and {list(b.shape[:-2])} do not "
                                  f"broadcast")
    _check_cube(op, input, mat2, a.shape[-2], a.shape[-1], b.shape[-1])
    return a, b


def _static_mm_shape(input: Tensor, mat2: Tensor, a_trans: bool, b_trans: bool) -> list:
    sa, sb = list(input._shape), list(mat2._shape)
    m = sa[-1] if a_trans else sa[-2]
    n = sb[-2] if b_trans else sb[-1]
    batch = [y if x == 1 else x for x, y in zip(sa[:-2], sb[:-2])]
    return batch + [m, n]


_EXTEND_KEYS = ("bias_tensor", "scale", "scale_tensor", "relu_type", "trans_mode")


def matmul(input: Tensor, mat2: Tensor, out_dtype: DataType, *, a_trans=False, b_trans=False,
           c_matrix_nz=False, extend_params=None) -> Tensor:
    """Cube matmul: fp16/bf16/fp32 accumulate in fp32 (over K in steps of the cube tile's
    L1 k, as pypto's calculator sums: ``_fp32_product``) and round once to out_dtype;
    int8 x int8 accumulates in int32 (wrapping; with K < 65535 it cannot overflow) and
    converts to out_dtype.  ``extend_params`` (2-D only): ``trans_mode`` rounds fp32
    inputs to TF32 first (the device does; pypto's CPU interpreter ignores it); then
    ``ReLU(A @ B) * scale`` when ``scale`` / ``relu_type`` are given (``scale_tensor``:
    per output column, int8 -> fp16 only), ``+ bias_tensor`` (bias, int8 ReLU-scale and
    the per-column scale measured bit-exact against pypto)."""
    if c_matrix_nz:
        violation("C-API-06", "pypto.matmul: c_matrix_nz=True; pypto 0.2.0 refuses an NZ output")
    extend = dict(extend_params or {})
    unknown = sorted(set(extend) - set(_EXTEND_KEYS))
    if unknown or (extend_params is not None and input.dim() != 2):
        violation("C-API-06", f"pypto.matmul: extend_params {sorted(extend)}: pypto 0.2.0 takes "
                              f"{list(_EXTEND_KEYS)}, on 2-D operands only")
    a, b = _matmul_operands("matmul", input, mat2, out_dtype, a_trans, b_trans)
    if "scale_tensor" in extend and (input.dtype.name != "DT_INT8" or out_dtype.name != "DT_FP16"):
        violation("C-API-02", f"pypto.matmul: extend_params['scale_tensor'] with {input.dtype} -> {out_dtype}; "
                              f"pypto's fixpipe dequant takes DT_INT8 -> DT_FP16 only")
    mode = _enum_name(extend.get("trans_mode"))
    if mode not in ("", "CAST_NONE"):
        if input.dtype.name != "DT_FP32":
            violation("C-API-06", f"pypto.matmul: trans_mode {mode} needs DT_FP32 inputs, got {input.dtype}")
        a, b = _to_tf32(a, mode), _to_tf32(b, mode)
    if input.dtype.name == "DT_INT8":
        acc = _int8_matmul(a, b)
    else:
        acc = _fp32_product(a, b, _k_step(input))
    acc = _apply_extend(acc, extend)
    return wrap(acc.to(out_dtype.torch), out_dtype, _static_mm_shape(input, mat2, a_trans, b_trans))


def _k_step(input: Tensor) -> int:
    """The K extent of one accumulation step of pypto's calculator: the cube tile's L1 k
    (measured bit for bit, probes ``matmul_k_steps*``), or 0 - all of K at once - where
    that equals the last dim of the first operand as stored: the calculator compares its
    step with that dim (calc_torch.cpp ``MatMul``), which with ``a_trans`` is M, not K
    (probe ``matmul_k_steps_a_trans_equal_m``; conformance ``matmul_a_trans_fp16``)."""
    cube = runtime.current().cube_tile
    step = cube[1][1] if cube is not None else 0
    return 0 if step == input.data.shape[-1] else step


def _fp32_product(a: torch.Tensor, b: torch.Tensor, k_step: int) -> torch.Tensor:
    """a @ b as pypto 0.2.0's CPU calculator computes a float matmul: the operands in fp32,
    the product of each K chunk of ``k_step`` (0: all of K) a torch fp32 matmul, the chunks
    added in order onto +0 (calc_torch.cpp MatMul / MatmulMultiDataLoad: ``out.zero_()``
    then ``out.add_(matmul(chunk))``), so -0 products come out +0."""
    a32, b32 = converted(a, torch.float32), converted(b, torch.float32)
    k = a32.shape[-1]
    step = k_step if 0 < k_step < k else builtins.max(k, 1)  # (an empty K: one empty product, zeros)
    acc = torch.matmul(a32[..., :step], b32[..., :step, :]).add_(0.0)
    for start in range(step, k, step):
        acc.add_(torch.matmul(a32[..., start:start + step], b32[..., start:start + step, :]))
    return acc


def _per_channel_scales(scale_tensor: Tensor, n: int) -> torch.Tensor:
    """``extend_params['scale_tensor']``: [1, N] DT_UINT64, each holding an fp32 scale in
    its low 32 bits (the high bits are ignored; measured on pypto 0.2.0, probes
    ``matmul_int8_scale_tensor*``)."""
    note_operand(scale_tensor)
    if scale_tensor.dtype.name != "DT_UINT64" or list(scale_tensor.data.shape) != [1, n]:
        violation("C-API-06", f"pypto.matmul: extend_params['scale_tensor'] is {scale_tensor.dtype} "
                              f"{list(scale_tensor.data.shape)}; it must be DT_UINT64 [1, {n}] (fp32 bits in the low "
                              f"32 bits)")
    low = scale_tensor.data.view(torch.int64) & 0xFFFFFFFF
    return low.to(torch.int32).view(torch.float32)


def _enum_name(value) -> str:
    return "" if value is None else getattr(value, "name", str(value).rsplit(".", 1)[-1])


def _apply_extend(acc: torch.Tensor, extend: dict) -> torch.Tensor:
    """ReLU, dequant scale and bias on the accumulator (fp32 from here on)."""
    relu = _enum_name(extend.get("relu_type")) not in ("", "NO_RELU")
    scale = extend.get("scale") or 0.0
    scale_tensor = extend.get("scale_tensor")
    if relu or scale or scale_tensor is not None or "bias_tensor" in extend:
        acc = acc.to(torch.float32)
    if relu:
        acc = torch.relu(acc)
    if scale:
        acc = acc * float(scale)
    if scale_tensor is not None:
        acc = acc * _per_channel_scales(scale_tensor, acc.shape[-1])
    bias = extend.get("bias_tensor")
    if bias is not None:
        note_operand(bias)
        acc = acc + bias.data.to(torch.float32)
    return acc


EXACT_BOUND = 2**24  # fp32 holds every integer up to it: sums of int8 products that stay within it are exact
NORM_CHUNK = 256  # K chunk of the norms: 256 squares of int8 sum to at most 2**22, exact in fp32


def _int_mm_works() -> bool:
    """Whether this torch has an exact int8 x int8 -> int32 GEMM on the CPU (``torch._int_mm``)."""
    try:
        a = torch.arange(-60, 60, dtype=torch.int8).reshape(3, 40)
        return torch.equal(torch._int_mm(a, a.t().contiguous()), (a.int() @ a.int().t()))
    except (AttributeError, RuntimeError):
        return False


_INT_MM = _int_mm_works()


def _int8_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The int32 accumulator of int8 x int8, exact: 2-D operands on ``torch._int_mm`` where
    it works (5x the fp32 GEMM here); else fp32 matmuls over the K blocks of
    ``_exact_k_blocks`` (every partial sum is an integer of magnitude at most 2**24, so
    each is exact in whatever order the BLAS adds), summed in int32.  Either way
    |total| < K * 2**14 < 2**31 for the K < 65535 pypto allows (C-API-06): no wrap occurs,
    so both give the same integers."""
    if _INT_MM and a.dim() == 2 and b.dim() == 2:
        return _int_mm_faster_layout(a.contiguous(), b)
    a32, b32 = converted(a, torch.float32), converted(b, torch.float32)
    acc = None
    for start, stop in _exact_k_blocks(a32, b):
        part = torch.matmul(a32[..., start:stop], b32[..., start:stop, :])
        acc = part.to(torch.int32) if acc is None else acc.add_(part.to(torch.int32))
    return acc


_CONTIGUOUS_FASTER: dict = {}  # (m, k, n) -> whether _int_mm runs faster on b's contiguous image than on b


def _int_mm_faster_layout(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``torch._int_mm(a, b)`` on b as given or on its contiguous image (kept while b is
    unchanged: ``images.derived``), whichever ran faster the first time these sizes came:
    the same integers either way, but a transposed weight view's speed depends on the
    shape (here [64, 4096] x [4096, 512]: 1.26 ms on the view, 0.77 on the image; one row,
    or [*, 1536] x [1536, 4096]: the view faster)."""
    if b.is_contiguous():
        return torch._int_mm(a, b)
    key = (a.shape[0], a.shape[1], b.shape[1])
    faster = _CONTIGUOUS_FASTER.get(key)
    if faster is False:
        return torch._int_mm(a, b)
    image = derived(b, "contiguous", torch.Tensor.contiguous)
    if faster is None:
        product = torch._int_mm(a, image)
        torch._int_mm(a, b)  # warm both before timing
        _CONTIGUOUS_FASTER[key] = _seconds(lambda: torch._int_mm(a, image)) < _seconds(lambda: torch._int_mm(a, b))
        return product
    return torch._int_mm(a, image)


def _seconds(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _exact_k_blocks(a32: torch.Tensor, b: torch.Tensor) -> list:
    """K ranges over which fp32 sums int8 products exactly, as few as the operands allow.
    Any partial sum of row i's and column j's products over a range is at most
    ||a_i|| ||b_j|| there (Cauchy-Schwarz), so a range whose largest row norm times
    largest column norm is at most 2**24 is exact.  The ranges grow greedily in
    ``NORM_CHUNK`` steps, bounding a range's largest norm by the sum of its chunks'
    largest: any 4 chunks (1024 elements of magnitude <= 128) pass whatever the data, so
    there are never more ranges than 1024-long blocks; typical data takes K whole.  The
    weight's chunk norms are kept while it is unchanged (``images.derived``)."""
    k = a32.shape[-1]
    if k <= 4 * NORM_CHUNK or a32.numel() == 0 or b.numel() == 0:
        return [(0, k)]
    rows = _chunk_squares(a32).reshape(-1, _chunks(k)).amax(0).int().tolist()
    columns = derived(b, "int8 column chunk norms", lambda w: _chunk_squares(
        converted(w, torch.float32).transpose(-1, -2)).reshape(-1, _chunks(k)).amax(0).int()).tolist()
    blocks, start, row_sum, column_sum = [], 0, 0, 0
    for chunk, (row, column) in enumerate(zip(rows, columns)):
        if (row_sum + row) * (column_sum + column) > EXACT_BOUND**2:
            blocks.append((start, chunk * NORM_CHUNK))
            start, row_sum, column_sum = chunk * NORM_CHUNK, 0, 0
        row_sum, column_sum = row_sum + row, column_sum + column
    return blocks + [(start, k)]


def _chunks(k: int) -> int:
    return -(-k // NORM_CHUNK)


def _chunk_squares(x: torch.Tensor) -> torch.Tensor:
    """[..., K] fp32 integers -> [..., chunks]: each NORM_CHUNK-long piece's sum of squares (exact)."""
    k, squares = x.shape[-1], x.square()
    if k % NORM_CHUNK:
        squares = torch.nn.functional.pad(squares, (0, _chunks(k) * NORM_CHUNK - k))
    return squares.unflatten(-1, (-1, NORM_CHUNK)).sum(-1)


def _wrap_int32(x: torch.Tensor) -> torch.Tensor:
    return ((x + 2**31) % 2**32 - 2**31).to(torch.int32)


def _to_tf32(x: torch.Tensor, mode: str) -> torch.Tensor:
    """fp32 rounded to TF32's 10 mantissa bits: CAST_RINT ties to even, CAST_ROUND away from zero."""
    bits = x.contiguous().to(torch.float32).view(torch.int32).to(torch.int64)
    dropped = 13
    low = bits & ((1 << dropped) - 1)
    kept = bits - low
    half = 1 << (dropped - 1)
    odd = (kept >> dropped) & 1
    up = (low > half) | ((low == half) & ((odd == 1) | (mode == "CAST_ROUND")))
    rounded = torch.where(up, kept + (1 << dropped), kept)
    finite = torch.isfinite(x)
    return torch.where(finite, _wrap_int32(rounded).view(torch.float32), x.to(torch.float32))


def scaled_mm(mat_a: Tensor, mat_b: Tensor, out_dtype: DataType, scale_a: Tensor, scale_b: Tensor, *,
              a_trans=False, b_trans=False, scale_a_trans=False, scale_b_trans=False, c_matrix_nz=False,
              extend_params=None) -> Tensor:
    """Block-scaled fp8 matmul (MX style): each scale covers K / scale_k consecutive
    elements along K of its row (A) or column (B); products accumulate in fp32."""
    for t in (mat_a, mat_b, scale_a, scale_b):
        note_operand(t)
    if not mat_a.dtype.name.startswith("DT_FP8") or mat_a.dtype is not mat_b.dtype:
        violation("C-API-02", f"pypto.scaled_mm: {mat_a.dtype} x {mat_b.dtype}; needs one fp8 type on both sides")
    if platform.profile.npuarch != "DAV_3510":
        violation("C-API-07", f"pypto.scaled_mm: {mat_a.dtype} operands on {platform.profile.npuarch}; pypto 0.2.0 "
                              f"traces fp8 scaled_mm for DAV_3510 only (FC3000)")
    _check_scaled_shapes(mat_a, mat_b, scale_a, scale_b, (a_trans, b_trans, scale_a_trans, scale_b_trans))
    a = (mat_a.data.transpose(-1, -2) if a_trans else mat_a.data).to(torch.float32)  # [M, K]
    b = (mat_b.data.transpose(-1, -2) if b_trans else mat_b.data).to(torch.float32)  # [K, N]
    sa = _scale_matrix(scale_a.data, scale_a_trans, for_a=True)  # [M, K/g]
    sb = _scale_matrix(scale_b.data, scale_b_trans, for_a=False)  # [K/g, N]
    k = a.shape[-1]
    if k % sa.shape[-1] or k % sb.shape[-2]:
        violation("C-API-06", f"pypto.scaled_mm: K={k} not divisible by scale blocks {list(sa.shape)}, {list(sb.shape)}")
    a = a * sa.repeat_interleave(k // sa.shape[-1], dim=-1)
    b = b * sb.repeat_interleave(k // sb.shape[-2], dim=-2)
    _check_cube("scaled_mm", mat_a, mat_b, a.shape[-2], k, b.shape[-1])
    out = torch.matmul(a, b).to(out_dtype.torch)
    return wrap(out, out_dtype, _static_mm_shape(mat_a, mat_b, a_trans, b_trans))


def _check_scaled_shapes(mat_a: Tensor, mat_b: Tensor, scale_a: Tensor, scale_b: Tensor, trans) -> None:
    """pypto 0.2.0's scaled_mm front end (``op/matmul.py``): 2-D matrices, 3-D scales
    scale_a [M, K/64, 2] and scale_b [K/64, N, 2] (first two axes swapped by
    ``scale_*_trans``), K a multiple of 64."""
    a_trans, b_trans, sa_trans, sb_trans = trans
    if mat_a.dim() != 2 or mat_b.dim() != 2 or scale_a.dim() != 3 or scale_b.dim() != 3:
        violation("C-API-06", f"pypto.scaled_mm: matrices must be 2-D and scales 3-D, got {mat_a.dim()}-D x "
                              f"{mat_b.dim()}-D with {scale_a.dim()}-D / {scale_b.dim()}-D scales")
        return
    m, k = reversed(mat_a.data.shape) if a_trans else mat_a.data.shape
    n = mat_b.data.shape[0] if b_trans else mat_b.data.shape[1]
    sa, sb = list(scale_a.data.shape), list(scale_b.data.shape)
    (sa_m, sa_k), (sb_k, sb_n) = (sa[1::-1] if sa_trans else sa[:2]), (sb[1::-1] if sb_trans else sb[:2])
    problems = [f"K={k} is not a multiple of 64"] if k % 64 else []
    if (sa_m, sa_k, sa[2]) != (m, k // 64, 2) or (sb_k, sb_n, sb[2]) != (k // 64, n, 2):
        problems.append(f"scales {sa} / {sb} (trans {sa_trans}/{sb_trans}) do not match [M={m}, K/64={k // 64}, 2] / "
                        f"[K/64, N={n}, 2]")
    if problems:
        violation("C-API-06", f"pypto.scaled_mm: {'; '.join(problems)}")


def _scale_matrix(scale: torch.Tensor, trans: bool, for_a: bool) -> torch.Tensor:
    """Block scales as [M, K/g] (A) or [K/g, N] (B).  pypto's layout is 3-D: scale_a
    [M, K/64, 2], scale_b [K/64, N, 2] (``*_trans`` swaps the first two axes), the
    K/32 entries each covering 32 consecutive K elements."""
    s = scale.to(torch.float32)
    if trans:
        s = s.transpose(0, 1)
    if for_a:
        return s.reshape(s.shape[0], -1)
    return s.permute(0, 2, 1).reshape(-1, s.shape[1])
