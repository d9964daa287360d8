"""Element-wise tolerance comparison of a kernel's outputs against a reference.

``detailed_tensor_compare(actual, expected)`` is the one verdict every tool uses
(runner, pytest, ``ptogym compare``): an element passes when
``|actual - expected| <= atol + rtol * |expected|`` computed in float64, or, when both
sides hold integers, when ``|actual - expected| <= int_tolerance`` computed exactly.
Besides the verdict it keeps the statistics and the worst elements, because a bare
"not close" tells a kernel author nothing about where to look.

A comparison of nested outputs holding no tensor at all fails (nothing was compared);
``ptogym compare`` also fails when every tensor compared is empty (``compared_elements``).

Special values: same-signed infinities match; NaN on either side, finite against
infinite and opposite infinities never do.  Statistics (max/mean/std of the absolute
difference, max relative difference) leave NaN positions out - they are counted
separately.  Nested tuple/list/dict outputs are compared leaf by leaf.
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch

_SCALAR_TYPES = (bool, int, float, np.generic)


@dataclass(frozen=True)
class Outlier:
    """One out-of-tolerance element, located by its multi-dimensional index."""

    index: tuple[int, ...]
    actual: float | int
    expected: float | int
    abs_diff: float
    rel_diff: float


@dataclass
class CompareResult:
    """Verdict and statistics for one tensor pair; ``result["all_close"]`` also works.

    Statistics are None when the shapes differ (there is nothing element-wise to say).
    """

    name: str
    all_close: bool
    shape_match: bool
    actual_shape: tuple[int, ...]
    expected_shape: tuple[int, ...]
    actual_dtype: str
    expected_dtype: str
    integer_mode: bool
    rtol: float
    atol: float
    max_error_ratio: float
    int_tolerance: int
    total_elements: int
    actual_nan_count: int
    expected_nan_count: int
    actual_inf_count: int
    expected_inf_count: int
    out_of_tolerance_count: int | None = None
    out_of_tolerance_ratio: float | None = None
    max_diff: float | None = None
    mean_diff: float | None = None
    std_diff: float | None = None
    max_rel_diff: float | None = None
    outliers: list[Outlier] = field(default_factory=list)

    @property
    def compared_elements(self) -> int:
        """Elements compared one against the other: none when the shapes differ."""
        return self.total_elements if self.shape_match else 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __getitem__(self, key: str) -> Any:
        return self.to_dict()[key]

    def brief(self) -> str:
        """One-line digest for per-case summaries."""
        if not self.shape_match:
            return f"{self.name} shape mismatch {list(self.actual_shape)} vs {list(self.expected_shape)}"
        return f"{self.name} max_abs={_num(self.max_diff)} max_rel={_num(self.max_rel_diff)}"

    def report(self) -> str:
        return "\n".join(_leaf_report_lines(self))


@dataclass
class CompositeResult:
    """Result for nested outputs: one ``CompareResult`` per leaf, keyed by its path
    (``output[1]['rstd']``), plus the structural differences found on the way.

    ``result[path]`` returns a leaf; any other key reads the dict view.
    """

    name: str
    leaves: dict[str, CompareResult]
    structure_errors: list[str]

    @property
    def all_close(self) -> bool:
        return not self.structure_errors and all(leaf.all_close for leaf in self.leaves.values())

    @property
    def compared_elements(self) -> int:
        return sum(leaf.compared_elements for leaf in self.leaves.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "all_close": self.all_close,
            "structure_errors": list(self.structure_errors),
            "leaves": {path: leaf.to_dict() for path, leaf in self.leaves.items()},
        }

    def __getitem__(self, key: str) -> Any:
        if key in self.leaves:
            return self.leaves[key]
        return self.to_dict()[key]

    def brief(self) -> str:
        """One-line digest for per-case summaries."""
        parts = [leaf.brief() for leaf in self.leaves.values()]
        if self.structure_errors:
            parts.append(f"{self.name} {len(self.structure_errors)} structure mismatch(es)")
        return " | ".join(parts)

    def report(self) -> str:
        close = sum(leaf.all_close for leaf in self.leaves.values())
        lines = [f"{self.name}: {_verdict(self.all_close)} ({close}/{len(self.leaves)} leaves close)"]
        lines += [f"  structure mismatch: {error}" for error in self.structure_errors]
        for leaf in self.leaves.values():
            lines += ["  " + line for line in _leaf_report_lines(leaf)]
        return "\n".join(lines)


Result = CompareResult | CompositeResult


def detailed_tensor_compare(
    actual: Any,
    expected: Any,
    tensor_name: str | None = None,
    *,
    rtol: float = 1e-3,
    atol: float = 1e-3,
    max_outliers: int = 20,
    max_error_ratio: float = 0.0,
    int_tolerance: int = 0,
) -> Result:
    """Compare ``actual`` against the reference ``expected``.

    Leaves may be torch tensors, numpy arrays or Python/numpy scalars, in any mix of
    dtypes.  Two leaves give a ``CompareResult``; anything nested gives a
    ``CompositeResult``.  With ``max_error_ratio > 0`` a leaf passes while the share
    of failing elements stays within it, unless it holds NaN or the shapes differ.
    Raises TypeError for leaves that are not numbers (naming their path) and
    ValueError for invalid tolerances (naming the argument).
    """
    name = tensor_name or "output"
    check_tolerances(rtol=rtol, atol=atol, max_error_ratio=max_error_ratio, int_tolerance=int_tolerance,
                     max_outliers=max_outliers)
    options = dict(rtol=rtol, atol=atol, max_outliers=max_outliers,
                   max_error_ratio=max_error_ratio, int_tolerance=int_tolerance)
    if _is_leaf(actual) and _is_leaf(expected):
        return _compare_leaf(*_as_tensor(actual, name), *_as_tensor(expected, name), name, **options)
    composite = CompositeResult(name=name, leaves={}, structure_errors=[])
    _compare_tree(actual, expected, name, composite, options)
    if not composite.leaves and not composite.structure_errors:  # {} against {}: a pass would be unearned
        composite.structure_errors.append(f"{name}: nothing to compare: neither side holds a tensor")
    return composite


# --------------------------------------------------------------------------- nesting
def _is_leaf(value: Any) -> bool:
    return not isinstance(value, (Mapping, list, tuple))


def _kind(value: Any) -> str:
    if isinstance(value, Mapping):
        return "dict"
    if isinstance(value, (list, tuple)):
        return "sequence"
    return "tensor"


def _compare_tree(actual: Any, expected: Any, path: str, into: CompositeResult, options: dict) -> None:
    """Walk both structures together, adding leaf results and structure errors to *into*."""
    kind = _kind(expected)
    if _kind(actual) != kind:
        into.structure_errors.append(f"{path}: actual is a {_kind(actual)}, expected a {kind}")
    elif kind == "tensor":
        into.leaves[path] = _compare_leaf(*_as_tensor(actual, path), *_as_tensor(expected, path), path, **options)
    elif kind == "sequence":
        if len(actual) != len(expected):
            into.structure_errors.append(f"{path}: actual has {len(actual)} items, expected {len(expected)}")
        for i, (a, e) in enumerate(zip(actual, expected)):
            _compare_tree(a, e, f"{path}[{i}]", into, options)
    else:
        missing = [key for key in expected if key not in actual]
        unexpected = [key for key in actual if key not in expected]
        if missing:
            into.structure_errors.append(f"{path}: actual lacks keys {missing}")
        if unexpected:
            into.structure_errors.append(f"{path}: actual has unexpected keys {unexpected}")
        for key in expected:
            if key in actual:
                _compare_tree(actual[key], expected[key], f"{path}[{key!r}]", into, options)


def _as_tensor(value: Any, path: str) -> tuple[torch.Tensor, str]:
    """A dense CPU tensor of a comparable dtype holding *value*'s numbers, and the
    name of the dtype it came in.  Sparse tensors become dense, quantized ones are
    dequantized, float8 (and other narrow floats) widen exactly to float32; meta,
    complex and dtypes torch cannot convert are refused with TypeError."""
    if isinstance(value, torch.Tensor):
        tensor = value.detach()
    elif isinstance(value, (np.ndarray, *_SCALAR_TYPES)):
        tensor = torch.as_tensor(np.asarray(value))
    else:
        raise TypeError(f"{path}: cannot compare a {type(value).__name__}; expected a tensor, array or number")
    dtype_name = _dtype_name(tensor.dtype)
    if tensor.device.type == "meta":
        raise TypeError(f"{path}: a meta tensor holds no values to compare")
    if tensor.is_complex():
        raise TypeError(f"{path}: complex tensors are not supported; compare torch.view_as_real of both sides")
    try:
        if tensor.is_quantized:
            tensor = tensor.dequantize()
        if tensor.layout != torch.strided:
            tensor = tensor.to_dense()
        tensor = tensor.cpu()
        if tensor.dtype.is_floating_point and tensor.dtype not in _NATIVE_FLOATS:
            tensor = tensor.to(torch.float32)  # every narrower float is exact in float32
        elif not tensor.dtype.is_floating_point and tensor.dtype not in _INTEGERS:
            raise TypeError("not a number type")
    except (RuntimeError, TypeError) as error:
        raise TypeError(f"{path}: cannot compare dtype {dtype_name}: {error}") from None
    return tensor, dtype_name


_NATIVE_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
_INTEGERS = (torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
             torch.uint16, torch.uint32, torch.uint64)
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def check_tolerances(*, rtol: Any, atol: Any, max_error_ratio: Any, int_tolerance: Any,
                     max_outliers: Any = 0) -> None:
    """Raise ValueError naming the first tolerance that is not a valid value."""
    for name, value, maximum in (("rtol", rtol, math.inf), ("atol", atol, math.inf),
                                 ("max_error_ratio", max_error_ratio, 1.0)):
        if (isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value)
                or not 0 <= value <= maximum):
            raise ValueError(f"{name}: must be a finite number in [0, {maximum:g}], got {value!r}")
    for name, value in (("int_tolerance", int_tolerance), ("max_outliers", max_outliers)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
            raise ValueError(f"{name}: must be an integer >= 0, got {value!r}")


# ------------------------------------------------------------------------ one leaf
def _is_integer(dtype: torch.dtype) -> bool:
    return not dtype.is_floating_point and not dtype.is_complex


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _compare_leaf(actual: torch.Tensor, actual_dtype: str, expected: torch.Tensor, expected_dtype: str, name: str,
                  *, rtol: float, atol: float, max_outliers: int, max_error_ratio: float,
                  int_tolerance: int) -> CompareResult:
    integer_mode = _is_integer(actual.dtype) and _is_integer(expected.dtype)
    result = CompareResult(
        name=name, all_close=False, shape_match=actual.shape == expected.shape,
        actual_shape=tuple(actual.shape), expected_shape=tuple(expected.shape),
        actual_dtype=actual_dtype, expected_dtype=expected_dtype,
        integer_mode=integer_mode, rtol=rtol, atol=atol, max_error_ratio=max_error_ratio,
        int_tolerance=int_tolerance, total_elements=expected.numel(),
        actual_nan_count=_count(torch.isnan, actual), expected_nan_count=_count(torch.isnan, expected),
        actual_inf_count=_count(torch.isinf, actual), expected_inf_count=_count(torch.isinf, expected),
    )
    if not result.shape_match:
        return result
    flat_actual, flat_expected = actual.reshape(-1), expected.reshape(-1)
    has_special_values = any((result.actual_nan_count, result.expected_nan_count,
                              result.actual_inf_count, result.expected_inf_count))
    has_nan = bool(result.actual_nan_count or result.expected_nan_count)
    summary, candidates = _Summary(), []
    for start in range(0, max(1, flat_expected.numel()), CHUNK_ELEMENTS):  # bounded float64 working set
        chunk_actual = flat_actual[start:start + CHUNK_ELEMENTS]
        chunk_expected = flat_expected[start:start + CHUNK_ELEMENTS]
        if integer_mode:
            abs_diff, abs_expected, close = _integer_differences(chunk_actual, chunk_expected, int_tolerance)
        else:
            abs_diff, abs_expected, close = _float_differences(chunk_actual, chunk_expected, rtol, atol,
                                                               has_special_values)
        rel_diff = _relative(abs_diff, abs_expected, has_special_values)
        failing = close.numel() - int(torch.count_nonzero(close))
        summary.add(abs_diff, rel_diff, failing, has_nan)
        candidates += _worst(abs_diff, rel_diff, close, min(max_outliers, failing), chunk_actual, chunk_expected,
                             start)
    result.out_of_tolerance_count = summary.failing
    result.out_of_tolerance_ratio = summary.failing / result.total_elements if result.total_elements else 0.0
    summary.fill(result)
    candidates.sort(key=lambda candidate: (-candidate[0], candidate[1]))
    result.outliers = [_outlier(candidate, actual.shape) for candidate in candidates[:max_outliers]]
    result.all_close = summary.failing == 0 or (not has_nan and result.out_of_tolerance_ratio <= max_error_ratio)
    return result


CHUNK_ELEMENTS = 1 << 22  # elements compared at once: ~170 MB of float64 temporaries, whatever the size


def _count(predicate, tensor: torch.Tensor) -> int:
    return 0 if _is_integer(tensor.dtype) else int(torch.count_nonzero(predicate(tensor)))


def _float_differences(actual: torch.Tensor, expected: torch.Tensor, rtol: float, atol: float,
                       has_special_values: bool):
    """(|a - e|, |e|, pass mask), all in float64.  Equal values - same-signed
    infinities included - get difference 0; an infinite reference passes only by
    equality, so a finite value never matches inf through an infinite tolerance.
    Those masks cost a third of the time on large tensors, so they are built only
    when a NaN or inf is present."""
    a = actual.to(torch.float64)
    e = expected.to(torch.float64)
    abs_diff = torch.sub(a, e).abs_()
    abs_expected = e.abs()
    close = abs_diff <= abs_expected.mul(rtol).add_(atol)
    if has_special_values:
        equal = a == e
        abs_diff.masked_fill_(equal, 0.0)
        close.logical_and_(torch.isfinite(e)).logical_or_(equal)
    return abs_diff, abs_expected, close


def _integer_differences(actual: torch.Tensor, expected: torch.Tensor, int_tolerance: int):
    """Exact integer differences: int64 arithmetic, and Python integers for the
    elements where int64 cannot hold the values (uint64 >= 2**63) or their difference."""
    a, e = actual.to(torch.int64), expected.to(torch.int64)  # uint64 >= 2**63 wraps: redone below
    diff = a - e
    exact = ((a ^ e) < 0) & ((diff ^ a) < 0) | (diff == _INT64_MIN)  # overflowed, or |diff| does
    for tensor in (actual, expected):
        if tensor.dtype == torch.uint64:
            exact |= tensor.to(torch.int64) < 0  # wrapped: the value is >= 2**63
    diff = diff.abs_()
    close = diff <= min(int_tolerance, _INT64_MAX)
    abs_diff = diff.to(torch.float64)
    for i in exact.nonzero().flatten().tolist():
        true_diff = abs(int(actual[i].item()) - int(expected[i].item()))
        abs_diff[i], close[i] = float(true_diff), true_diff <= int_tolerance
    return abs_diff, expected.to(torch.float64).abs_(), close


def _relative(abs_diff: torch.Tensor, abs_expected: torch.Tensor, has_special_values: bool) -> torch.Tensor:
    """|a - e| / |e| in place of *abs_expected*: 0 where the difference is 0 (also
    for e == 0), inf where it is infinite or e == 0; NaN only where an input is NaN."""
    rel = torch.div(abs_diff, abs_expected, out=abs_expected)
    if has_special_values:
        rel.masked_fill_(torch.isinf(abs_diff), math.inf)
    return rel.masked_fill_(abs_diff == 0, 0.0)


class _Summary:
    """Statistics of |a - e| and |a - e| / |e| merged chunk by chunk (Chan et al.'s
    pairwise mean/variance update); NaN differences are counted, not averaged."""

    def __init__(self):
        self.failing = self.count = 0
        self.mean = self.m2 = self.max_diff = self.max_rel = 0.0

    def add(self, abs_diff: torch.Tensor, rel_diff: torch.Tensor, failing: int, has_nan: bool) -> None:
        self.failing += failing
        if has_nan:
            comparable = ~torch.isnan(abs_diff)
            abs_diff, rel_diff = abs_diff[comparable], rel_diff[comparable]
        count = abs_diff.numel()
        if count == 0:
            return
        mean = float(abs_diff.mean())
        m2 = float(abs_diff.var(correction=0)) * count
        total = self.count + count
        delta = mean - self.mean
        self.m2 += m2 + (delta * delta * self.count * count / total if self.count else 0.0)
        self.mean += delta * count / total if self.count else delta
        self.count = total
        self.max_diff = max(self.max_diff, float(abs_diff.max()))
        self.max_rel = max(self.max_rel, float(rel_diff.max()))

    def fill(self, result: CompareResult) -> None:
        result.max_diff, result.max_rel_diff = self.max_diff, self.max_rel
        result.mean_diff = self.mean
        result.std_diff = math.sqrt(self.m2 / self.count) if self.count else 0.0


def _worst(abs_diff, rel_diff, close, count, chunk_actual, chunk_expected, offset) -> list[tuple]:
    """The *count* failing elements of a chunk with the largest absolute difference
    (NaN first, ties by position), as (score, flat index, actual, expected, abs diff, rel diff)."""
    if count == 0:
        return []
    score = abs_diff.nan_to_num(nan=math.inf, posinf=math.inf).masked_fill_(close, -math.inf)
    values, indices = torch.sort(score, descending=True, stable=True)  # ties: lowest index first
    return [(score_value, offset + i, chunk_actual[i].item(), chunk_expected[i].item(), abs_diff[i].item(),
             rel_diff[i].item()) for score_value, i in zip(values[:count].tolist(), indices[:count].tolist())]


def _outlier(candidate: tuple, shape) -> Outlier:
    _, flat_index, actual, expected, abs_diff, rel_diff = candidate
    index = []
    for size in reversed(shape):
        flat_index, position = divmod(flat_index, size)
        index.append(position)
    return Outlier(index=tuple(reversed(index)), actual=actual, expected=expected, abs_diff=abs_diff,
                   rel_diff=rel_diff)


# -------------------------------------------------------------------------- report
def _verdict(all_close: bool) -> str:
    return "PASS" if all_close else "FAIL"


def _num(value: float | int | None) -> str:
    return "-" if value is None else f"{value:.6g}"


def _leaf_report_lines(result: CompareResult) -> list[str]:
    tolerance = (f"int_tolerance={result.int_tolerance}" if result.integer_mode
                 else f"rtol={result.rtol:g} atol={result.atol:g}")
    if result.max_error_ratio:
        tolerance += f" max_error_ratio={result.max_error_ratio:g}"
    lines = [
        f"{result.name}: {_verdict(result.all_close)} ({tolerance})",
        f"  actual   {list(result.actual_shape)} {result.actual_dtype}"
        f"  nan={result.actual_nan_count} inf={result.actual_inf_count}",
        f"  expected {list(result.expected_shape)} {result.expected_dtype}"
        f"  nan={result.expected_nan_count} inf={result.expected_inf_count}",
    ]
    if not result.shape_match:
        return lines + ["  shape mismatch: no element-wise comparison"]
    lines += [
        f"  elements {result.total_elements}, out of tolerance {result.out_of_tolerance_count}"
        f" ({result.out_of_tolerance_ratio:.4%})",
        f"  abs diff max={_num(result.max_diff)} mean={_num(result.mean_diff)} std={_num(result.std_diff)}"
        f"  max rel={_num(result.max_rel_diff)}",
    ]
    if result.outliers:
        lines.append(f"  worst {len(result.outliers)} elements:")
        lines.append(f"    {'index':<20} {'actual':>14} {'expected':>14} {'abs diff':>12} {'rel diff':>12}")
        lines += [f"    {str(list(o.index)):<20} {_num(o.actual):>14} {_num(o.expected):>14}"
                  f" {_num(o.abs_diff):>12} {_num(o.rel_diff):>12}" for o in result.outliers]
    return lines
