"""``pypto.enum``: the data types and the option enums kernels pass to ops, with the
member values pypto 0.2.0's ``pypto_impl`` gives them."""
from __future__ import annotations

import enum

from .config import CachePolicy  # noqa: F401
from .dtypes import *  # noqa: F401,F403
from .dtypes import DataType  # noqa: F401
from .frontend import DYN, DYNAMIC, STATIC, StatusType  # noqa: F401
from .ops.cast import CastMode, SaturationMode  # noqa: F401


class TileOpFormat(enum.IntEnum):
    """Tensor storage format (``pypto.Tensor(..., format=...)``); the interpreter stores ND."""
    TILEOP_ND = 0
    TILEOP_NZ = 1
    TILEOP_FORMAT_NUM = 2


class ReduceMode(enum.IntEnum):
    ATOMIC_ADD = 0


class OpType(enum.IntEnum):
    """Comparison kinds (pypto's compare ops and shmem_wait_until)."""
    EQ = 0
    NE = 1
    LT = 2
    LE = 3
    GT = 4
    GE = 5


class OutType(enum.IntEnum):
    BOOL = 0
    BIT = 1


class ReLuType(enum.IntEnum):
    """Fixpipe ReLU of matmul ``extend_params``."""
    NO_RELU = 0
    RELU = 1


class TransMode(enum.IntEnum):
    """Rounding of matmul ``extend_params`` output casts."""
    CAST_NONE = 0
    CAST_RINT = 1
    CAST_ROUND = 2


class ScatterMode(enum.IntEnum):
    NONE = 0
    ADD = 1
    MULTIPLY = 2


class AtomicType(enum.IntEnum):
    SET = 0
    ADD = 1
