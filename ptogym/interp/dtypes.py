"""PyPTO data types (``pypto.DT_*``) and their torch storage types."""
from __future__ import annotations

import torch


class DataType:
    """One PyPTO element type; ``torch`` is the storage type used by the interpreter."""

    __slots__ = ("name", "torch", "nbytes")

    def __init__(self, name: str, torch_dtype, nbytes: float):
        self.name, self.torch, self.nbytes = name, torch_dtype, nbytes

    @property
    def is_float(self) -> bool:
        return self.torch is not None and self.torch.is_floating_point

    @property
    def is_int(self) -> bool:
        return self.torch is not None and not self.torch.is_floating_point and self.torch is not torch.bool

    def __repr__(self) -> str:
        return self.name


def _fp8(name: str):
    return getattr(torch, name, None)


DT_BOOL = DataType("DT_BOOL", torch.bool, 1)
DT_INT4 = DataType("DT_INT4", None, 0.5)
DT_INT8 = DataType("DT_INT8", torch.int8, 1)
DT_INT16 = DataType("DT_INT16", torch.int16, 2)
DT_INT32 = DataType("DT_INT32", torch.int32, 4)
DT_INT64 = DataType("DT_INT64", torch.int64, 8)
DT_UINT8 = DataType("DT_UINT8", torch.uint8, 1)
DT_UINT16 = DataType("DT_UINT16", torch.uint16, 2)
DT_UINT32 = DataType("DT_UINT32", torch.uint32, 4)
DT_UINT64 = DataType("DT_UINT64", torch.uint64, 8)
DT_FP16 = DataType("DT_FP16", torch.float16, 2)
DT_BF16 = DataType("DT_BF16", torch.bfloat16, 2)
DT_FP32 = DataType("DT_FP32", torch.float32, 4)
DT_DOUBLE = DataType("DT_DOUBLE", torch.float64, 8)
DT_FP8E4M3 = DataType("DT_FP8E4M3", _fp8("float8_e4m3fn"), 1)
DT_FP8E5M2 = DataType("DT_FP8E5M2", _fp8("float8_e5m2"), 1)
DT_FP8E8M0 = DataType("DT_FP8E8M0", _fp8("float8_e8m0fnu"), 1)
DT_FP8 = DT_FP8E4M3
# Types with no torch storage here (as DT_INT4): nameable in kernels, refused by the ops.
DT_HF4 = DataType("DT_HF4", None, 0.5)
DT_HF8 = DataType("DT_HF8", None, 1)
DT_FP4_E1M2X2 = DataType("DT_FP4_E1M2X2", None, 1)
DT_FP4_E2M1X2 = DataType("DT_FP4_E2M1X2", None, 1)
DT_BOTTOM = DataType("DT_BOTTOM", None, 0)

ALL = [DT_BOOL, DT_INT4, DT_INT8, DT_INT16, DT_INT32, DT_INT64, DT_UINT8, DT_UINT16, DT_UINT32,
       DT_UINT64, DT_FP16, DT_BF16, DT_FP32, DT_DOUBLE, DT_FP8E4M3, DT_FP8E5M2, DT_FP8E8M0, DT_HF4, DT_HF8,
       DT_FP4_E1M2X2, DT_FP4_E2M1X2, DT_BOTTOM]
_FROM_TORCH = {d.torch: d for d in ALL if d.torch is not None}
for _member in ALL:  # pypto's DataType is an enum: pypto.DataType.DT_FP16 is pypto.DT_FP16
    setattr(DataType, _member.name, _member)
DataType.DT_FP8 = DT_FP8  # an alias, as in pypto


def from_torch(dtype: torch.dtype) -> DataType:
    try:
        return _FROM_TORCH[dtype]
    except KeyError:
        raise TypeError(f"no PyPTO data type for torch dtype {dtype}") from None


def bytes_of(dtype: DataType) -> int:
    """Whole bytes per element, as pypto's bytes_of gives them: at least 1 (DT_INT4 / DT_HF4
    are 1, pypto's own test_enum asserts it)."""
    return max(1, int(dtype.nbytes))
