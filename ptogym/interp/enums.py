"""``pypto.enum``: the data types and the option enums kernels pass to ops, with the
member values pypto 0.2.0's ``pypto_impl`` gives them."""
from __future__ import annotations

import enum

from .config import CachePolicy  # noqa: F401
from .dtypes import *  # noqa: F401,F403
from .dtypes import DataType  # noqa: F401
from .frontend import DYN, DYNAMIC, STATIC, StatusType  # noqa: F401
from .ops.cast import CastMode, SaturationMode  # noqa: F401


class _Enum(enum.IntEnum):
    """An int-valued enum that prints as ``Class.MEMBER``, as pypto_impl's enums do."""

    __str__ = enum.Enum.__str__


class TileOpFormat(_Enum):
    """Tensor storage format (``pypto.Tensor(..., format=...)``); the interpreter stores ND."""
    TILEOP_ND = 0
    TILEOP_NZ = 1
    TILEOP_FORMAT_NUM = 2


class ReduceMode(_Enum):
    ATOMIC_ADD = 0


class OpType(_Enum):
    """Comparison kinds (pypto's compare ops and shmem_wait_until)."""
    EQ = 0
    NE = 1
    LT = 2
    LE = 3
    GT = 4
    GE = 5


class OutType(_Enum):
    BOOL = 0
    BIT = 1


class ReLuType(_Enum):
    """Fixpipe ReLU of matmul ``extend_params``."""
    NO_RELU = 0
    RELU = 1


class TransMode(_Enum):
    """Rounding of matmul ``extend_params`` output casts."""
    CAST_NONE = 0
    CAST_RINT = 1
    CAST_ROUND = 2


class ScatterMode(_Enum):
    NONE = 0
    ADD = 1
    MULTIPLY = 2


class AtomicType(_Enum):
    SET = 0
    ADD = 1
