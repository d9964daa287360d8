"""The API-completion names that the real-pypto fixture cannot cover: control and
configuration calls, the experimental gathers, Tensor methods, in-place refusals,
and the shapes the fixture kernels did not reach (multi-group sort32, every
gathermask pattern).  References are plain torch or pypto's documented examples.
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import ptogym.interp as pypto
from interp_helpers import assert_same, run_op


def rand(shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(shape, generator=g, dtype=torch.float64) * 8 - 4).to(dtype)


# --- control and configuration ----------------------------------------------------------
def test_cond_is_the_runtime_truth_of_its_scalar():
    assert bool(pypto.cond(3)) is True and bool(pypto.cond(0)) is False
    assert bool(pypto.cond(pypto.SymbolicScalar("n", 0))) is False
    with pytest.raises(ValueError, match="file and lineno"):
        pypto.cond(1, file="kernel.py")


def test_options_scope_restores_tiles_and_options():
    pypto.set_vec_tile_shapes(8, 64)
    with pypto.options(vec_tile_shapes=[4, 32], pass_options={"x": 1}, matrix_size=[64, 64]):
        assert pypto.get_vec_tile_shapes() == [4, 32] and pypto.get_pass_options() == {"x": 1}
    assert pypto.get_vec_tile_shapes() == [8, 64] and "x" not in pypto.get_pass_options()

    @pypto.options(cube_tile_shapes=pypto.CubeTile([16, 16], [32, 64], [16, 32]))
    def inside():
        return pypto.get_cube_tile_shapes()

    assert inside()[:3] == ([16, 16], [32, 64], [16, 32])
    with pytest.raises(NotImplementedError, match="conv"):
        pypto.options(conv_tile_shapes=object())


def test_pass_and_global_config_read_back_what_was_set():
    key = pypto.PassConfigKey.KEY_DUMP_GRAPH
    assert pypto.get_pass_config("s", "id", key, False) is False
    pypto.set_pass_default_config(key, True)
    assert pypto.get_pass_configs("s", "id").dump_graph is True
    pypto.set_pass_config("s", "id", key, False)
    assert pypto.get_pass_config("s", "id", key, True) is False
    pypto.set_global_config("platform.name", "x")
    assert pypto.get_global_config("platform.name") == "x"


def test_convert_to_element_picks_pypto_dtypes():
    assert pypto.convert_to_element(7).dtype is pypto.DT_INT32
    assert pypto.convert_to_element(2 ** 40).dtype is pypto.DT_INT64
    assert pypto.convert_to_element(0.5).dtype is pypto.DT_FP32
    assert [s.value for s in pypto.to_syms([1, pypto.SymbolicScalar("n", 4)])] == [1, 4]


def test_pass_verify_print_and_save(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("PTOGYM_VERIFY_DIR", str(tmp_path))
    x = torch.arange(8, dtype=torch.float32).reshape(1, 8)

    def body(t):
        pypto.pass_verify_print("step=", 3, " x=", t)
        pypto.pass_verify_print("never", cond=0)
        pypto.pass_verify_save(t, "dump_$i", i=5)
        pypto.pass_verify_save(t, "skipped", cond=0)
        return pypto.add(t, 0.0)

    run_op(body, [x], x, tile=(1, 8))
    assert capsys.readouterr().out.startswith("step=3 x=tensor([[0., 1., 2., 3., 4., 5., 6., 7.]])")
    assert [p.name for p in tmp_path.iterdir()] == ["dump_5.pt"]
    assert torch.equal(torch.load(tmp_path / "dump_5.pt"), x)


# --- pypto_impl / op_wrapper ------------------------------------------------------------
def test_scalar_div_s_direct_and_reversed():
    x = rand([8, 64]).abs() + 0.5
    three = pypto.pypto_impl.Element(pypto.DT_FP32, 3.0)
    assert_same(run_op(lambda t: pypto.pypto_impl.ScalarDivS(t, three), [x], x), x / 3.0)
    assert_same(run_op(lambda t: pypto.pypto_impl.ScalarDivS(t, three, True), [x], x),
                torch.div(torch.full_like(x, 3.0), x))


# --- experimental -----------------------------------------------------------------------
def test_gather_in_ub_follows_the_block_table():
    """pypto's documented example: 2 tokens per block, blocks [0, 2, 1]."""
    param = torch.tensor([[r * 10 + c for c in range(16)] for r in range(6)], dtype=torch.float16)
    indices = torch.tensor([[0, 4, 3]], dtype=torch.int32)
    table = torch.tensor([[0, 2, 1]], dtype=torch.int32)
    got = run_op(lambda p, i, b: pypto.experimental.gather_in_ub(p, i, b, 2, -2), [param, indices, table],
                 (param[[0, 2, 5]].shape, torch.float16), tile=(8, 16))
    assert_same(got, param[[0, 2, 5]])


def test_transposed_batchmatmul_is_a_batched_matmul_over_the_middle_axis():
    a, b = rand([16, 2, 32], torch.float16, 1), rand([2, 32, 64], torch.float16, 2)
    got = run_op(lambda x, y: pypto.experimental.transposed_batchmatmul(x, y, pypto.DT_FP32), [a, b],
                 ([16, 2, 64], torch.float32), tile=None, cube=([16, 16], [32, 32], [64, 64]))
    ref = torch.einsum("mbk,bkn->mbn", a.double(), b.double())
    torch.testing.assert_close(got.double(), ref, rtol=1e-5, atol=1e-4)


# --- tensor methods and in-place forms ----------------------------------------------------
def test_tensor_methods_match_the_functions():
    x = rand([8, 64])

    def body(t):
        u = pypto.clone(t)
        u.tril_(1)
        return pypto.add(pypto.add(u, t.cumsum(1)), t.triu(2))

    ref = torch.tril(x, 1) + torch.cumsum(x, 1) + torch.triu(x, 2)
    assert_same(run_op(body, [x], x), ref)

    def fill(t):
        u = pypto.clone(t)
        return u.fill_(2.5)

    assert_same(run_op(fill, [x], x), torch.full_like(x, 2.5))


def test_refused_index_put_leaves_the_input_unchanged():
    x = rand([8, 64])
    values = rand([2, 64], seed=3)
    before = x.clone()

    def body(t, v):
        idx = pypto.arange(6, 10, 2)  # rows 6 and 8: 8 is out of range
        pypto.index_put_(t, (idx,), v)
        return t

    with pytest.raises(pypto.ConstraintViolation, match=r"C-API-06.*\[6, 8\] outside \[0, 8\)"):
        run_op(body, [x, values], x)
    assert torch.equal(x, before)


def test_scatter_rejects_an_unknown_reduce_like_pypto():
    x = rand([8, 64])
    idx = torch.zeros(8, 64, dtype=torch.int32)
    with pytest.raises(ValueError, match="'add', 'multiply'"):
        run_op(lambda t, i: pypto.scatter(t, 1, i, 1.0, reduce="max"), [x, idx], x)


# --- shapes beyond the recorded cases ----------------------------------------------------------
def test_sort32_sorts_each_group_of_32_with_offset_indices():
    x = torch.randperm(4 * 64, generator=torch.Generator().manual_seed(0)).reshape(4, 64).float()
    got = run_op(lambda t: pypto.sort32(t, 100), [x], ([4, 128], torch.float32), tile=(4, 128))
    groups = x.reshape(4, 2, 32)
    values, order = torch.sort(groups, -1, descending=True)
    positions = order + torch.tensor([0, 32]).reshape(1, 2, 1) + 100
    assert_same(got, torch.stack([values, positions.float()], -1).reshape(4, 128))


@pytest.mark.parametrize("pattern,period,kept", [(1, 2, 0), (2, 2, 1), (3, 4, 0), (4, 4, 1), (5, 4, 2),
                                                 (6, 4, 3), (7, 1, 0)])
def test_gathermask_patterns(pattern, period, kept):
    x = rand([8, 64])
    ref = x[:, kept::period].contiguous()
    assert_same(run_op(lambda t: pypto.gathermask(t, pattern), [x], ref), ref)


def test_operators_pypto_defines_on_tensor():
    x, y = rand([8, 64], seed=1).abs() + 0.5, rand([8, 64], seed=2).abs() + 0.5

    def body(a, b):
        return (+a) ** 2.0 + a % 1.5 + a // b + 3.0 / b

    ref = torch.pow(x, 2.0) + torch.remainder(x, 1.5) + torch.floor(x / y) + torch.reciprocal(y) * 3.0
    assert_same(run_op(body, [x, y], x), ref)
    got = run_op(lambda p, q: pypto.logical_and(p == q, p != q), [x, x.clone()], (x.shape, torch.bool))
    assert not got.any()
    assert len({pypto.Tensor([1], pypto.DT_FP32) for _ in range(3)}) == 3  # still hashable, by identity
    a, b = rand([16, 32], torch.float16, 3), rand([32, 16], torch.float16, 4)
    got = run_op(lambda p, q: p @ q, [a, b], ([16, 16], torch.float16), tile=None,
                 cube=([16, 16], [32, 32], [16, 16]))
    torch.testing.assert_close(got.double(), a.double() @ b.double(), rtol=2e-3, atol=2e-3)


PUBLISHED_STYLE = '''
import torch
import pypto
from pypto import pypto_impl
from pypto.enum import TileOpFormat
from pypto.operation import op_wrapper


@op_wrapper
def scalar_div(input, other, is_reserve=False):
    return pypto_impl.ScalarDivS(input, pypto_impl.Element(input.dtype, other), is_reserve)


@pypto.frontend.jit
def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
    pypto.set_vec_tile_shapes(8, 64)
    pypto.set_matrix_size([8, 64])
    row_max = pypto.expand_clone(pypto.amax(x, -1, keepdim=True), [8, 64])
    out[:] = pypto.cumsum(scalar_div(x - row_max, 2.0), 1)


x = torch.linspace(-3, 3, 512).reshape(8, 64)
out = torch.zeros(8, 64)
kernel(x, out)
ref = torch.cumsum((x - x.amax(-1, keepdim=True)) / 2.0, 1)
assert torch.equal(out, ref), (out - ref).abs().max()
assert TileOpFormat is pypto.TileOpFormat
print("ok")
'''


def test_published_style_program_runs_unmodified_under_ptogym_interp(tmp_path):
    script = tmp_path / "published.py"
    script.write_text(PUBLISHED_STYLE)
    repo = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=str(repo))
    done = subprocess.run([sys.executable, "-m", "ptogym", "interp", str(script)], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout + done.stderr


def test_symbolic_true_division_floors_and_unary_plus_is_identity():
    """pypto's SymbolicScalar ``/`` is its Div, floor division like ``//`` (upstream
    ut/interface/test_symbolic_scalar.py: "always floordiv"); ``+s`` is s."""
    n = pypto.SymbolicScalar("n", 7)
    assert (n / 2).value == 3 and (9 / n).value == 1 and (-n / 2).value == -4
    assert (pypto.SymbolicScalar("a", 20) / pypto.SymbolicScalar("b", 10)).value == 2
    assert (+n).value == 7
    assert (~n).value == 0 and (~pypto.SymbolicScalar("z", 0)).value == 1  # pypto's Not
