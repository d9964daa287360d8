"""Creation ops: ``full``, ``zeros``, ``ones``, ``arange``, ``from_torch``."""
from __future__ import annotations

import torch

from .. import dtypes
from ..checks import violation
from ..dtypes import DT_FP32, DT_INT32, DataType
from ..symbolic import value_of
from ..tensor import Tensor, _default_device, wrap
from ._common import Element, _scalar, fp32_scalar


def full(size, fill_value, dtype: DataType, *, valid_shape=None) -> Tensor:
    if isinstance(fill_value, Element) and fill_value.dtype is not dtype:
        violation("C-API-06", f"pypto.full: fill_value is an Element of {fill_value.dtype}, dtype is {dtype}")
    extent = [value_of(v) for v in (valid_shape or size)]
    value = _scalar(fill_value)
    if dtype.name == "DT_FP32" and isinstance(value, float):
        value = fp32_scalar(value)
    try:
        data = torch.full(extent, value, dtype=dtype.torch, device=_default_device())
    except RuntimeError:  # a finite value beyond the dtype's range; pypto refuses it too
        violation("C-API-06", f"pypto.full: fill value {value!r} overflows {dtype} (pypto 0.2.0 refuses it: "
                              f"VEC_DUPOpError; probes full_fp16_overflow, full_bf16_overflow)")
        data = torch.full(extent, value, dtype=torch.float64, device=_default_device()).to(dtype.torch)  # lenient: inf
    return wrap(data, dtype, list(size))


def _sizes(size) -> list:
    return list(size[0]) if len(size) == 1 and isinstance(size[0], (list, tuple)) else list(size)


def zeros(*size, dtype: DataType | None = None) -> Tensor:
    return full(_sizes(size), 0, dtype or DT_FP32)


def ones(*size, dtype: DataType | None = None) -> Tensor:
    return full(_sizes(size), 1, dtype or DT_FP32)


def arange(*args) -> Tensor:
    data = torch.arange(*args, device=_default_device())
    dtype = DT_FP32 if data.is_floating_point() else DT_INT32
    return wrap(data.to(dtype.torch), dtype)


def from_torch(tensor: torch.Tensor, name: str = "", dynamic_axis=None, tensor_format=None, dtype=None) -> Tensor:
    return Tensor(list(tensor.shape), dtype or dtypes.from_torch(tensor.dtype), name, _data=tensor)
