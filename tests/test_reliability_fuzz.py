"""Property-based fuzzing (hypothesis) of the three places users hand ptogym data:

* the operator's arguments - dtypes, shapes, strides, views, overlaps, requires_grad,
  devices (cpu/meta), eps values: each call raises a TypeError/ValueError that names
  the argument with every input bitwise unchanged, or matches an fp64 reference;
* case files - random mutations of a valid one through ``ptogym run``: exit 2 naming
  file, case and field, or a verdict; never a traceback;
* ``detailed_tensor_compare`` - random pairs of any dtype with NaN/inf/extremes:
  never an exception, and the verdict of an element-by-element Python reference.

Bounded for CI: ``PTOGYM_FUZZ_EXAMPLES`` examples per test (default 40).  A long run:
``PTOGYM_FUZZ_EXAMPLES=2000 python3 -m pytest tests/test_reliability_fuzz.py``.
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import io
import json
import math
import os
import re
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ptogym import ops
from ptogym.cli import MARKERS, OK_MARKER, main
from ptogym.ops.inplace_add_rms_norm.op import inplace_add_rms_norm
from ptogym.verify import detailed_tensor_compare

_RAW_EXAMPLES = os.environ.get("PTOGYM_FUZZ_EXAMPLES", "40")
if not _RAW_EXAMPLES.isdigit():
    raise ValueError(f"PTOGYM_FUZZ_EXAMPLES: must be a whole number of examples, got {_RAW_EXAMPLES!r}")
FUZZ_EXAMPLES = int(_RAW_EXAMPLES)
FUZZ = settings(max_examples=FUZZ_EXAMPLES, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
VERDICTS = set(MARKERS.values()) | {OK_MARKER}


# =========================================================================== operator inputs
TOLERANCE = {torch.bfloat16: 1e-2, torch.float16: 1e-3, torch.float32: 1e-4}
GOOD_EPS = [1e-6, 1e-3, 0.5, 1, np.float32(1e-5), np.float64(1e-6)]
BAD_EPS = [0.0, -1e-6, math.nan, math.inf, 10**400, True, "1e-6", None, [1e-6]]


def _placed(values: torch.Tensor, layout: str) -> torch.Tensor:
    """*values* laid out contiguous, transposed (same shape, other strides) or every other element."""
    if layout == "transposed" and values.dim() >= 2:
        return values.transpose(0, -1).contiguous().transpose(0, -1)
    if layout == "strided":
        wide = torch.zeros(*values.shape[:-1], 2 * values.shape[-1], dtype=values.dtype)
        wide[..., ::2] = values
        return wide[..., ::2]
    return values


def _inside(target: torch.Tensor, shape, dtype, offset_elements: int = 0):
    """A view of *target*'s own memory with *shape* and *dtype*, or None if it does not fit."""
    needed = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
    raw = target.reshape(-1).view(torch.uint8) if target.is_contiguous() and target.numel() else None
    start = offset_elements * target.element_size()
    if raw is None or needed == 0 or start + needed > raw.numel() or start % dtype.itemsize:
        return None
    return raw[start:start + needed].view(dtype).view(shape)


@st.composite
def operator_calls(draw):
    # weighted so that about half of the calls are valid and the other half break one rule
    dtype = draw(st.sampled_from([torch.bfloat16] * 3 + [torch.float16, torch.float32] * 2
                                 + [torch.float64, torch.int32]))
    hidden = draw(st.sampled_from([256] * 3 + [32, 512, 0, 8, 16, 100]))
    lead = draw(st.lists(st.integers(0, 4), min_size=0 if draw(st.integers(0, 9)) == 0 else 1, max_size=2))
    shape = (*lead, hidden)
    generator = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))

    def values(shape_, dtype_):
        return (torch.randn(shape_, generator=generator) * 3).to(dtype_)

    x1 = _placed(values(shape, dtype), draw(st.sampled_from(["contiguous"] * 8 + ["transposed", "strided"])))
    x2_kind = draw(st.sampled_from(["own"] * 12 + ["other dtype", "is x1", "half of x1", "transposed"]))
    x2 = {"own": lambda: values(shape, dtype), "other dtype": lambda: values(shape, torch.float32),
          "is x1": lambda: x1, "half of x1": lambda: _inside(x1, shape, dtype, x1.numel() // 2),
          "transposed": lambda: _placed(values(shape, dtype), "transposed")}[x2_kind]()
    if x2 is None:  # a half of x1 that does not fit
        x2 = values(shape, dtype)
    gamma_kind = draw(st.sampled_from(["own"] * 8 + ["strided"] * 2 + ["inside x1", "inside x2", "wrong shape"]))
    gamma = {"own": lambda: values((hidden,), dtype), "strided": lambda: _placed(values((1, hidden), dtype),
                                                                                  "strided")[0],
                      "inside x1": lambda: _inside(x1, (hidden,), dtype),
             "inside x2": lambda: _inside(x2, (hidden,), dtype),
             "wrong shape": lambda: values((hidden + 16,), dtype)}[gamma_kind]()
    tensors = {"x1": x1, "x2": x2, "gamma": gamma if gamma is not None else values((hidden,), dtype)}
    if draw(st.sampled_from(["cpu"] * 9 + ["meta"])) == "meta":
        tensors = {name: torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")
                   for name, t in tensors.items()}
    grad = draw(st.sampled_from([None] * 12 + ["x1", "x2", "gamma"]))
    if grad and tensors[grad].is_floating_point() and tensors[grad].is_leaf:
        tensors[grad].requires_grad_()
    eps = draw(st.sampled_from(GOOD_EPS * 3 + BAD_EPS) | st.floats(1e-12, 10.0))
    return tensors, eps, draw(st.booleans())


def _reference(x1, x2, gamma, eps):
    """y, x_add, rstd in float64, rounded once to x1's dtype (what an exact kernel would store)."""
    x_add = x1.double() + x2.double()
    rstd = torch.rsqrt(x_add.pow(2).mean(dim=-1, keepdim=True) + float(eps))
    return tuple(t.to(x1.dtype) for t in (x_add * rstd * gamma.double(), x_add, rstd))


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise equality (NaN payloads included)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if not a.numel():
        return True
    return torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))


@FUZZ
@given(call=operator_calls())
def test_fuzz_operator_arguments(call):
    tensors, eps, no_grad = call
    on_cpu = all(t.device.type == "cpu" for t in tensors.values())
    before = {name: t.detach().clone() for name, t in tensors.items()} if on_cpu else {}
    try:
        with torch.no_grad() if no_grad else contextlib.nullcontext():
            y, x_add, rstd = inplace_add_rms_norm(tensors["x1"], tensors["x2"], tensors["gamma"], eps)
    except (TypeError, ValueError) as error:
        assert re.match(r"^(x1|x2|gamma|eps): \S", str(error)), f"the message must name the argument: {error}"
        event(f"refused ({type(error).__name__}, {str(error).split(':')[0]})")
        for name, snapshot in before.items():
            assert _same_bits(tensors[name].detach(), snapshot), f"{name} changed although the call was refused"
        return
    assert y is tensors["x1"] and x_add is tensors["x2"] and rstd.shape == (*y.shape[:-1], 1)
    event(f"accepted ({'cpu' if on_cpu else 'meta'})")
    if not on_cpu:
        assert rstd.device.type == "meta"
        return
    tol = TOLERANCE[y.dtype]
    expected = _reference(before["x1"], before["x2"], before["gamma"], eps)
    for name, actual, want in zip(("y", "x_add", "rstd"), (y, x_add, rstd), expected):
        result = detailed_tensor_compare(actual.detach(), want, name, rtol=tol, atol=tol)
        assert result.all_close, result.report()


# =========================================================================== case files
_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3),
    max_leaves=6)
_LEVEL_KEYS = ["id", "description", "seed", "inputs", "attrs", "rtol", "atol", "max_error_ratio",
               "int_tolerance", "tolerances", "tags", "epsilon", "shape"]
_DIMS = st.sampled_from([0, 1, 2, 3, 16, 256, 4096, 7168, 2**31, 2**40, -1])
_DTYPES = st.sampled_from(["bfloat16", "float16", "float32", "float64", "int8", "bool", "float8_e4m3fn", "bf16", ""])


@st.composite
def mutations(draw):
    """(path of keys, new value or ... for delete) applied to the one-level document."""
    where = draw(st.sampled_from(["level", "level", "attrs", "input", "top", "tolerance"]))
    if where == "tolerance":  # a file entry or a level's replacement, per output
        scope = draw(st.sampled_from([["tolerances"], ["levels", 0, "tolerances"]]))
        output = draw(st.sampled_from(["y", "x_add", "rstd", "z"]))
        field = draw(st.sampled_from(["rtol", "atol", "max_error_ratio", "int_tolerance", "reason", "extra"]))
        value = st.sampled_from([-1, 0, 1, 1e-2, 2, math.inf, "", "why"]) | _JSON_VALUES
        return [*scope, output, field], draw(value | st.just(...))
    if where == "attrs":
        return ["levels", 0, "attrs", draw(st.sampled_from(["eps", "epsilon", "scale"]))], draw(
            st.sampled_from([1e-6, 0, -1.0, 1e300, "x", None, [1], 10**400]) | _JSON_VALUES)
    if where == "input":
        name = draw(st.sampled_from(["x1", "x2", "gamma", "x3"]))
        field = draw(st.sampled_from(["shape", "dtype", "layout"]))
        value = {"shape": st.lists(_DIMS, max_size=4) | _JSON_VALUES, "dtype": _DTYPES | _JSON_VALUES,
                 "layout": _JSON_VALUES}[field]
        return ["levels", 0, "inputs", name, field], draw(value | st.just(...))
    if where == "top":
        return [draw(st.sampled_from(["op", "levels", "required_levels", "tolerances", "extra"]))], draw(
            _JSON_VALUES | st.just(...))
    key = draw(st.sampled_from(_LEVEL_KEYS))
    special = {"seed": st.sampled_from([-1, 0, 2**64 - 1, 2**64, 1.5, "0"]),
               "rtol": st.sampled_from([-1, 0, 1e-2, math.inf, "0.1"])}.get(key, st.nothing())
    return ["levels", 0, key], draw(special | _JSON_VALUES | st.just(...))


def _apply(document, path, value):
    target = document
    for key in path[:-1]:
        if isinstance(target, dict) and isinstance(key, str):
            target = target.setdefault(key, {})
        elif isinstance(target, list) and isinstance(key, int) and key < len(target):
            target = target[key]
        else:
            return
    if isinstance(target, dict):
        if value is ...:
            target.pop(path[-1], None)
        else:
            target[path[-1]] = value


@pytest.fixture(scope="module")
def level0_document():
    spec = ops.get_op("inplace_add_rms_norm")
    document = json.loads(spec.cases_path.read_text())
    return {**document, "required_levels": ["level0"], "levels": [document["levels"][0]]}


@FUZZ
@given(changes=st.lists(mutations(), min_size=1, max_size=3))
def test_fuzz_case_file_mutations(level0_document, changes):
    document = copy.deepcopy(level0_document)
    for path, value in changes:
        _apply(document, path, value)
    spec = dataclasses.replace(ops.get_op("inplace_add_rms_norm"), required_levels=())
    with tempfile.TemporaryDirectory() as folder, pytest.MonkeyPatch.context() as patch:
        path = Path(folder) / "cases.json"
        path.write_text(json.dumps(document))
        patch.setattr(ops, "get_op", lambda name: dataclasses.replace(spec, cases_file=path))
        patch.setenv("PTOGYM_CASE_MAX_BYTES", str(64 * 1024**2))
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            exit_code = main(["--debug", "run", "inplace_add_rms_norm", "level0"])
    lines = out.getvalue().splitlines()
    assert "Traceback" not in err.getvalue() + out.getvalue(), err.getvalue()
    assert exit_code in (0, 1, 2) and lines[-1] == MARKERS[exit_code]
    event(f"{MARKERS[exit_code]}{' (case file)' if 'CaseFileError' in out.getvalue() else ''}")
    assert sum(line in VERDICTS for line in lines) == 1
    problems = [line for line in lines if "CaseFileError" in line or line.startswith(str(path))]
    for line in problems:  # each problem names the file, and the case and field where there is one
        assert str(path) in line, line
        assert re.search(r"field [\"']|invalid JSON|must hold a JSON object", line), line


# =========================================================================== compare
_COMPARE_DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.float8_e4m3fn,
                   torch.float8_e5m2, torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
                   torch.uint16, torch.uint32, torch.uint64]
_SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, 1e-3, 1e4, 65504.0, 3e38, math.inf, -math.inf, math.nan]


@st.composite
def compare_pairs(draw):
    shape = tuple(draw(st.lists(st.integers(0, 3), max_size=2)))
    other = shape if draw(st.integers(0, 9)) else tuple(draw(st.lists(st.integers(0, 3), max_size=2)))
    return draw(_leaf(shape)), draw(_leaf(other)), draw(st.sampled_from([0, 1e-3, 0.1, 2.0])), draw(
        st.sampled_from([0, 1e-3, 1.0])), draw(st.sampled_from([0.0, 0.25, 1.0])), draw(
        st.sampled_from([0, 1, 2**63, 2**64]))


@st.composite
def _leaf(draw, shape):
    dtype = draw(st.sampled_from(_COMPARE_DTYPES))
    count = math.prod(shape)
    if dtype.is_floating_point:
        values = draw(st.lists(st.sampled_from(_SPECIAL) | st.floats(-1e6, 1e6), min_size=count, max_size=count))
        return torch.tensor(values, dtype=torch.float64).reshape(shape).to(dtype)
    info = (0, 1) if dtype == torch.bool else (torch.iinfo(dtype).min, torch.iinfo(dtype).max)
    values = draw(st.lists(st.sampled_from(info) | st.integers(*info), min_size=count, max_size=count))
    return torch.tensor(values, dtype=dtype).reshape(shape)


def _python_values(tensor: torch.Tensor) -> list:
    """Exact element values as Python ints (integer dtypes) or floats."""
    if tensor.dtype.is_floating_point:
        return [float(v) for v in tensor.to(torch.float64).reshape(-1).tolist()]
    return [int(v) for v in tensor.reshape(-1).tolist()]


def _reference_verdict(actual, expected, rtol, atol, ratio, int_tolerance) -> bool:
    if actual.shape != expected.shape:
        return False
    a, e = _python_values(actual), _python_values(expected)
    integers = not actual.dtype.is_floating_point and not expected.dtype.is_floating_point
    failing, nan = 0, False
    for x, y in zip(a, e):
        if integers:
            ok = abs(x - y) <= int_tolerance
        else:
            x, y = float(x), float(y)
            nan = nan or math.isnan(x) or math.isnan(y)
            ok = not (math.isnan(x) or math.isnan(y)) and (x == y or (math.isfinite(y)
                                                                      and abs(x - y) <= atol + rtol * abs(y)))
        failing += not ok
    return failing == 0 or (not nan and failing / len(e) <= ratio)


@FUZZ
@given(pair=compare_pairs())
def test_fuzz_compare_pairs(pair):
    actual, expected, rtol, atol, ratio, int_tolerance = pair
    result = detailed_tensor_compare(actual, expected, rtol=rtol, atol=atol, max_error_ratio=ratio,
                                     int_tolerance=int_tolerance)
    assert result.all_close == _reference_verdict(actual, expected, rtol, atol, ratio, int_tolerance), result.report()
    event("close" if result.all_close else "not close")
    result.report()  # the report renders for every pair
    if result.max_diff is not None:
        assert result.max_diff >= 0 or math.isnan(result.max_diff)
