"""Sorting along one axis: ``topk``, ``argsort`` (indices are DT_INT32, as pypto
returns them), and the hardware sort primitive ``sort32``."""
from __future__ import annotations

import builtins
import math

import torch

from .. import runtime
from ..checks import violation
from ..dtypes import DT_INT32
from ..platform import platform
from ..tensor import Tensor, note_operand, wrap
from ._common import _static, check_vector_tiles, effective_vec_tile

BITSORT_ALIGN = 32  # pypto's bitsort pads the sorted axis to whole groups of 32 elements


def _axis(op: str, input: Tensor, dim) -> int:
    rank = input.dim()
    dim = -1 if dim is None else dim
    if not -rank <= dim < rank:
        violation("C-API-06", f"pypto.{op}: dim {dim} out of range for rank {rank}")
    return dim % rank


def topk(input: Tensor, k: int, dim=None, largest: bool = True):
    """(values, indices) of the k largest (or smallest) along ``dim`` (default last), sorted."""
    note_operand(input)
    axis = _axis("topk", input, dim)
    if axis != input.dim() - 1:
        violation("C-API-06", f"pypto.topk: dim {dim} of rank-{input.dim()} input; only the last axis")
    extent = input.data.shape[axis]
    if not 0 < k <= extent:
        violation("C-API-06", f"pypto.topk: k={k} outside [1, {extent}] (axis {axis} of {list(input.data.shape)})")
    values, indices = torch.topk(input.data, k, axis, largest=largest, sorted=True)
    shape = list(input._shape)
    shape[axis] = k
    check_vector_tiles("topk", input)  # the k-wide results are padded to whole blocks by pypto
    _check_bitsort_buffers("topk", input, k, scratch_rows=1)
    return wrap(values, input.dtype, shape), wrap(indices.to(torch.int32), DT_INT32, shape)


def _check_bitsort_buffers(op: str, input: Tensor, k: int, scratch_rows: int) -> None:
    """C-TILE-03 for pypto's sorts: each input tile (its rows in whole 32-byte blocks) goes
    through a bitsort into (value, index) pairs, [..., 2 * n32] (n32: the tile's last dim
    rounded up to 32), beside ``scratch_rows`` [1, 2 * n32] rows and a [..., k] result tile
    (rows in whole blocks), all in UB at once.  topk (k, one scratch row; probes
    topk_bitsort_*): [15, 1000] fp32 compiles in 191,552 B, [1, 613, 2] in 196,416 B;
    [32, 512] needs 200,960 B, [30, 520] 198,272 B, [1, 615, 2] 197,056 B.  argsort (k = n,
    no scratch row; probes argsort_sort_*; [24, 512] and [12, 1024], exactly 196,608 B,
    compile): [25, 512] and [13, 1024] do not.  The refusal is the OoOSchedule pass's
    "Global sortOps failed"."""
    tile = runtime.current().vec_tile
    if tile is None:
        return  # check_vector_tiles has reported it
    shape = _static(input)
    own = effective_vec_tile(tile, shape)
    nbytes = input.dtype.nbytes
    block = platform.profile.ub_block_bytes // nbytes
    rows, row = math.prod(own[:-1]), -(-own[-1] // block) * block  # a row takes whole 32-byte blocks
    padded = -(-own[-1] // BITSORT_ALIGN) * BITSORT_ALIGN
    result_row = -(-k // block) * block
    need = nbytes * (rows * row + 2 * rows * padded + scratch_rows * 2 * padded + rows * result_row)
    if need > platform.profile.ub_bytes:
        scratch = f", {scratch_rows} scratch row(s) [1, {2 * padded}]" if scratch_rows else ""
        violation("C-TILE-03", f"pypto.{op}: its input tile {own}, the bitsort's (value, index) pairs "
                               f"{[*own[:-1], 2 * padded]}{scratch} and the result {[*own[:-1], k]} "
                               f"({input.dtype}) need {need} B of UB > {platform.profile.ub_bytes} B on "
                               f"{platform.profile.npuarch} (vec tile {list(tile)}, shape {list(shape)})")


def argsort(input: Tensor, dim=None, descending: bool = False) -> Tensor:
    """Indices (DT_INT32) that sort ``input`` along ``dim`` (default last)."""
    note_operand(input)
    axis = _axis("argsort", input, dim)
    indices = torch.argsort(input.data, dim=axis, descending=descending)  # ties as pypto orders them
    result = wrap(indices.to(torch.int32), DT_INT32, list(input._shape))
    check_vector_tiles("argsort", input, result)
    if axis == input.dim() - 1:  # (another axis: its buffers are not measured)
        _check_bitsort_buffers("argsort", input, input.data.shape[axis], scratch_rows=0)
    return result


SORT32_GROUP = 32


def sort32(input: Tensor, index=None) -> Tensor:
    """Each group of 32 along the last axis sorted descending, as (value, index) pairs
    interleaved on a doubled last axis; indices count from ``index`` (default 0) and
    are stored as values of the input dtype (as pypto's interpreter writes them)."""
    note_operand(input)
    extent = input.data.shape[-1]
    group = builtins.min(extent, SORT32_GROUP)
    if extent % group:
        violation("C-API-06", f"pypto.sort32: last axis {extent} is not a multiple of {SORT32_GROUP}")
    groups = input.data.reshape(*input.data.shape[:-1], -1, group)
    values, order = torch.sort(groups, dim=-1, descending=True, stable=True)
    base = torch.arange(0, extent, group, device=order.device).unsqueeze(-1)
    positions = (order + base + (index or 0)).to(input.data.dtype)
    data = torch.stack([values, positions], -1).reshape(*input.data.shape[:-1], 2 * extent)
    shape = list(input._shape)
    shape[-1] = 2 * shape[-1]
    result = wrap(data, input.dtype, shape)
    check_vector_tiles("sort32", input, result)
    return result
