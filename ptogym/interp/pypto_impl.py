"""``pypto.pypto_impl``: the few names of pypto's C++ extension that published kernels
call directly (inside ``@op_wrapper`` helpers).  Everything else in the extension is
the NPU compiler itself and is not part of the kernel API."""
from __future__ import annotations

import torch

from .dtypes import DataType  # noqa: F401
from .ops._common import Element, _unary
from .ops.unsupported import NPU_INTERNAL, not_emulatable
from .platform import platform
from .tensor import Tensor


def ScalarDivS(operand: Tensor, value: Element, reverse_operand: bool = False) -> Tensor:  # noqa: N802 (pypto's name)
    """operand / value, or value / operand when ``reverse_operand`` (a true division,
    not value * reciprocal(operand): bitwise as pypto 0.2.0 computes it)."""
    scalar = value.data if isinstance(value, Element) else value
    if reverse_operand:
        return _unary("ScalarDivS", lambda d: torch.div(torch.full_like(d, scalar), d), operand)
    return _unary("ScalarDivS", lambda d: d / scalar, operand)


def GetNPUArch() -> str:  # noqa: N802
    """The npuarch of the platform profile the interpreter checks against."""
    return platform.profile.npuarch


LogTopFolder = not_emulatable("pypto_impl.LogTopFolder", NPU_INTERNAL + " (NPU run logs)")
