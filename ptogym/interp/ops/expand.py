"""``expand_clone``: broadcast one size-1 axis to a target shape as a real copy."""
from __future__ import annotations

from ..checks import violation
from ..symbolic import value_of
from ..tensor import Tensor, note_operand, wrap
from ._common import check_vector_tiles


def expand_clone(input: Tensor, shape, *, valid_shape=None) -> Tensor:
    """pypto 0.2.0 (tensor_transformation.cpp) expands exactly one axis, of size 1,
    per call; other axes must already match."""
    note_operand(input)
    source = [value_of(d) for d in input.shape]
    target = [value_of(d) for d in shape]
    if len(target) != len(source):
        violation("C-API-06", f"pypto.expand_clone: target {target} has rank {len(target)}, input {source} "
                              f"rank {len(source)}")
    grown = [a for a, (s, t) in enumerate(zip(source, target)) if s != t]
    if any(source[a] != 1 for a in grown):
        violation("C-API-06", f"pypto.expand_clone: input {source} to {target}: only size-1 axes can expand")
    if len(grown) > 1:
        violation("C-API-06", f"pypto.expand_clone: input {source} to {target} expands axes {grown}; only one "
                              f"axis per call")
    extent = [value_of(d) for d in valid_shape] if valid_shape else \
        [target[a] if a in grown else n for a, n in enumerate(input.data.shape)]
    data = input.data.expand(*extent).clone()
    result = wrap(data, input.dtype, list(shape))
    check_vector_tiles("expand_clone", input, result)
    return result
