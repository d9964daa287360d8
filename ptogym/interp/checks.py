"""Named constraint checks.  Every rule the interpreter enforces has an id listed in
``CHECKS``; a violation raises ``ConstraintViolation`` naming the id, the user's
kernel file:line and the offending values.  ``lenient()`` turns them into warnings
(for exploring foreign code); the interpreter then carries on like pypto would.
"""
from __future__ import annotations

import contextlib
import os
import sys
import warnings

CHECKS = {
    "C-ARG-01": "kernel argument must match its pypto.Tensor annotation (type, rank, dtype, static dims)",
    "C-ARG-02": "kernel tensor arguments must be contiguous and on one device",
    "C-ARG-03": "a named dynamic dim must bind the same value everywhere",
    "C-LOOP-01": "an op on a tensor with a dynamic dim must run inside a pypto.loop (operate on its views)",
    "C-LOOP-02": "a symbolic loop bound needs pypto.loop, not Python range()",
    "C-LOOP-03": "a symbolic scalar cannot be a Python int, bool or container index",
    "C-LOOP-07": "is_loop_begin/is_loop_end take a loop index of an enclosing pypto.loop",
    "C-LOOP-08": "a view at a loop_unroll index must span the unrolled factor (factor * step) on that axis",
    "C-TILE-02": "a vector tile's last dim must be 32-byte aligned (tile_last * dtype_bytes % 32 == 0)",
    "C-TILE-03": "a vector op's tiles must fit the platform's unified buffer (UB)",
    "C-TILE-04": "pypto.sum's input tile must fit its reduction buffer",
    "C-TILE-05": "cube tiles need 0 < L0 <= L1 and L1 % L0 == 0 on m, k and n, within L0/L1 capacity",
    "C-TILE-06": "tile/view shapes must be Python ints, and a tile shape must be set before the op",
    "C-TILE-08": "the vector tile rank must match the rank of the op's tensors",
    "C-VIEW-01": "a view or slice must lie inside its source unless valid_shape covers the overhang",
    "C-VIEW-02": "shape, offsets and valid_shape must have the source's rank",
    "C-VIEW-03": "valid_shape must lie within shape and offsets must be >= 0",
    "C-ASSEMBLE-01": "an assembled tile must lie inside its destination",
    "C-ASSEMBLE-02": "assemble offsets must have the destination's rank and the tile its rank",
    "C-GRAPH-01": "one formal parameter cannot be both viewed and assembled (graph cycle)",
    "C-MEM-01": "a pypto.tensor must be written before it is read",
    "C-OUT-01": "every element of an output parameter must be written by the kernel",
    "C-API-01": "elementwise operands must share one dtype",
    "C-API-02": "matmul input dtypes must pair (fp16/bf16/fp32 alike, int8->int32, fp8 via scaled_mm)",
    "C-API-03": "broadcast operands need equal rank and dims that are equal or 1",
    "C-API-05": "pypto.sum accepts only DT_FP32 input",
    "C-API-06": "invalid argument value for a PyPTO op",
    "C-API-07": "the op does not accept this operand dtype (pypto 0.2.0 rejects the kernel)",
    "C-SYNTAX-01": "a jit kernel uses only what pypto's parser accepts: no nested def/lambda/class, while, "
                   "break, continue, with or try, and no `from __future__ import annotations` in its module",
}

_INTERP_DIR = os.path.dirname(os.path.abspath(__file__))
_SKIP_PREFIXES = (_INTERP_DIR, os.path.dirname(contextlib.__file__))
_lenient = os.environ.get("PTOGYM_LENIENT", "") not in ("", "0")


class ConstraintViolation(ValueError):
    """A PyPTO constraint broken by a kernel: ``.check_id``, ``.location``, ``.details``."""

    def __init__(self, check_id: str, details: str, location: str):
        self.check_id, self.details, self.location = check_id, details, location
        super().__init__(f"[{check_id}] {location}: {details} (rule: {CHECKS[check_id]})")


class ConstraintWarning(UserWarning):
    """A constraint violation reported in lenient mode."""


def user_location() -> str:
    """file:line of the innermost frame outside the interpreter (the user's kernel)."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_SKIP_PREFIXES):
        frame = frame.f_back
    if frame is None:
        return "<unknown>"
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


def violation(check_id: str, details: str, location: str | None = None) -> None:
    """Raise (strict) or warn (lenient) about a broken constraint."""
    error = ConstraintViolation(check_id, details, location or user_location())
    if not _lenient:
        raise error
    warnings.warn(str(error), ConstraintWarning, stacklevel=3)


def is_lenient() -> bool:
    return _lenient


@contextlib.contextmanager
def lenient(enabled: bool = True):
    """Within the block, constraint violations warn instead of raising."""
    global _lenient
    previous, _lenient = _lenient, enabled
    try:
        yield
    finally:
        _lenient = previous
