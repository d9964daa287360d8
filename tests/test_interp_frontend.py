"""ptogym.interp's frontend: how kernels are called (annotations, options, scalars,
returns, devices, aliasing), looped over (loop, loop_unroll, is_loop_begin/end,
loop-carried accumulation), configured (tile shapes, labels, options, platform),
and launched (``ptogym interp SCRIPT.py`` / ``-m``)."""
import os
import sys
import textwrap

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import ptogym.interp as pypto
from ptogym.interp import ConstraintViolation, checks, launcher, runtime
from ptogym.interp.platform import platform as interp_platform


@pytest.fixture(autouse=True)
def strict(monkeypatch):
    """Violations raise here, whatever $PTOGYM_LENIENT says."""
    monkeypatch.setattr(checks._mode, "lenient", False)


@pytest.fixture
def restore_platform():
    profile = interp_platform.profile
    yield
    interp_platform.profile = profile


@pytest.fixture
def restore_global_tiles():
    vec, cube = runtime.GLOBAL_RUN.vec_tile, runtime.GLOBAL_RUN.cube_tile
    yield
    runtime.GLOBAL_RUN.vec_tile, runtime.GLOBAL_RUN.cube_tile = vec, cube


def exp_kernel(dtype=pypto.DT_FP32):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([pypto.DYNAMIC, 64], dtype), out: pypto.Tensor([pypto.DYNAMIC, 64], dtype)):
        pypto.set_vec_tile_shapes(8, 64)
        n = x.shape[0]
        for i in pypto.loop(0, (n + 7) // 8):
            tile = pypto.view(x, [8, 64], [i * 8, 0], valid_shape=[(n - i * 8).min(8), 64])
            pypto.assemble(pypto.exp(tile), [i * 8, 0], out)
    return kernel


# --- annotations ------------------------------------------------------------------------------
def test_annotations_checked_at_call_time():
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([pypto.DYNAMIC, 64], pypto.DT_FP32), out: pypto.Tensor([4, 64], pypto.DT_FP32)):
        seen["rows"] = x.shape[0]
        seen["static"] = out.shape
        pypto.set_vec_tile_shapes(4, 64)
        out[:] = pypto.view(x, [4, 64], [0, 0])

    seen = {}
    x = torch.randn(12, 64)
    out = torch.zeros(4, 64)
    kernel(x, out)
    assert torch.equal(out, x[:4])
    assert isinstance(seen["rows"], pypto.SymbolicScalar) and seen["rows"].value == 12
    assert seen["rows"].expr == "x.shape[0]" and not seen["rows"].is_concrete()
    assert seen["static"] == [4, 64]
    bad = [
        ((torch.randn(12, 64, dtype=torch.float16), out), "torch.float16"),
        ((x, torch.zeros(5, 64)), "axis 0 is 5"),
        ((torch.randn(12, 32), out), "axis 1 is 32"),
        ((x, [0.0] * 64), "got list"),
    ]
    for args, fragment in bad:
        with pytest.raises(ConstraintViolation, match=r"C-ARG-01") as info:
            kernel(*args)
        assert info.value.check_id == "C-ARG-01" and fragment in str(info.value)
    with pytest.raises(TypeError, match="at least 2 tensor"):
        kernel(x)


def test_static_status_accepts_any_size_and_is_concrete():
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([pypto.STATIC, 64], pypto.DT_FP32),
               out: pypto.Tensor([pypto.STATIC, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        assert x.shape[0] == 3 and isinstance(x.shape[0], int)
        out.move(pypto.neg(x))

    x = torch.randn(3, 64)
    out = torch.zeros_like(x)
    kernel(x, out)
    assert torch.equal(out, -x)


def test_named_dynamic_dims_bind_consistently():
    N = pypto.frontend.dynamic("N")

    @pypto.frontend.jit
    def kernel(a: pypto.Tensor([N, 64], pypto.DT_FP32), b: pypto.Tensor([N, 32], pypto.DT_FP32),
               out: pypto.Tensor([N, 64], pypto.DT_FP32)):
        assert a.shape[0].expr == "N" and b.shape[0].expr == "N"
        seen.append(a.shape[0].value)
        pypto.set_vec_tile_shapes(8, 64)
        for i in pypto.loop(0, (a.shape[0] + 7) // 8):
            rows = (a.shape[0] - i * 8).min(8)
            pypto.assemble(pypto.view(a, [8, 64], [i * 8, 0], valid_shape=[rows, 64]), [i * 8, 0], out)

    seen = []
    for n in (5, 17):  # each call binds N afresh
        a = torch.randn(n, 64)
        out = torch.zeros_like(a)
        kernel(a, torch.zeros(n, 32), out)
        assert torch.equal(out, a)
    assert seen == [5, 17]
    with pytest.warns(pypto.ConstraintWarning, match=r"\[A-ARG-03\].*N is 6.*bound to 5"):
        kernel(torch.zeros(5, 64), torch.zeros(6, 32), torch.zeros(5, 64))


def test_postponed_annotations_rejected_strict_resolved_lenient(tmp_path, monkeypatch):
    """pypto's parser treats string annotations as scalars: strict mode rejects the
    module flag (C-SYNTAX-01); lenient mode resolves them in the defining scope."""
    (tmp_path / "postponed_kernel.py").write_text(textwrap.dedent("""
        from __future__ import annotations
        import ptogym.interp as pypto

        def build(dtype, cols):
            @pypto.frontend.jit
            def kernel(x: pypto.Tensor([4, cols], dtype),
                       out: pypto.Tensor([4, cols], dtype)):
                pypto.set_vec_tile_shapes(4, 64)
                out.move(pypto.abs(x))
            return kernel
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "postponed_kernel", raising=False)
    import postponed_kernel
    with pytest.raises(ConstraintViolation, match="C-SYNTAX-01") as info:
        postponed_kernel.build(pypto.DT_BF16, 64)
    assert info.value.location == f"{tmp_path / 'postponed_kernel.py'}:6"
    with pypto.lenient(), pytest.warns(pypto.ConstraintWarning, match="C-SYNTAX-01"):
        kernel = postponed_kernel.build(pypto.DT_BF16, 64)
    x = torch.randn(4, 64, dtype=torch.bfloat16)
    out = torch.zeros_like(x)
    kernel(x, out)
    assert torch.equal(out, x.abs())
    with pytest.raises(ConstraintViolation, match="C-ARG-01"):
        kernel(x.float(), out.float())
    sys.modules.pop("postponed_kernel", None)


@pytest.mark.parametrize("construct, body", [
    ("nested def", "def helper(t):\n        return t\n    out.move(helper(x))"),
    ("lambda", "f = lambda t: t\n    out.move(f(x))"),
    ("while loop", "while False:\n        pass\n    out.move(x)"),
    ("with block", "with open(__file__):\n        pass\n    out.move(x)"),
    ("try block", "try:\n        out.move(x)\n    except ValueError:\n        pass"),
])
def test_constructs_pypto_cannot_parse_are_rejected_at_their_line(tmp_path, monkeypatch, construct, body):
    source = ("import ptogym.interp as pypto\n\n\n@pypto.frontend.jit\n"
              "def kernel(x: pypto.Tensor([4, 64], pypto.DT_FP32), out: pypto.Tensor([4, 64], pypto.DT_FP32)):\n"
              f"    {body}\n")
    path = tmp_path / "unparseable_kernel.py"
    path.write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "unparseable_kernel", raising=False)
    with pytest.raises(ConstraintViolation, match=construct) as info:
        import unparseable_kernel  # noqa: F401
    assert info.value.check_id == "C-SYNTAX-01"
    assert info.value.location == f"{path}:6"
    sys.modules.pop("unparseable_kernel", None)


# --- options, scalars, returns ------------------------------------------------------------------
def test_jit_options_recorded_and_visible():
    options = {"pass_options": {"vec_nbuffer_setting": {-1: 8}}, "runtime_options": {"stitch": 2},
               "debug_options": {"compile_debug_mode": 1}}

    @pypto.frontend.jit(**options)
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        seen["pass"] = pypto.get_pass_options()
        seen["runtime"] = pypto.get_runtime_options()
        seen["host"] = pypto.get_host_options()
        pypto.set_vec_tile_shapes(8, 64)
        out[:] = x

    seen = {}
    kernel(torch.ones(8, 64), torch.zeros(8, 64))
    assert kernel.options == options
    assert seen == {"pass": {"vec_nbuffer_setting": {-1: 8}}, "runtime": {"stitch": 2}, "host": {}}
    assert kernel.__name__ == "kernel"

    @pypto.frontend.jit()
    def plain(x: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pass
    assert plain.options == {}


def test_scalar_params_positional_and_keyword():
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32),
               scale: float, bias: float = 0.5):
        pypto.set_vec_tile_shapes(8, 64)
        out[:] = pypto.add(pypto.mul(x, scale), bias)

    x = torch.randn(8, 64)
    out = torch.zeros(8, 64)
    kernel(x, out, 2.0)
    assert torch.equal(out, x * 2.0 + 0.5)
    kernel(x, out, 3.0, -1.0)
    assert torch.equal(out, x * 3.0 - 1.0)
    kernel(x, out, scale=4.0, bias=0.25)
    assert torch.equal(out, x * 4.0 + 0.25)
    kernel(x, out, 5.0, bias=2.0)
    assert torch.equal(out, x * 5.0 + 2.0)


def test_return_and_other_unparsed_statements_are_refused_like_pypto():
    """pypto's parser refuses ``return`` (results go into out parameters), for-else,
    ``import`` and keyword-only parameters: C-SYNTAX-01 at the statement's line."""
    def defined(source):
        lines = source.splitlines()
        with pytest.raises(ConstraintViolation) as info:
            exec_kernel(source)
        return info.value, lines

    cases = [
        ("    return pypto.exp(x)", "return"),
        ("    for i in pypto.loop(2):\n        pass\n    else:\n        pass", "for-else"),
        ("    import math", "import"),
    ]
    for body, what in cases:
        err, _ = defined(f"def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32)):\n{body}\n")
        assert err.check_id == "C-SYNTAX-01" and what in err.details, err
        assert err.location.endswith(":6"), err.location  # the line after the decorator and def
    err, _ = defined("def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), *,\n"
                     "           out: pypto.Tensor([8, 64], pypto.DT_FP32)):\n    pass\n")
    assert err.check_id == "C-SYNTAX-01" and "keyword-only parameter" in err.details


def exec_kernel(source: str):
    """jit-compile kernel source written to a real file (the checks read the source)."""
    import importlib.util
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write("import ptogym.interp as pypto\n\n\n@pypto.frontend.jit\n" + source)
    spec = importlib.util.spec_from_file_location("kernel_source", f.name)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    finally:
        os.unlink(f.name)
    return module.kernel


def test_function_inlining():
    """pypto's parser inlines a @pypto.frontend.function where it is called: results go
    through out parameters (no return), non-tensor parameters take any value."""
    @pypto.frontend.function
    def axpy(a, b, out, factor):
        out[:] = pypto.add(pypto.mul(a, factor), b)

    @pypto.frontend.function()
    def twice(a: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        axpy(a, a, out, 1.0)

    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), y: pypto.Tensor([8, 64], pypto.DT_FP32),
               out: pypto.Tensor([8, 64], pypto.DT_FP32), out2: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        axpy(x, y, out, 2.0)
        twice(y, out2)

    @pypto.frontend.jit
    def misuse(x: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        twice(1.0, x)

    x, y = torch.randn(8, 64), torch.randn(8, 64)
    out, out2 = torch.zeros(8, 64), torch.zeros(8, 64)
    kernel(x, y, out, out2)
    assert torch.equal(out, x * 2.0 + y) and torch.equal(out2, y + y)
    assert axpy.__name__ == "axpy"
    with pytest.raises(ConstraintViolation) as info:
        misuse(x)
    assert info.value.check_id == "C-FRONT-02" and "twice(a=...): got float 1.0" in str(info.value)


# --- loops ------------------------------------------------------------------------------------
def test_loop_ranges_int_and_symbolic():
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([pypto.DYNAMIC, 64], pypto.DT_FP32)):
        n = x.shape[0]
        seen["stop"] = [i.value for i in pypto.loop(5)]
        seen["start_stop"] = [i.value for i in pypto.loop(2, 6)]
        seen["step"] = [i.value for i in pypto.loop(1, 10, 3)]
        seen["down"] = [i.value for i in pypto.loop(5, 0, -2)]
        seen["empty"] = [i.value for i in pypto.loop(4, 4)]
        seen["sym"] = [i.value for i in pypto.loop(n)]
        seen["sym_all"] = [i.value for i in pypto.loop(n // 4, n, n // 4)]
        seen["names"] = {i.expr for i in pypto.loop(2, name="L", idx_name="row")}
        seen["types"] = {type(i) for i in pypto.loop(0, n, 1)}

    seen = {}
    kernel(torch.zeros(12, 64))
    assert seen["stop"] == [0, 1, 2, 3, 4]
    assert seen["start_stop"] == [2, 3, 4, 5]
    assert seen["step"] == [1, 4, 7]
    assert seen["down"] == []  # pypto runs a loop with a negative step zero times (probe loop_negative_step)
    assert seen["empty"] == []
    assert seen["sym"] == list(range(12))
    assert seen["sym_all"] == [3, 6, 9]
    assert seen["names"] == {"row"}
    assert seen["types"] == {pypto.SymbolicScalar}
    with pytest.raises(TypeError):
        list(pypto.loop(1, 2, 3, 4))


UNROLL_LISTS = [[64, 16, 4, 2, 1], [8, 4], [5], [1], [4, 2], [6, 3]]  # each factor divides the larger ones


def unroll_plan(n, unroll_list, start=0):
    return [(i.value, f) for i, f in pypto.loop_unroll(start, n, 1, unroll_list=unroll_list)]


@settings(max_examples=300, deadline=None, derandomize=True)
@given(n=st.integers(3, 300), unroll_list=st.sampled_from(UNROLL_LISTS), start=st.integers(0, 3))
def test_loop_unroll_tiles_range_exactly(n, unroll_list, start):
    plan = unroll_plan(n, unroll_list, start)
    factors = set(unroll_list) | {1}
    covered = []
    position = start
    for index, factor in plan:
        assert index == position  # in order, no gap, no overlap
        assert factor == max(f for f in factors if f <= n - index)  # largest fitting factor first
        covered.extend(range(index, index + factor))
        position += factor
    assert covered == list(range(start, n))
    assert [f for _, f in plan] == sorted((f for _, f in plan), reverse=True)


def test_loop_unroll_examples_and_kernel():
    assert unroll_plan(87, [64, 16, 4, 2, 1]) == [(0, 64), (64, 16), (80, 4), (84, 2), (86, 1)]
    assert unroll_plan(3, [5]) == [(0, 1), (1, 1), (2, 1)]
    assert unroll_plan(0, [64, 16]) == []
    checks._advised.clear()
    # pypto's arithmetic (_controller.loop_unroll: left = (stop - start) % (step * factor)) when the
    # factors do not divide each other or the step does not divide the range: A-LOOP-01 says so
    with pytest.warns(pypto.ConstraintWarning, match=r"A-LOOP-01.*runs iterations \[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, "
                                                     r"10, 11\]\.\.\. instead of range\(0, 14, 1\)"):
        assert unroll_plan(14, [8, 3]) == [(0, 8), (8, 3), (11, 3), (12, 1), (13, 1)]  # 12, 13 twice
    checks._advised.clear()  # advice is shown once per site: unroll_plan's line again
    with pytest.warns(pypto.ConstraintWarning, match="A-LOOP-01"):
        assert unroll_plan(10, [8, 3]) == [(0, 8), (8, 3), (9, 1)]  # 8..10 past the end, 9 twice
    checks._advised.clear()
    with pytest.warns(pypto.ConstraintWarning, match=r"runs iterations \[1, 3, 5, 7, 9\] instead of range\(1, 12, 2\)"):
        steps = [(i.value, f) for i, f in pypto.loop_unroll(1, 12, 2, unroll_list=[4])]
    assert steps == [(1, 4), (9, 1)]  # iteration 11 is never run

    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([pypto.DYNAMIC, 64], pypto.DT_BF16),
               out: pypto.Tensor([pypto.DYNAMIC, 64], pypto.DT_BF16)):
        pypto.set_vec_tile_shapes(16, 64)
        for row, factor in pypto.loop_unroll(0, x.shape[0], 1, name="ROWS", idx_name="row", unroll_list=[16, 4, 1]):
            tile = pypto.view(x, [factor, 64], [row, 0])
            pypto.assemble(pypto.mul(tile, tile), [row, 0], out)

    for n in (0, 1, 23, 37, 64):
        x = torch.randn(n, 64, dtype=torch.bfloat16)
        out = torch.full_like(x, float("nan"))
        kernel(x, out)
        assert torch.equal(out, x * x)


def test_is_loop_begin_end():
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([pypto.DYNAMIC, 64], pypto.DT_FP32)):
        for i in pypto.loop(1, x.shape[0], 2):
            begin, end = pypto.is_loop_begin(i), pypto.is_loop_end(i)
            flags.append((i.value, begin.value == 1, end.value == 1))
            for j in pypto.loop(3):
                if pypto.is_loop_begin(j):
                    inner.append(("begin", i.value, j.value))
                if pypto.is_loop_end(j):
                    inner.append(("end", i.value, j.value))

    flags, inner = [], []
    kernel(torch.zeros(6, 64))
    assert flags == [(1, True, False), (3, False, False), (5, False, True)]
    assert inner == [("begin", 1, 0), ("end", 1, 2), ("begin", 3, 0), ("end", 3, 2), ("begin", 5, 0), ("end", 5, 2)]
    flags.clear()
    inner.clear()
    kernel(torch.zeros(2, 64))  # one iteration: both begin and end
    assert flags == [(1, True, True)]


def test_is_loop_begin_end_per_unroll_factor():
    """As in pypto, each unroll factor runs as its own sub-loop."""
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([pypto.DYNAMIC, 64], pypto.DT_FP32)):
        for i, factor in pypto.loop_unroll(0, x.shape[0], 1, unroll_list=[4]):
            flags.append((i.value, factor, pypto.is_loop_begin(i).value == 1, pypto.is_loop_end(i).value == 1))

    flags = []
    kernel(torch.zeros(10, 64))
    assert flags == [(0, 4, True, False), (4, 4, False, True), (8, 1, True, False), (9, 1, False, True)]


def accumulate_kernel(blocks_dynamic: bool):
    cols = pypto.DYNAMIC if blocks_dynamic else 256

    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, cols], pypto.DT_BF16), out: pypto.Tensor([8, 64], pypto.DT_BF16)):
        pypto.set_vec_tile_shapes(8, 64)
        acc = pypto.tensor([8, 64], pypto.DT_FP32, "acc")
        for i in pypto.loop(0, x.shape[1] // 64, 1, name="LOOP_K", idx_name="k"):
            tile = pypto.cast(pypto.view(x, [8, 64], [0, i * 64]), pypto.DT_FP32)
            if pypto.is_loop_begin(i):
                acc[:] = tile
            else:
                acc[:] = acc + tile
            if pypto.is_loop_end(i):
                pypto.assemble(pypto.cast(acc, pypto.DT_BF16), [0, 0], out)
    return kernel


@pytest.mark.parametrize("blocks_dynamic", [False, True])
def test_loop_carried_accumulation(blocks_dynamic):
    g = torch.Generator().manual_seed(3)
    for blocks in ((4,) if not blocks_dynamic else (1, 3, 4)):
        x = torch.randn(8, 64 * blocks, generator=g).to(torch.bfloat16)
        out = torch.zeros(8, 64, dtype=torch.bfloat16)
        accumulate_kernel(blocks_dynamic)(x, out)
        acc = x[:, 0:64].float()
        for b in range(1, blocks):
            acc = acc + x[:, 64 * b:64 * (b + 1)].float()  # same order, fp32, one rounding at the end
        assert torch.equal(out, acc.to(torch.bfloat16))
        if blocks > 1:
            bf16_acc = x[:, 0:64]
            for b in range(1, blocks):
                bf16_acc = bf16_acc + x[:, 64 * b:64 * (b + 1)]
            assert not torch.equal(out, bf16_acc)


# --- symbolic scalars ---------------------------------------------------------------------------
def test_a_constant_symbolic_scalar_converts_to_int_and_dtypes_have_whole_bytes():
    """pypto's own unit tests (ut/interface/test_symbolic_scalar.py, test_enum.py, recorded in
    tests/pypto_suite/fixtures): int() of a constant symbolic scalar is its value; bytes_of
    gives at least one byte (DT_INT4)."""
    assert int(pypto.symbolic_scalar(10)) == 10
    assert pypto.bytes_of(pypto.DT_INT4) == 1 and pypto.bytes_of(pypto.DT_BF16) == 2


def test_symbolic_scalar_arithmetic_and_comparisons():
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([pypto.DYNAMIC, pypto.DYNAMIC], pypto.DT_FP32)):
        n, m = x.shape
        seen["values"] = [(n + 3).value, (3 + n).value, (n - 2).value, (20 - n).value, (n * m).value,
                          (2 * n).value, (n // 3).value, (50 // n).value, (n % 4).value, (-n).value,
                          n.min(8).value, n.max(8).value, n.min(m).value, pypto.min(n, 4).value,
                          pypto.max(n, 40).value, pypto.ceildiv(n, 8).value]
        seen["expr"] = (n * 2 + 1).expr
        seen["conditions"] = [c.value == 1 for c in (n > 5, n < 5, n == 11, n != 11, n >= 11, n <= 10)]
        if n > m:
            seen["branch"] = "n > m"
        else:
            seen["branch"] = "n <= m"
        seen["as_variable"] = n.as_variable()
        seen["is_variable"] = n.is_variable
        seen["concrete"] = (pypto.SymbolicScalar(4).is_concrete(), n.is_concrete(), n.is_symbol())
        seen["kinds"] = [(v.is_symbol(), v.is_expression()) for v in (n, n + 1, pypto.SymbolicScalar(4))]
        seen["n"] = n

    seen = {}
    kernel(torch.zeros(11, 64))
    assert seen["values"] == [14, 14, 9, 9, 704, 22, 3, 4, 3, -11, 8, 11, 11, 4, 40, 2]
    assert seen["expr"] == "((x.shape[0]*2)+1)"
    assert seen["conditions"] == [True, False, True, False, True, False]
    assert seen["branch"] == "n <= m"
    assert seen["as_variable"] is None and seen["is_variable"] is True
    with pytest.raises(ConstraintViolation) as info:
        seen["n"].concrete()
    seen["concrete_error"] = info.value.check_id
    assert seen["concrete"] == (True, False, True)
    assert seen["kinds"] == [(True, False), (False, True), (False, False)]
    assert seen["concrete_error"] == "C-LOOP-03"
    named = pypto.SymbolicScalar("batch", 6)
    assert named.expr == "batch" and named.value == 6
    # a name given a value is concrete, as in pypto (upstream examples' symbolic_scalar.py, recorded
    # in tests/pypto_suite/program_fixtures/); a name alone is a runtime value
    assert named.is_concrete() and named.concrete() == 6 and pypto.SymbolicScalar(named).is_concrete()
    assert not pypto.SymbolicScalar("batch").is_concrete()
    # min/max of constants fold to a constant, which set_vec_tile_shapes takes (pypto calls
    # concrete() on it; the DeepSeek-V3.2 lightning indexer's pypto.min(s1_tile * heads, block))
    assert pypto.min(128, 64).is_concrete() and pypto.max(named, 8).concrete() == 8
    assert not seen["n"].min(8).is_concrete() and seen["n"].min(8).expr == "min(x.shape[0], 8)"
    assert pypto.ceildiv(17, 8) == 3


# --- configuration ---------------------------------------------------------------------------
def test_tile_shapes_set_and_get(restore_global_tiles):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        seen["inherited"] = pypto.get_vec_tile_shapes()
        pypto.set_vec_tile_shapes(4, 32)
        seen["vec"] = pypto.get_vec_tile_shapes()
        pypto.set_cube_tile_shapes([16, 32], [32, 64], [16, 16], True)
        seen["cube"] = pypto.get_cube_tile_shapes()
        out[:] = pypto.add(x, x)

    seen = {}
    runtime.GLOBAL_RUN.vec_tile = None
    runtime.GLOBAL_RUN.cube_tile = None
    assert pypto.get_vec_tile_shapes() == [] and pypto.get_cube_tile_shapes() == ([], [], [], False)
    kernel(torch.ones(8, 64), torch.zeros(8, 64))
    assert seen == {"inherited": [], "vec": [4, 32], "cube": ([16, 32], [32, 64], [16, 16], True)}
    assert pypto.get_vec_tile_shapes() == []  # kernel settings do not leak out

    pypto.set_vec_tile_shapes(8, 64)  # global settings are inherited by kernels
    pypto.set_options(cube_tile_shapes=[[16, 16], [16, 16], [16, 16]])
    kernel(torch.ones(8, 64), torch.zeros(8, 64))
    assert seen["inherited"] == [8, 64]
    assert pypto.get_cube_tile_shapes() == ([16, 16], [16, 16], [16, 16], False)


def test_semantic_label_and_operation_options():
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        pypto.set_semantic_label("scale-stage")
        seen["label"] = runtime.current().semantic_label
        pypto.experimental.set_operation_options(combine_axis=True, force_combine_axis=False)
        seen["operation"] = pypto.experimental.get_operation_options()
        pypto.set_pass_options(pg_upper_bound=1024)
        seen["pass"] = pypto.get_pass_options()
        out[:] = pypto.mul(x, 2.0)

    seen = {}
    x = torch.randn(8, 64)
    out = torch.zeros(8, 64)
    kernel(x, out)
    assert torch.equal(out, x * 2.0)
    assert seen == {"label": "scale-stage", "operation": {"combine_axis": True, "force_combine_axis": False},
                    "pass": {"pg_upper_bound": 1024}}


def test_platform_npuarch_and_set_platform(restore_platform):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        if pypto.platform.npuarch == "DAV_3510":
            out[:] = pypto.mul(x, 3.0)
        else:
            out[:] = pypto.mul(x, 2.0)

    x = torch.randn(8, 64)
    out = torch.zeros(8, 64)
    pypto.set_platform("DAV_2201")
    assert pypto.platform.npuarch == "DAV_2201"
    kernel(x, out)
    assert torch.equal(out, x * 2.0)
    pypto.set_platform("DAV_3510")
    assert pypto.platform.npuarch == "DAV_3510"
    kernel(x, out)
    assert torch.equal(out, x * 3.0)
    with pytest.raises(ValueError, match="DAV_9999"):
        pypto.set_platform("DAV_9999")
    assert pypto.platform.npuarch == "DAV_3510"


def test_platform_budgets_follow_the_profile(restore_platform):
    """UB budgets: 3 x 64 KB fp32 tiles fit DAV_2201's 192 KB exactly; 3 x 80 KB only
    fit DAV_3510's (assumed) 256 KB."""
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([64, 256], pypto.DT_FP32), out: pypto.Tensor([64, 256], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(64, 256)
        out[:] = pypto.exp(x)  # 2 x 64 KB = 128 KB... fits both
        out[:] = pypto.add(x, out)  # 3 x 64 KB = 192 KB = 196608 B: fits 2201 exactly

    x = torch.randn(64, 256)
    for arch in ("DAV_2201", "DAV_3510"):
        pypto.set_platform(arch)
        out = torch.zeros(64, 256)
        kernel(x, out)
        assert torch.equal(out, x + torch.exp(x))

    @pypto.frontend.jit
    def wide(x: pypto.Tensor([64, 400], pypto.DT_FP32), out: pypto.Tensor([64, 400], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(64, 400)
        out[:] = pypto.add(x, x)  # 2 x 100 KB (the result reuses an operand's buffer) = 204800 B

    x = torch.randn(64, 400)
    pypto.set_platform("DAV_3510")
    out = torch.zeros(64, 400)
    wide(x, out)
    assert torch.equal(out, x + x)
    pypto.set_platform("DAV_2201")
    with pytest.raises(ConstraintViolation) as info:
        wide(x, out)
    assert info.value.check_id == "C-TILE-03" and "204800 B" in str(info.value) and "196608 B" in str(info.value)


# --- devices and aliasing ------------------------------------------------------------------------
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no cuda"))]


@pytest.mark.parametrize("device", DEVICES)
def test_runs_on_the_tensors_device(device):
    x = torch.randn(21, 64, device=device)
    out = torch.zeros_like(x)
    exp_kernel()(x, out)
    assert out.device == x.device
    assert torch.equal(out.cpu(), torch.exp(x).cpu())

    @pypto.frontend.jit
    def workspace(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        tmp = pypto.tensor([8, 64], pypto.DT_FP32, "tmp")
        tmp[:] = pypto.add(x, 1.0)
        out[:] = pypto.mul(pypto.sub(tmp, pypto.full([8, 64], 0.5, pypto.DT_FP32)), x)

    x = torch.randn(8, 64, device=device)
    out = torch.zeros_like(x)
    workspace(x, out)
    assert torch.equal(out.cpu(), ((x + 1.0 - 0.5) * x).cpu())


def test_kernel_created_tensors_follow_the_argument_device():
    """pypto.tensor / full / zeros are allocated where the arguments live (the meta
    device stands in for an accelerator here)."""
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        tmp = pypto.tensor([8, 64], pypto.DT_FP32, "tmp")
        tmp[:] = pypto.full([8, 64], 1.0, pypto.DT_FP32)
        ones = pypto.ones(8, 64)
        seen.extend([tmp.data.device.type, ones.data.device.type])
        out[:] = pypto.add(pypto.add(tmp, x), ones)

    seen = []
    kernel(torch.empty(8, 64, device="meta"), torch.empty(8, 64, device="meta"))
    assert seen == ["meta", "meta"]
    x, out = torch.randn(8, 64), torch.zeros(8, 64)
    kernel(x, out)
    assert seen[2:] == ["cpu", "cpu"] and torch.equal(out, x + 1.0 + 1.0)


def test_in_place_aliasing_input_and_output():
    """The same torch tensor as input x and output out: each tile is read before its
    result is written, so the kernel is in place without scratch."""
    x = torch.randn(21, 64)
    expected = torch.exp(x)
    exp_kernel()(x, x)
    assert torch.equal(x, expected)

    @pypto.frontend.jit
    def shift(x: pypto.Tensor([16, 64], pypto.DT_FP32), out: pypto.Tensor([16, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        top = pypto.view(x, [8, 64], [0, 0])
        bottom = pypto.view(x, [8, 64], [8, 0])
        top_sum = pypto.add(top, bottom)  # computed before any write
        pypto.assemble(pypto.mul(bottom, 2.0), [0, 0], out)
        pypto.assemble(top_sum, [8, 0], out)

    x = torch.randn(16, 64)
    before = x.clone()
    shift(x, x)
    assert torch.equal(x[:8], before[8:] * 2.0)
    assert torch.equal(x[8:], before[:8] + before[8:])


# --- launcher --------------------------------------------------------------------------------------
SCRIPT = """
import os
import sys
import torch
import pypto
import pypto.frontend

@pypto.frontend.jit
def kernel(x: pypto.Tensor([pypto.DYNAMIC, 64], pypto.DT_FP32), out: pypto.Tensor([pypto.DYNAMIC, 64], pypto.DT_FP32)):
    pypto.set_vec_tile_shapes(8, 64)
    pypto.assemble(pypto.add(pypto.view(x, [8, 64], [0, 0]), 1.0), [0, 0], out)

x = torch.zeros(8, 64)
out = torch.zeros(8, 64)
kernel(x, out)
with open(sys.argv[1], "w") as f:
    f.write(" ".join(sys.argv[1:]) + "|" + pypto.__name__ + "|" + str(float(out.sum())) + "|" + pypto.platform.npuarch)
if len(sys.argv) > 2:
    sys.exit(int(sys.argv[2]) if sys.argv[2].isdigit() else sys.argv[2])
"""


@pytest.fixture
def launcher_sandbox(monkeypatch):
    """Undo what a launch changes process-wide: pypto bindings, sys.argv/path, lenient
    mode, platform, and the modules the launched code imports."""
    names = ["pypto", *pypto.PYPTO_MODULES, "launched_mod"]  # every module bind_pypto() replaces
    saved = {name: sys.modules[name] for name in names if name in sys.modules}
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(checks._mode, "lenient", False)  # strict, whatever $PTOGYM_LENIENT says
    profile = interp_platform.profile
    pypto.set_platform("DAV_2201")
    yield
    interp_platform.profile = profile
    for name in names:
        sys.modules.pop(name, None)
    sys.modules.update(saved)


def test_launcher_runs_script_with_import_pypto(tmp_path, launcher_sandbox):
    script = tmp_path / "user_script.py"
    script.write_text(SCRIPT)
    report = tmp_path / "report.txt"
    assert launcher.main([str(script), str(report)]) == 0
    assert report.read_text() == f"{report}|ptogym.interp|512.0|DAV_2201"
    assert sys.modules["pypto"] is pypto
    assert sys.argv == [str(script), str(report)]
    assert launcher.main([str(script), str(report), "3"]) == 3
    assert launcher.main([str(script), str(report), "0"]) == 0
    assert launcher.main([str(script), str(report), "boom"]) == 1  # sys.exit("message")
    assert launcher.main(["--platform", "DAV_3510", str(script), str(report)]) == 0
    assert report.read_text().endswith("|DAV_3510")


def test_launcher_module_mode(tmp_path, launcher_sandbox):
    (tmp_path / "launched_mod.py").write_text(SCRIPT)
    sys.path.insert(0, str(tmp_path))
    report = tmp_path / "report.txt"
    assert launcher.main(["-m", "launched_mod", str(report), "7"]) == 7
    assert report.read_text() == f"{report} 7|ptogym.interp|512.0|DAV_2201"


def test_launcher_shows_the_programs_traceback_and_lenient(tmp_path, launcher_sandbox, capsys):
    script = tmp_path / "bad_script.py"
    script.write_text(textwrap.dedent("""
        import torch
        import pypto

        @pypto.frontend.jit
        def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
            pypto.set_vec_tile_shapes(8, 64)
            pypto.assemble(pypto.view(x, [8, 64], [0, 0]), [4, 0], out)

        kernel(torch.ones(8, 64), torch.zeros(8, 64))
    """))
    assert launcher.main([str(script)]) == 1  # as `python bad_script.py`: the traceback, exit 1
    shown = capsys.readouterr().err
    assert f"ConstraintViolation: [C-ASSEMBLE-01] {script}:8: " in shown
    frames = [line for line in shown.splitlines() if line.startswith("  File ")]
    assert frames == [f'  File "{script}", line 10, in <module>', f'  File "{script}", line 8, in kernel']
    assert launcher.main(["--debug", str(script)]) == 1  # every frame
    assert 'ptogym/interp/frontend.py", line' in capsys.readouterr().err
    with pytest.warns(pypto.ConstraintWarning) as record:
        assert launcher.main(["--lenient", str(script)]) == 0
    ids = [str(w.message).split("]")[0].lstrip("[") for w in record]
    assert ids == ["C-ASSEMBLE-01", "A-OUT-01"]  # clipped assemble, so half of out stays unwritten
    assert not checks.is_lenient()  # lenient only for the launched program


def test_launcher_usage_errors(capsys, launcher_sandbox):
    assert launcher.main([]) == 2
    assert launcher.main(["--bogus", "x.py"]) == 2
    assert launcher.main(["-m"]) == 2
    assert launcher.main(["--help"]) == 0
    assert "ptogym interp" in capsys.readouterr().out


def test_launcher_lists_every_check(capsys):
    assert launcher.main(["--checks"]) == 0
    *listed, verdict = [line.split(maxsplit=2) for line in capsys.readouterr().out.splitlines()]
    assert [row[0] for row in listed] == [*checks.CHECKS, *checks.ADVICE, *checks.LIMITS, *checks.SANITIZER]
    classes = {"A": "advice", "L": "limit", "C": "error", "S": "sanitizer"}
    assert all(row[1] == classes[row[0][0]] for row in listed)
    assert all(row[2] == checks.rule_of(row[0]) for row in listed)
    assert verdict[0] == "[OK]" and " ".join(verdict).endswith(
        f"{len(checks.CHECKS)} error checks, {len(checks.ADVICE)} advice, {len(checks.LIMITS)} resource limits, "
        f"{len(checks.SANITIZER)} sanitizer checks (--sanitize)")


# --- pypto's value semantics for views, moves and element access -------------------------------------
def test_move_into_a_view_is_loop_carried_state_not_a_write():
    """``state = states[i]; ...; state[:] = new`` rebinds the view (pypto: Tensor.move on a
    graph value); the parameter it was viewed from keeps its contents."""
    @pypto.frontend.jit
    def kernel(states: pypto.Tensor([2, 8, 64], pypto.DT_FP32), out: pypto.Tensor([2, 8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        for b in pypto.loop(2):
            state = states[b]
            for step in pypto.loop(3):
                state[:] = pypto.mul(state, 2.0)
            out[b] = state

    states = torch.randn(2, 8, 64)
    before = states.clone()
    out = torch.zeros(2, 8, 64)
    kernel(states, out)
    assert torch.equal(states, before)
    assert torch.equal(out, before * 8)


def test_element_access_of_int32_tensors():
    """``t[i, j]`` reads one DT_INT32 element as a runtime scalar; ``t[i, j] = v`` writes
    exactly one element; other dtypes refuse element reads (pypto asserts DT_INT32)."""
    @pypto.frontend.jit
    def kernel(idx: pypto.Tensor([2, 2], pypto.DT_INT32), x: pypto.Tensor([4, 64], pypto.DT_FP32),
               out: pypto.Tensor([2, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(1, 64)
        for i in pypto.loop(2):
            row = idx[i, 1]
            seen.append((row.expr, row.value, row.is_concrete()))
            out[i:i + 1, :] = pypto.exp(x[row:row + 1, :])
        idx[0, 0] = 7

    seen = []
    idx = torch.tensor([[5, 3], [6, 0]], dtype=torch.int32)
    x = torch.randn(4, 64)
    out = torch.zeros(2, 64)
    kernel(idx, x, out)
    assert seen == [("idx[i, 1]", 3, False), ("idx[i, 1]", 0, False)]
    assert torch.equal(out, torch.exp(x[[3, 0]]))
    assert idx.tolist() == [[7, 3], [6, 0]]

    @pypto.frontend.jit
    def float_read(x: pypto.Tensor([4, 64], pypto.DT_FP32)):
        x[0, 0]

    with pytest.raises(ConstraintViolation, match=r"C-API-06.*needs a DT_INT32 tensor, got DT_FP32"):
        float_read(x)


def test_tail_tile_reshape_view_and_broadcast_keep_valid_extents():
    """A tail tile holds its valid rows only: reshape takes valid_shape, a view is bounded
    by the static shape (not the valid data), and a broadcast axis with no valid data
    leaves an empty result instead of a torch error."""
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([pypto.DYNAMIC, 64], pypto.DT_FP32), out: pypto.Tensor([pypto.DYNAMIC, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        n = x.shape[0]
        for i in pypto.loop(0, (n + 7) // 8):
            valid = (n - i * 8).min(8)
            tile = pypto.view(x, [8, 64], [i * 8, 0], valid_shape=[valid, 64])
            flat = pypto.reshape(tile, [8, 64], valid_shape=[valid, 64])
            upper = pypto.view(flat, [4, 64], [4, 0])  # beyond the valid rows of the last tile: in bounds
            seen.append(list(upper.data.shape))
            columns = pypto.transpose(flat, 0, 1)  # [64, 8] holding [64, valid]
            one = pypto.view(columns, [64, 1], [0, 4])  # column 4: no valid data in a 2-row tile
            seen.append(list(pypto.mul(one, pypto.view(columns, [64, 8], [0, 0])).data.shape))
            pypto.assemble(pypto.exp(flat), [i * 8, 0], out)

    seen = []
    x = torch.randn(10, 64)
    out = torch.zeros(10, 64)
    kernel(x, out)
    assert torch.equal(out, torch.exp(x))
    assert seen == [[4, 64], [64, 8], [0, 64], [64, 0]]  # the second tile has 2 valid rows


def test_npu_run_mode_is_one_warning_naming_the_option():
    with pytest.warns(RuntimeWarning, match=r"runtime_options\['run_mode'\] = RunMode.NPU is NPU-only") as record:
        @pypto.frontend.jit(runtime_options={"run_mode": pypto.RunMode.NPU})
        def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32)):
            pass
    assert record[0].filename == __file__
    x = torch.ones(8, 64)
    kernel(x)  # runs here all the same
    assert launcher._one_line_warning("m", RuntimeWarning, "k.py", 3) == "k.py:3: RuntimeWarning: m\n"


def test_named_dynamic_dim_used_in_the_body_has_the_bound_value():
    rows = pypto.frontend.dynamic("ROWS")

    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([rows, 64], pypto.DT_FP32), out: pypto.Tensor([rows, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        for i in pypto.loop(rows // 8):
            pypto.assemble(pypto.neg(pypto.view(x, [8, 64], [i * 8, 0])), [i * 8, 0], out)

    for n in (16, 24):
        x, out = torch.randn(n, 64), torch.zeros(n, 64)
        kernel(x, out)
        assert torch.equal(out, -x)
