"""``pypto.operation``: the data-movement ops and ``op_wrapper``, the decorator
published kernels put on their own helpers that call ``pypto_impl`` directly."""
from __future__ import annotations

import functools

from .controls import to_syms  # noqa: F401
from .dtypes import DataType  # noqa: F401
from .ops import clone, max, min, unsqueeze  # noqa: F401
from .symbolic import SymbolicScalar  # noqa: F401
from .tensor import Tensor, assemble, reshape, view  # noqa: F401


def op_wrapper(func):
    """pypto converts its Tensor wrappers to ``pypto_impl`` tensors around ``func``;
    the interpreter has one Tensor type, so the helper runs as written."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return func(*args, **kwargs)

    return wrapper
