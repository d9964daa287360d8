"""Reductions along one axis: ``sum`` (reduction-buffer check; advice to reduce in
FP32), ``amax``, ``amin``, ``prod``, and ``max``/``min`` of two runtime
integers (pypto 0.2.0 has no tensor form of them)."""
from __future__ import annotations

import math

import torch

from .. import runtime
from ..checks import advise, violation
from ..dtypes import DT_FP32
from ..platform import platform
from ..symbolic import sym_max, sym_min
from ..tensor import Tensor, note_operand, wrap
from ._common import _static, check_vector_tiles, effective_vec_tile


def _reduce(op: str, fn, input: Tensor, dim: int, keepdim: bool) -> Tensor:
    note_operand(input)
    rank = input.dim()
    if not -rank <= dim < rank:
        violation("C-API-06", f"pypto.{op}: dim {dim} out of range for rank {rank}")
    axis = dim % rank
    shape = list(input._shape)
    if keepdim:
        shape[axis] = 1
    else:
        del shape[axis]
    tile = runtime.current().vec_tile
    if axis == rank - 1 and tile is not None and len(tile) >= rank:
        last, nbytes = tile[rank - 1], input.dtype.nbytes  # the declared entry, not clamped (probes reduce_tile_*)
        if last * nbytes % platform.profile.ub_block_bytes:
            violation("C-TILE-09", f"pypto.{op} along the last axis of {list(_static(input))} under vec tile "
                                   f"{list(tile)}: its last dim {last} x {nbytes} B ({input.dtype}) = {last * nbytes} "
                                   f"B is not a multiple of {platform.profile.ub_block_bytes} B")
    result = wrap(fn(input.data, axis, keepdim), input.dtype, shape)
    check_vector_tiles(op, input)
    return result


def sum(input: Tensor, dim: int, keepdim: bool = False) -> Tensor:
    """Sum along dim (in the input's dtype; A-SUM-01 advises DT_FP32); the input tile
    must fit the reduction buffer (C-TILE-04)."""
    if input.dtype is not DT_FP32:
        advise("A-SUM-01", f"pypto.sum on {input.dtype} {list(_static(input))}; cast to DT_FP32 first")
    tile = runtime.current().vec_tile
    if tile is not None and len(tile) == input.dim():
        # the input tile, the result's rows (a 32-byte block each) and the reduction buffer, all in UB
        # (probes tile_sum_buffer, reduce_sum_*: [63, 512] fp32 compiles, [64, 512] does not)
        effective = effective_vec_tile(tile, input._shape)
        nbytes = math.prod(effective) * input.dtype.nbytes
        result_rows = math.prod(effective[:-1]) * platform.profile.ub_block_bytes
        need = nbytes + result_rows + platform.profile.sum_buffer_bytes
        if need > platform.profile.ub_bytes:
            violation("C-TILE-04", f"pypto.sum input tile {effective} x {input.dtype.nbytes} B = {nbytes} B, its "
                                   f"result rows {result_rows} B and the {platform.profile.sum_buffer_bytes} B "
                                   f"reduction buffer: {need} B > {platform.profile.ub_bytes} B of UB")
    return _reduce("sum", lambda d, a, k: torch.sum(d, a, keepdim=k), input, dim, keepdim)


def amax(input: Tensor, dim: int, keepdim: bool = False) -> Tensor:
    return _reduce("amax", lambda d, a, k: torch.amax(d, a, keepdim=k), input, dim, keepdim)


def amin(input: Tensor, dim: int, keepdim: bool = False) -> Tensor:
    return _reduce("amin", lambda d, a, k: torch.amin(d, a, keepdim=k), input, dim, keepdim)


def prod(input: Tensor, dim: int, keepdim: bool = False) -> Tensor:
    return _reduce("prod", lambda d, a, k: torch.prod(d, a, keepdim=k, dtype=d.dtype), input, dim, keepdim)


def _scalar_only(op: str, a, b):
    """pypto.max/min take two runtime integers; pypto 0.2.0 has no tensor form (amax/amin)."""
    if isinstance(a, Tensor) or isinstance(b, Tensor):
        violation("C-API-06", f"pypto.{op} takes two scalars (SymbolicScalar or int); for a tensor use pypto.a{op}")


def max(a, b):
    """``pypto.max`` of two runtime integers (pypto 0.2.0 has no tensor form of them)."""
    _scalar_only("max", a, b)
    return sym_max(a, b)


def min(a, b):
    """``pypto.min`` of two runtime integers (pypto 0.2.0 has no tensor form of them)."""
    _scalar_only("min", a, b)
    return sym_min(a, b)
