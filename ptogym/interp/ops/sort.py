"""Sorting along one axis: ``topk``, ``argsort`` (indices are DT_INT32, as pypto
returns them), and the hardware sort primitive ``sort32``."""
from __future__ import annotations

import builtins

import torch

from ..checks import violation
from ..dtypes import DT_INT32
from ..tensor import Tensor, note_operand, wrap
from ._common import check_vector_tiles


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
    return wrap(values, input.dtype, shape), wrap(indices.to(torch.int32), DT_INT32, shape)


def argsort(input: Tensor, dim=None, descending: bool = False) -> Tensor:
    """Indices (DT_INT32) that sort ``input`` along ``dim`` (default last)."""
    note_operand(input)
    axis = _axis("argsort", input, dim)
    indices = torch.argsort(input.data, dim=axis, descending=descending)  # ties as pypto orders them
    result = wrap(indices.to(torch.int32), DT_INT32, list(input._shape))
    check_vector_tiles("argsort", input, result)
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
