"""One negative test per constraint check of ptogym.interp (``checks.CHECKS``).

Every case below is a small program breaking exactly one rule.  The offending
statement carries a ``# MARK: <case>`` comment; the test asserts the error is a
``ConstraintViolation`` (a ValueError) with the case's ``check_id``, that its
``location`` is this file at the marked line, and that the message holds the
offending values.  ``test_every_check_has_a_case`` keeps CASES and CHECKS (and
ADVICE_CASES and ADVICE) in step.  The same cases then run under ``lenient()``: they
warn instead and carry on.  Advice cases warn once per site and can be silenced.

Real pypto 0.2.0 decides what is an error: ``test_probe_agrees_with_real_pypto`` runs
every probe of ``check_probes.py`` and compares with pypto's recorded verdict and
outputs (``fixtures/checks_pypto.json``); a few run live (``-m pypto``).
"""
import importlib.util
import json
import linecache
import os
import pathlib
import warnings
from dataclasses import dataclass

import pytest
import torch

import ptogym.interp as pypto
from ptogym.interp import CHECKS, ConstraintViolation, ConstraintWarning, checks, lenient, runtime
from ptogym.interp.platform import platform as interp_platform
from check_probes import PROBES, SUITE_EVIDENCE
from interp_helpers import assert_same, decode_entry, recorder_output

F32, BF16, I32 = pypto.DT_FP32, pypto.DT_BF16, pypto.DT_INT32


@dataclass
class Case:
    check_id: str
    name: str
    run: object
    fragments: tuple
    lenient_runs: bool  # whether the program runs to its end in lenient mode


CASES: list[Case] = []
ADVICE_CASES: list[Case] = []


def case(check_id, *fragments, lenient_runs=True, into=CASES):
    def register(fn):
        into.append(Case(check_id, fn.__name__, fn, fragments, lenient_runs))
        return fn
    return register


def advice_case(check_id, *fragments):
    """A program pypto accepts that gets one piece of advice (at the marked line)."""
    return case(check_id, *fragments, into=ADVICE_CASES)


def marked_line(name: str) -> int:
    """Line number in this file of the statement tagged ``# MARK: name``."""
    lines = [i for i, text in enumerate(linecache.getlines(__file__), 1) if text.rstrip().endswith(f"# MARK: {name}")]
    assert len(lines) == 1, f"marker {name!r} found on lines {lines}"
    return lines[0]


@pytest.fixture(autouse=True)
def clean_state(monkeypatch):
    """Kernels inherit global tile shapes and the platform: start from none / DAV_2201,
    in strict mode whatever $PTOGYM_LENIENT says."""
    monkeypatch.setattr(checks._mode, "lenient", False)
    monkeypatch.setattr(checks, "_advised", set())
    monkeypatch.setattr(checks, "_silenced", set())
    vec, cube, profile = runtime.GLOBAL_RUN.vec_tile, runtime.GLOBAL_RUN.cube_tile, interp_platform.profile
    runtime.GLOBAL_RUN.vec_tile = runtime.GLOBAL_RUN.cube_tile = None
    pypto.set_platform("DAV_2201")
    yield
    runtime.GLOBAL_RUN.vec_tile, runtime.GLOBAL_RUN.cube_tile, interp_platform.profile = vec, cube, profile


def z(*shape, dtype=torch.float32):
    return torch.zeros(shape, dtype=dtype)


def r(*shape, dtype=torch.float32):
    return torch.randn(shape, generator=torch.Generator().manual_seed(0)).to(dtype)


# --- C-ARG ------------------------------------------------------------------------------------------
@pypto.frontend.jit
def copy_kernel(x: pypto.Tensor([8, 64], F32), out: pypto.Tensor([8, 64], F32)):
    pypto.set_vec_tile_shapes(8, 64)
    out[:] = pypto.add(x, 0.0)


@pypto.frontend.jit
def rank_free_kernel(x: pypto.Tensor([pypto.STATIC, pypto.STATIC, pypto.STATIC], F32), out: pypto.Tensor([8, 64], F32)):
    pypto.set_vec_tile_shapes(8, 64)
    out[:] = pypto.add(pypto.reshape(x, [8, 64], inplace=True), 0.0)


@advice_case("A-ARG-04", "rank_free_kernel(x=...)", "rank 2 [8, 64]", "needs rank 3")
def arg_rank_lower():
    """pypto binds the tensor's own rank (its CHECKATTR debug mode alone compares the
    annotation's): the DeepSeek-V3.2 lightning indexer passes a [T, N] scale to a rank-3 one."""
    rank_free_kernel(z(8, 64), z(8, 64))  # MARK: arg_rank_lower


@case("C-ARG-01", "dtype torch.bfloat16, annotation says DT_FP32")
def arg_dtype():
    copy_kernel(z(8, 64), z(8, 64, dtype=torch.bfloat16))  # MARK: arg_dtype


@case("C-ARG-01", "axis 0 is 4, annotation says 8", "shape [4, 64]")
def arg_static_dim():
    copy_kernel(z(4, 64), z(8, 64))  # MARK: arg_static_dim


@case("C-ARG-02", "non-contiguous", "strides (1, 8)")
def arg_contiguous():
    copy_kernel(z(64, 8).t(), z(8, 64))  # MARK: arg_contiguous


@case("C-ARG-02", "(out=...): on meta, other tensors on cpu")
def arg_device():
    copy_kernel(z(8, 64), torch.empty(8, 64, device="meta"))  # MARK: arg_device


N = pypto.frontend.dynamic("N")


@pypto.frontend.jit
def paired_kernel(a: pypto.Tensor([N, 64], F32), b: pypto.Tensor([N, 64], F32)):
    pypto.set_vec_tile_shapes(8, 64)
    b[:] = pypto.view(a, [8, 64], [0, 0], valid_shape=[a.shape[0].min(8), 64])


@advice_case("A-ARG-03", "dynamic dim N is 6 on axis 0, bound to 5")
def arg_named_dim():
    paired_kernel(z(5, 64), z(6, 64))  # MARK: arg_named_dim


# --- C-LOOP -------------------------------------------------------------------------------------------
DYN = pypto.DYNAMIC


@pypto.frontend.jit
def dyn_kernel_range(x: pypto.Tensor([DYN, 64], F32), out: pypto.Tensor([DYN, 64], F32)):
    pypto.set_vec_tile_shapes(1, 64)
    for i in range(x.shape[0]):  # MARK: loop_range
        out[i:i + 1, :] = x[i:i + 1, :]


@case("C-LOOP-02", "range() over symbolic x.shape[0] (= 3)", "pypto.loop")
def loop_range():
    dyn_kernel_range(z(3, 64), z(3, 64))


@pypto.frontend.jit
def dyn_kernel_int(x: pypto.Tensor([DYN, 64], F32), out: pypto.Tensor([DYN, 64], F32)):
    rows = int(x.shape[0])  # MARK: loop_int
    pypto.set_vec_tile_shapes(rows, 64)
    out.move(pypto.neg(x))


@case("C-LOOP-03", "int() of symbolic x.shape[0] (= 3)")
def loop_int():
    dyn_kernel_int(z(3, 64), z(3, 64))


@pypto.frontend.jit
def dyn_kernel_bool(x: pypto.Tensor([DYN, 64], F32), out: pypto.Tensor([DYN, 64], F32)):
    pypto.set_vec_tile_shapes(8, 64)
    has_rows = bool(x.shape[0])  # MARK: loop_bool
    if has_rows:
        out.move(pypto.neg(x))


@case("C-LOOP-03", "symbolic x.shape[0] (= 3) used as a Python bool")
def loop_bool():
    dyn_kernel_bool(z(3, 64), z(3, 64))


@pypto.frontend.jit
def dyn_kernel_list_index(x: pypto.Tensor([DYN, 64], F32), out: pypto.Tensor([DYN, 64], F32)):
    scales = [1.0, 2.0, 3.0, 4.0]
    pypto.set_vec_tile_shapes(8, 64)
    out.move(pypto.mul(x, scales[x.shape[0]]))  # MARK: loop_list_index


@case("C-LOOP-03", "symbolic x.shape[0] (= 3) used as a Python index/int")
def loop_list_index():
    dyn_kernel_list_index(z(3, 64), z(3, 64))


@pypto.frontend.jit
def dyn_kernel_slice(x: pypto.Tensor([DYN, 64], F32), out: pypto.Tensor([DYN, 64], F32)):
    pypto.set_vec_tile_shapes(8, 64)
    for i in pypto.loop(x.shape[0] // 8):
        tile = x[i * 8:x.shape[0], :]  # MARK: loop_slice
        pypto.assemble(tile, [i * 8, 0], out)


@case("C-TILE-06", "slice on axis 0 of 'x': length x.shape[0]=16 - (i*8)=0 depends on runtime values", "pypto.view")
def loop_slice():
    dyn_kernel_slice(z(16, 64), z(16, 64))


@pypto.frontend.jit
def begin_kernel(x: pypto.Tensor([8, 64], F32), out: pypto.Tensor([8, 64], F32)):
    pypto.set_vec_tile_shapes(8, 64)
    if pypto.is_loop_begin(3):  # MARK: loop_begin_int
        out.move(pypto.neg(x))


@case("C-LOOP-07", "pypto.is_loop_begin(3): not a pypto.loop index")
def loop_begin_int():
    begin_kernel(z(8, 64), z(8, 64))


@pypto.frontend.jit
def end_kernel(x: pypto.Tensor([DYN, 64], F32), out: pypto.Tensor([DYN, 64], F32)):
    pypto.set_vec_tile_shapes(8, 64)
    for i in pypto.loop(0, x.shape[0], 8):
        pypto.assemble(pypto.neg(pypto.view(x, [8, 64], [i, 0])), [i, 0], out)
    if pypto.is_loop_end(x.shape[0]):  # MARK: loop_end_dim
        pypto.assemble(pypto.view(x, [8, 64], [0, 0]), [0, 0], out)


@case("C-LOOP-07", "pypto.is_loop_end(SymbolicScalar(x.shape[0]=8))")
def loop_end_dim():
    end_kernel(z(8, 64), z(8, 64))


# --- C-TILE -------------------------------------------------------------------------------------------
@pypto.frontend.jit
def bf16_24_kernel(x: pypto.Tensor([8, 24], BF16), out: pypto.Tensor([8, 24], BF16)):
    pypto.set_vec_tile_shapes(8, 24)
    out[:] = pypto.exp(x)  # MARK: tile_unaligned


@advice_case("A-TILE-02", "pypto.exp", "tile last dim 24 x 2 B (DT_BF16) = 48 B", "multiple of 32 B",
             "tile [8, 24]")
def tile_unaligned():
    bf16_24_kernel(z(8, 24, dtype=torch.bfloat16), z(8, 24, dtype=torch.bfloat16))


@pypto.frontend.jit
def one_hot_kernel(x: pypto.Tensor([8], I32), out: pypto.Tensor([8, 16], I32)):
    pypto.set_vec_tile_shapes(8, 64)
    out[:] = pypto.one_hot(x, 16)  # MARK: tile_one_hot_classes


@case("C-TILE-10", "pypto.one_hot(..., 16) under vec tile [8, 64]", "last dim 64 must equal num_classes")
def tile_one_hot_classes():
    one_hot_kernel(torch.arange(8, dtype=torch.int32) % 4, z(8, 16, dtype=torch.int32))


@pypto.frontend.jit
def remainder_kernel(x: pypto.Tensor([8, 64], I32), y: pypto.Tensor([8, 64], I32), out: pypto.Tensor([8, 64], I32)):
    pypto.set_vec_tile_shapes(8, 64)
    out[:] = pypto.remainder(x, y)  # MARK: int_remainder_by_zero


@advice_case("A-DIV-01", "pypto.remainder: 512 integer divisor element(s) are zero")
def int_remainder_by_zero():
    out = z(8, 64, dtype=torch.int32)
    remainder_kernel(torch.full((8, 64), 7, dtype=torch.int32), z(8, 64, dtype=torch.int32), out)
    assert bool((out == torch.iinfo(torch.int32).min).all())


@pypto.frontend.jit
def ub_kernel(x: pypto.Tensor([64, 512], F32), out: pypto.Tensor([64, 512], F32)):
    pypto.set_vec_tile_shapes(64, 512)
    out[:] = pypto.add(x, x)  # MARK: tile_ub


@case("C-TILE-03", "pypto.add", "262144 B of UB (the result in an operand's buffer) > 196608 B on DAV_2201",
      "vec tile [64, 512]")
def tile_ub():
    ub_kernel(z(64, 512), z(64, 512))


@pypto.frontend.jit
def sum_kernel(x: pypto.Tensor([32, 1024], F32), out: pypto.Tensor([32, 1], F32)):
    pypto.set_vec_tile_shapes(32, 1024)
    out[:] = pypto.sum(x, -1, keepdim=True)  # MARK: tile_sum_buffer


@case("C-TILE-04", "pypto.sum input tile [32, 1024] x 4 B = 131072 B, its result rows 1024 B and the 65536 B reduction buffer: 197632 B > 196608 B")
def tile_sum_buffer():
    sum_kernel(z(32, 1024), z(32, 1))


@pypto.frontend.jit
def amax_unaligned_kernel(x: pypto.Tensor([16, 8], F32), out: pypto.Tensor([16, 1], F32)):
    pypto.set_vec_tile_shapes(16, 2)
    out[:] = pypto.amax(x, -1, keepdim=True)  # MARK: tile_reduce_unaligned


@case("C-TILE-09", "pypto.amax along the last axis of [16, 8] under vec tile [16, 2]",
      "last dim 2 x 4 B (DT_FP32) = 8 B is not a multiple of 32 B")
def tile_reduce_unaligned():
    amax_unaligned_kernel(z(16, 8), z(16, 1))


@pypto.frontend.jit
def cube_ratio_kernel(a: pypto.Tensor([16, 64], BF16), b: pypto.Tensor([64, 16], BF16),
                      out: pypto.Tensor([16, 16], F32)):
    pypto.set_cube_tile_shapes([16, 40], [32, 64], [16, 16])  # MARK: tile_cube_ratio
    out[:] = pypto.matmul(a, b, F32)


@case("C-TILE-05", "m=[16, 40] needs 0 < L0 <= L1 and L1 % L0 == 0")
def tile_cube_ratio():
    cube_ratio_kernel(z(16, 64, dtype=torch.bfloat16), z(64, 16, dtype=torch.bfloat16), z(16, 16))


@pypto.frontend.jit
def cube_capacity_kernel(a: pypto.Tensor([128, 512], F32), b: pypto.Tensor([512, 16], F32),
                         out: pypto.Tensor([128, 16], F32)):
    pypto.set_cube_tile_shapes([128, 128], [512, 512], [16, 16])
    out[:] = pypto.matmul(a, b, F32)  # MARK: tile_cube_capacity


@case("C-TILE-05", "m[128, 128] k[512, 512] n[16, 16] on a [128, 512] x [512, 16] matmul uses m[128, 128] "
      "k[512, 512] n[16, 16] with DT_FP32: 262144 B of L0A > 65536 B")
def tile_cube_capacity():
    cube_capacity_kernel(z(128, 512), z(512, 16), z(128, 16))


@pypto.frontend.jit
def view_symbolic_shape_kernel(x: pypto.Tensor([DYN, 64], F32), out: pypto.Tensor([DYN, 64], F32)):
    pypto.set_vec_tile_shapes(8, 64)
    tile = pypto.view(x, [x.shape[0], 64], [0, 0])  # MARK: tile_view_symbolic
    out.move(pypto.neg(tile))


@case("C-TILE-06", "view shape[0] of 'x' is SymbolicScalar(x.shape[0]=5)", "valid_shape")
def tile_view_symbolic():
    view_symbolic_shape_kernel(z(5, 64), z(5, 64))


@pypto.frontend.jit
def no_tile_kernel(x: pypto.Tensor([8, 64], F32), out: pypto.Tensor([8, 64], F32)):
    out[:] = pypto.exp(x)  # MARK: tile_not_set


@case("C-TILE-06", "pypto.exp before any pypto.set_vec_tile_shapes")
def tile_not_set():
    no_tile_kernel(z(8, 64), z(8, 64))


@pypto.frontend.jit
def float_tile_kernel(x: pypto.Tensor([8, 64], F32), out: pypto.Tensor([8, 64], F32)):
    pypto.set_vec_tile_shapes(8.0, 64)  # MARK: tile_float
    out[:] = pypto.exp(x)


@case("C-TILE-06", "set_vec_tile_shapes(8.0, 64): entry 0 is 8.0")
def tile_float():
    float_tile_kernel(z(8, 64), z(8, 64))


@pypto.frontend.jit
def no_cube_kernel(a: pypto.Tensor([16, 32], BF16), b: pypto.Tensor([32, 16], BF16), out: pypto.Tensor([16, 16], F32)):
    out[:] = pypto.matmul(a, b, F32)  # MARK: tile_no_cube


@case("C-TILE-06", "pypto.matmul before any pypto.set_cube_tile_shapes")
def tile_no_cube():
    no_cube_kernel(z(16, 32, dtype=torch.bfloat16), z(32, 16, dtype=torch.bfloat16), z(16, 16))


@pypto.frontend.jit
def rank_tile_kernel(x: pypto.Tensor([2, 8, 64], F32), out: pypto.Tensor([2, 8, 64], F32)):
    pypto.set_vec_tile_shapes(8, 64)
    out[:] = pypto.exp(x)  # MARK: tile_rank


@case("C-TILE-08", "pypto.exp: vec tile [8, 64] (rank 2) on x [2, 8, 64] (rank 3)")
def tile_rank():
    rank_tile_kernel(z(2, 8, 64), z(2, 8, 64))


# --- C-VIEW ---------------------------------------------------------------------------------------------
@pypto.frontend.jit
def view_oob_kernel(x: pypto.Tensor([8, 64], F32), out: pypto.Tensor([8, 64], F32)):
    pypto.set_vec_tile_shapes(8, 64)
    tile = pypto.view(x, [8, 64], [4, 0])  # MARK: view_oob
    pypto.assemble(tile, [0, 0], out)


@advice_case("A-VIEW-01", "view of 'x' axis 0: offset 4 + extent 8 > 8", "source [8, 64]", "valid_shape None",
             "clipped to the source")
def view_oob():
    view_oob_kernel(r(8, 64), z(8, 64))


@pypto.frontend.jit
def slice_oob_kernel(x: pypto.Tensor([8, 64], F32), out: pypto.Tensor([8, 32], F32)):
    out[:] = x[:, 33:65]  # MARK: view_slice_oob


@advice_case("A-VIEW-01", "axis 1: offset 33 + extent 32 > 64")  # one element over
def view_slice_oob():
    slice_oob_kernel(r(8, 64), z(8, 32))


@pypto.frontend.jit
def view_rank_kernel(x: pypto.Tensor([8, 64], F32), out: pypto.Tensor([8, 64], F32)):
    tile = pypto.view(x, [64], [0, 0])  # MARK: view_rank
    out[:] = tile


@case("C-VIEW-02", "view of rank-2 'x': shape [64], offsets [0, 0]", lenient_runs=False)
def view_rank():
    view_rank_kernel(z(8, 64), z(8, 64))


@pypto.frontend.jit
def index_rank_kernel(x: pypto.Tensor([8, 64], F32), out: pypto.Tensor([8, 64], F32)):
    out[:] = x[0, 0, 0]  # MARK: view_index_rank


@case("C-VIEW-02", "index with 3 entries on rank-2 tensor 'x'", lenient_runs=False)
def view_index_rank():
    index_rank_kernel(z(8, 64), z(8, 64))


@pypto.frontend.jit
def valid_shape_kernel(x: pypto.Tensor([8, 64], F32), out: pypto.Tensor([8, 64], F32)):
    tile = pypto.view(x, [4, 64], [0, 0], valid_shape=[8, 64])  # MARK: view_valid_too_big
    pypto.assemble(tile, [0, 0], out)


@advice_case("A-VIEW-03", "view of 'x' axis 0: valid 8 > shape 4")
def view_valid_too_big():
    valid_shape_kernel(r(8, 64), z(8, 64))


@pypto.frontend.jit
def negative_offset_kernel(x: pypto.Tensor([8, 64], F32), out: pypto.Tensor([8, 64], F32)):
    tile = pypto.view(x, [8, 32], [0, -32])  # MARK: view_negative_offset
    pypto.assemble(tile, [0, 0], out)


@case("C-VIEW-03", "axis 1: offset -32, valid 32, shape 32")
def view_negative_offset():
    negative_offset_kernel(r(8, 64), z(8, 64))


# --- C-ASSEMBLE, C-GRAPH, C-MEM, C-OUT -------------------------------------------------------------
@pypto.frontend.jit
def assemble_oob_kernel(x: pypto.Tensor([8, 64], F32), out: pypto.Tensor([8, 64], F32)):
    pypto.assemble(x, [4, 0], out)  # MARK: assemble_oob


@case("C-ASSEMBLE-01", "assemble into 'out' axis 0: offset 4 + tile 8 > 8", "destination [8, 64]")
def assemble_oob():
    assemble_oob_kernel(r(8, 64), z(8, 64))


@pypto.frontend.jit
def valid_int_kernel(x: pypto.Tensor([pypto.DYNAMIC, 32], pypto.DT_INT32),
                     out: pypto.Tensor([8, 32], pypto.DT_INT32)):
    pypto.set_vec_tile_shapes(4, 32)
    for i in pypto.loop(2):
        tile = pypto.view(x, [4, 32], [i * 4, 0], valid_shape=[pypto.min(4, x.shape[0] - i * 4), 32])
        ones = pypto.full([4, 32], 1, pypto.DT_INT32, valid_shape=[4, 32])
        pypto.assemble(pypto.add(ones, tile), [i * 4, 0], out)  # MARK: valid_int


@advice_case("A-VALID-01", "result valid extent [4, 32]", "common valid data [2, 32]")
def valid_int():
    valid_int_kernel(torch.ones(6, 32, dtype=torch.int32), torch.zeros(8, 32, dtype=torch.int32))


def test_binary_result_is_valid_over_its_first_operand():
    """Measured on pypto 0.2.0 (probes valid_binary_*): add(full, tail) is valid over the
    whole tile, its rows past the tail undefined (NaN here); add(tail, full) over the tail."""
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([pypto.DYNAMIC, 32], F32), out: pypto.Tensor([8, 32], F32),
               out2: pypto.Tensor([8, 32], F32)):
        pypto.set_vec_tile_shapes(4, 32)
        for i in pypto.loop(2):
            tile = pypto.view(x, [4, 32], [i * 4, 0], valid_shape=[pypto.min(4, x.shape[0] - i * 4), 32])
            ones = pypto.full([4, 32], 1.0, F32, valid_shape=[4, 32])
            pypto.assemble(pypto.add(ones, tile), [i * 4, 0], out)
            pypto.assemble(pypto.add(tile, ones), [i * 4, 0], out2)

    x, out, out2 = r(6, 32), torch.full((8, 32), -7.0), torch.full((8, 32), -7.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConstraintWarning)
        kernel(x, out, out2)
    assert torch.equal(out[:6], x + 1) and out[6:].isnan().all()
    assert torch.equal(out2[:6], x + 1) and (out2[6:] == -7).all()


@pypto.frontend.jit
def assemble_rank_kernel(x: pypto.Tensor([8, 64], F32), out: pypto.Tensor([8, 64], F32)):
    pypto.assemble(x, [0], out)  # MARK: assemble_rank


@case("C-ASSEMBLE-02", "assemble rank-2 tile at offsets [0] into rank-2 'out'", lenient_runs=False)
def assemble_rank():
    assemble_rank_kernel(r(8, 64), z(8, 64))


@pypto.frontend.jit
def graph_kernel(x: pypto.Tensor([16, 64], F32)):
    pypto.set_vec_tile_shapes(8, 64)
    tile = pypto.view(x, [8, 64], [0, 0])
    pypto.assemble(pypto.exp(tile), [8, 0], x)  # MARK: graph_view_then_assemble


@case("C-GRAPH-01", "parameter 'x' is both viewed and assembled into")
def graph_view_then_assemble():
    graph_kernel(r(16, 64))


@pypto.frontend.jit
def graph_kernel_2(x: pypto.Tensor([16, 64], F32), y: pypto.Tensor([8, 64], F32)):
    pypto.assemble(y, [0, 0], x)
    y[:] = pypto.view(x, [8, 64], [8, 0])  # MARK: graph_assemble_then_view


@case("C-GRAPH-01", "parameter 'x' is viewed after being assembled into")
def graph_assemble_then_view():
    graph_kernel_2(r(16, 64), r(8, 64))


@pypto.frontend.jit
def graph_kernel_3(x: pypto.Tensor([8, 64], F32)):
    pypto.set_vec_tile_shapes(8, 64)
    pypto.assemble(pypto.exp(x), [0, 0], x)  # MARK: graph_read_then_assemble


@case("C-GRAPH-01", "parameter 'x' is assembled into after being read")
def graph_read_then_assemble():
    graph_kernel_3(r(8, 64))


@pypto.frontend.jit
def graph_kernel_4(x: pypto.Tensor([8, 64], F32), out: pypto.Tensor([8, 64], F32)):
    pypto.set_vec_tile_shapes(8, 64)
    out[:] = pypto.exp(x)
    out[0:4, :] = pypto.view(x, [4, 64], [4, 0])  # MARK: graph_move_then_assemble


@case("C-GRAPH-02", "parameter 'out': __setitem__ after a move into it")
def graph_move_then_assemble():
    graph_kernel_4(r(8, 64), z(8, 64))


@pypto.frontend.jit
def graph_kernel_5(x: pypto.Tensor([8, 64], F32), out: pypto.Tensor([8, 64], F32)):
    pypto.set_vec_tile_shapes(8, 64)
    tile = pypto.tensor([8, 64], F32, "tile")
    tile[:] = pypto.full([8, 64], 0.0, F32)
    pypto.assemble(pypto.view(x, [4, 32], [0, 0]), [0, 0], tile)  # MARK: graph_move_then_assemble_workspace
    out[:] = pypto.add(tile, 1.0)


@case("C-GRAPH-02", "workspace 'tile': assemble after a move into it in the same loop body")
def graph_move_then_assemble_workspace():
    graph_kernel_5(r(8, 64), z(8, 64))


@pypto.frontend.jit
def uninitialised_kernel(x: pypto.Tensor([8, 64], F32), out: pypto.Tensor([8, 64], F32)):
    pypto.set_vec_tile_shapes(8, 64)
    acc = pypto.tensor([8, 64], F32, "acc")
    out[:] = pypto.add(acc, x)  # MARK: mem_unwritten


@case("C-MEM-01", "read of 'acc' region [0:8, 0:64]: nothing written to 'acc' yet")
def mem_unwritten():
    uninitialised_kernel(r(8, 64), z(8, 64))


@pypto.frontend.jit
def partly_written_kernel(x: pypto.Tensor([8, 64], F32), out: pypto.Tensor([8, 64], F32)):
    pypto.set_vec_tile_shapes(8, 64)
    acc = pypto.tensor([8, 64], F32, "acc")
    acc[0:4, :] = x[0:4, :]
    acc[4:8, 0:32] = x[4:8, 0:32]
    out[:] = pypto.mul(acc, 2.0)  # MARK: mem_partial


@advice_case("A-MEM-01", "read of 'acc' region [0:8, 0:64]: 128 element(s) never written, first at [4, 32]")
def mem_partial():
    partly_written_kernel(r(8, 64), z(8, 64))


@pypto.frontend.jit
def half_output_kernel(x: pypto.Tensor([8, 64], F32), out: pypto.Tensor([8, 64], F32)):  # MARK: out_partial
    pypto.set_vec_tile_shapes(4, 64)
    out[0:4, :] = pypto.exp(x[0:4, :])
    out[4:8, 0:16] = x[4:8, 0:16]


@advice_case("A-OUT-01", "output out [8, 64]: 192 element(s) never written, first at index [4, 16]")
def out_partial():
    half_output_kernel(r(8, 64), z(8, 64))


@pypto.frontend.jit
def unused_param_kernel(x: pypto.Tensor([8, 64], F32), out: pypto.Tensor([8, 64], F32),  # MARK: out_never
                        forgotten: pypto.Tensor([8, 64], F32)):
    pypto.set_vec_tile_shapes(8, 64)
    out[:] = pypto.exp(x)


@advice_case("A-OUT-01", "parameter forgotten [8, 64] is never read or written")
def out_never():
    unused_param_kernel(r(8, 64), z(8, 64), z(8, 64))


# --- C-API ----------------------------------------------------------------------------------------------
@pypto.frontend.jit
def mixed_kernel(a: pypto.Tensor([8, 64], BF16), b: pypto.Tensor([8, 64], F32), out: pypto.Tensor([8, 64], F32)):
    pypto.set_vec_tile_shapes(8, 64)
    out[:] = pypto.add(a, b)  # MARK: api_mixed


@case("C-API-01", "pypto.add: DT_BF16 [8, 64] with DT_FP32 [8, 64]", "cast")
def api_mixed():
    mixed_kernel(z(8, 64, dtype=torch.bfloat16), z(8, 64), z(8, 64))


@pypto.frontend.jit
def assemble_dtype_kernel(x: pypto.Tensor([8, 64], F32), out: pypto.Tensor([8, 64], BF16)):
    pypto.assemble(x, [0, 0], out)  # MARK: api_assemble_dtype


@case("C-API-01", "assemble of a DT_FP32 tile into DT_BF16 'out'")
def api_assemble_dtype():
    assemble_dtype_kernel(r(8, 64), z(8, 64, dtype=torch.bfloat16))


@pypto.frontend.jit
def element_dtype_kernel(x: pypto.Tensor([8, 64], BF16), out: pypto.Tensor([8, 64], BF16)):
    pypto.set_vec_tile_shapes(8, 64)
    out[:] = pypto.mul(x, pypto.Element(pypto.DT_FP32, 2.0))  # MARK: api_element_dtype


@case("C-API-06", "pypto.mul: Element(DT_FP32, 2.0) as the scalar operand; pass a Python number")
def api_element_dtype():
    element_dtype_kernel(z(8, 64, dtype=torch.bfloat16), z(8, 64, dtype=torch.bfloat16))


@pypto.frontend.jit
def scalar_first_kernel(x: pypto.Tensor([8, 64], F32), out: pypto.Tensor([8, 64], F32)):
    pypto.set_vec_tile_shapes(8, 64)
    out[:] = pypto.mul(3.0, x)  # MARK: api_scalar_first


@case("C-API-06", "pypto.mul(3.0, ...): the first operand must be a Tensor")
def api_scalar_first():
    scalar_first_kernel(r(8, 64), z(8, 64))


@pypto.frontend.jit
def two_axis_broadcast_kernel(x: pypto.Tensor([8, 64], F32), one: pypto.Tensor([1, 1], F32),
                              out: pypto.Tensor([8, 64], F32)):
    pypto.set_vec_tile_shapes(8, 64)
    out[:] = pypto.add(x, one)  # MARK: api_broadcast_two_axes


@case("C-API-03", "[1, 1] would expand on axes [0, 1]; pypto expands one axis of an operand per op")
def api_broadcast_two_axes():
    two_axis_broadcast_kernel(r(8, 64), r(1, 1), z(8, 64))


def test_fp32_scalar_operands_clamp_to_the_largest_finite_value():
    """pypto clamps an FP32 scalar operand to +-FLT_MAX (measured by the conformance corpus)."""
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], F32), out: pypto.Tensor([8, 64], F32)):
        pypto.set_vec_tile_shapes(8, 64)
        out[:] = pypto.add(pypto.mul(x, 0.0), float("inf"))

    out = z(8, 64)
    kernel(r(8, 64), out)
    assert (out == torch.finfo(torch.float32).max).all()


@pypto.frontend.jit
def mm_pair_kernel(a: pypto.Tensor([16, 32], BF16), b: pypto.Tensor([32, 16], pypto.DT_FP16),
                   out: pypto.Tensor([16, 16], F32)):
    pypto.set_cube_tile_shapes([16, 16], [32, 32], [16, 16])
    out[:] = pypto.matmul(a, b, F32)  # MARK: api_mm_bf16_fp16


@case("C-API-02", "pypto.matmul: DT_BF16 x DT_FP16 -> DT_FP32")
def api_mm_bf16_fp16():
    mm_pair_kernel(z(16, 32, dtype=torch.bfloat16), z(32, 16, dtype=torch.float16), z(16, 16))


@pypto.frontend.jit
def scaled_mm_kernel(a: pypto.Tensor([16, 64], BF16), b: pypto.Tensor([64, 16], BF16),
                     sa: pypto.Tensor([16, 1, 2], F32), sb: pypto.Tensor([1, 16, 2], F32),
                     out: pypto.Tensor([16, 16], F32)):
    pypto.set_cube_tile_shapes([16, 16], [64, 64], [16, 16])
    out[:] = pypto.scaled_mm(a, b, F32, sa, sb)  # MARK: api_scaled_mm_bf16


@case("C-API-02", "pypto.scaled_mm: DT_BF16 x DT_BF16; needs one fp8 type")
def api_scaled_mm_bf16():
    scaled_mm_kernel(z(16, 64, dtype=torch.bfloat16), z(64, 16, dtype=torch.bfloat16), z(16, 1, 2), z(1, 16, 2),
                     z(16, 16))


@pypto.frontend.jit
def broadcast_kernel(a: pypto.Tensor([8, 64], F32), b: pypto.Tensor([4, 64], F32), out: pypto.Tensor([8, 64], F32)):
    pypto.set_vec_tile_shapes(8, 64)
    out[:] = pypto.mul(a, b)  # MARK: api_broadcast


@case("C-API-03", "pypto.mul: shapes [8, 64] and [4, 64] do not broadcast")
def api_broadcast():
    broadcast_kernel(r(8, 64), r(4, 64), z(8, 64))


@pypto.frontend.jit
def broadcast_rank_kernel(a: pypto.Tensor([8, 64], F32), b: pypto.Tensor([32], F32), out: pypto.Tensor([8, 64], F32)):
    pypto.set_vec_tile_shapes(8, 64)
    out[:] = pypto.add(a, b)  # MARK: api_broadcast_rank


@case("C-API-03", "pypto.add: shapes [8, 64] and [1, 32] do not broadcast", lenient_runs=False)
def api_broadcast_rank():
    broadcast_rank_kernel(r(8, 64), r(32), z(8, 64))


@pypto.frontend.jit
def sum_bf16_kernel(x: pypto.Tensor([8, 64], BF16), out: pypto.Tensor([8, 1], BF16)):
    pypto.set_vec_tile_shapes(8, 64)
    out[:] = pypto.sum(x, -1, keepdim=True)  # MARK: api_sum_bf16


@advice_case("A-SUM-01", "pypto.sum on DT_BF16 [8, 64]", "cast to DT_FP32")
def api_sum_bf16():
    sum_bf16_kernel(z(8, 64, dtype=torch.bfloat16), z(8, 1, dtype=torch.bfloat16))


@pypto.frontend.jit
def step_kernel(x: pypto.Tensor([8, 64], F32), out: pypto.Tensor([8, 32], F32)):
    out[:] = x[:, 0:64:2]  # MARK: api_slice_step


@case("C-API-06", "slice step 2 on axis 1")
def api_slice_step():
    step_kernel(r(8, 64), z(8, 32))


@pypto.frontend.jit
def reduce_dim_kernel(x: pypto.Tensor([8, 64], F32), out: pypto.Tensor([8, 1], F32)):
    pypto.set_vec_tile_shapes(8, 64)
    out[:] = pypto.amax(x, 2, keepdim=True)  # MARK: api_reduce_dim


@case("C-API-06", "pypto.amax: dim 2 out of range for rank 2")
def api_reduce_dim():
    reduce_dim_kernel(r(8, 64), z(8, 1))


@pypto.frontend.jit
def index_range_kernel(x: pypto.Tensor([8, 64], F32), idx: pypto.Tensor([4], pypto.DT_INT32),
                       out: pypto.Tensor([4, 64], F32)):
    pypto.set_vec_tile_shapes(4, 64)
    out[:] = pypto.index_select(x, 0, idx)  # MARK: api_index_range


@case("C-API-06", "pypto.index_select: index values in [0, 8] outside [0, 8)", lenient_runs=False)
def api_index_range():
    index_range_kernel(r(8, 64), torch.tensor([0, 3, 8, 1], dtype=torch.int32), z(4, 64))


@pypto.frontend.jit
def where_kernel(c: pypto.Tensor([8, 64], F32), x: pypto.Tensor([8, 64], F32), out: pypto.Tensor([8, 64], F32)):
    pypto.set_vec_tile_shapes(8, 64)
    out[:] = pypto.where(c, x, 0.0)  # MARK: api_where_cond


@case("C-API-06", "pypto.where: condition is DT_FP32, needs DT_BOOL", lenient_runs=False)
def api_where_cond():
    where_kernel(r(8, 64), r(8, 64), z(8, 64))


@pypto.frontend.jit
def mm_inner_kernel(a: pypto.Tensor([16, 32], BF16), b: pypto.Tensor([16, 32], BF16), out: pypto.Tensor([16, 32], F32)):
    pypto.set_cube_tile_shapes([16, 16], [32, 32], [16, 16])
    out[:] = pypto.matmul(a, b, F32)  # MARK: api_mm_inner


@case("C-API-06", "pypto.matmul: inner dims differ: [16, 32] x [16, 32]", "b_trans=False", lenient_runs=False)
def api_mm_inner():
    mm_inner_kernel(z(16, 32, dtype=torch.bfloat16), z(16, 32, dtype=torch.bfloat16), z(16, 32))


@pypto.frontend.jit
def shift_int32_kernel(x: pypto.Tensor([8, 64], pypto.DT_INT32), out: pypto.Tensor([8, 64], pypto.DT_INT32)):
    pypto.set_vec_tile_shapes(8, 64)
    out[:] = pypto.bitwise_left_shift(x, 2)  # MARK: api_shift_int32


# real pypto's CheckBitwiseShiftDtype rejects it: tests/fixtures/api_ops.pt, case bitwise_left_shift_int32
@case("C-API-07", "pypto.bitwise_left_shift on DT_INT32 [8, 64]", lenient_runs=True)
def api_shift_int32():
    shift_int32_kernel(torch.zeros(8, 64, dtype=torch.int32), torch.zeros(8, 64, dtype=torch.int32))


@pypto.frontend.jit
def dynamic_whole_kernel(x: pypto.Tensor([pypto.DYNAMIC, 64], F32), out: pypto.Tensor([pypto.DYNAMIC, 64], F32)):
    pypto.set_vec_tile_shapes(8, 64)
    out.move(pypto.exp(x))  # MARK: loop_dynamic_whole


@case("C-LOOP-01", "pypto.exp on x", "dynamic dim x.shape[0] outside any pypto.loop")
def loop_dynamic_whole():
    dynamic_whole_kernel(r(16, 64), z(16, 64))


@pypto.frontend.jit
def unroll_extent_kernel(x: pypto.Tensor([DYN, 64], F32), out: pypto.Tensor([DYN, 64], F32)):
    pypto.set_vec_tile_shapes(8, 64)
    for i, factor in pypto.loop_unroll(0, x.shape[0], 1, name="ROWS", unroll_list=[4]):
        tile = pypto.view(x, [1, 64], [i, 0])  # MARK: loop_unroll_extent
        pypto.assemble(pypto.neg(tile), [i, 0], out)


@advice_case("A-LOOP-02", "spans 1 on axis 0", "covers 4", "ROWS_LoopUnroll4")
def loop_unroll_extent():
    unroll_extent_kernel(r(8, 64), z(8, 64))


@pypto.frontend.jit
def zero_step_kernel(x: pypto.Tensor([8, 64], F32), out: pypto.Tensor([8, 64], F32)):
    pypto.set_vec_tile_shapes(8, 64)
    for i in pypto.loop(0, 8, 0):  # MARK: loop_zero_step
        out[:] = pypto.exp(x)


@case("C-LOOP-09", "pypto.loop(0, 8, 0): step 0")
def loop_zero_step():
    zero_step_kernel(r(8, 64), z(8, 64))


@pypto.frontend.jit
def bad_unroll_kernel(x: pypto.Tensor([8, 64], F32), out: pypto.Tensor([8, 64], F32)):
    pypto.set_vec_tile_shapes(1, 64)
    for i, factor in pypto.loop_unroll(0, 8, 1, unroll_list=[-2, 0, 4]):  # MARK: loop_unroll_factors
        pypto.assemble(pypto.exp(pypto.view(x, [1, 64], [i, 0])), [i, 0], out)


@case("C-LOOP-09", "pypto.loop_unroll(0, 8, 1, unroll_list=[-2, 0, 4]): factors [0] are not non-zero ints",
      lenient_runs=False)
def loop_unroll_factors():
    bad_unroll_kernel(r(8, 64), z(8, 64))


@pypto.frontend.jit
def odd_unroll_kernel(x: pypto.Tensor([14, 64], F32), out: pypto.Tensor([14, 64], F32)):
    pypto.set_vec_tile_shapes(8, 64)
    for i, factor in pypto.loop_unroll(0, 14, 1, unroll_list=[8, 3]):  # MARK: loop_unroll_overlap
        pypto.assemble(pypto.exp(pypto.view(x, [factor, 64], [i, 0])), [i, 0], out)


@advice_case("A-LOOP-01", "runs iterations", "instead of range(0, 14, 1)")
def loop_unroll_overlap():
    odd_unroll_kernel(r(14, 64), z(14, 64))


@pypto.frontend.jit
def builtin_min_kernel(x: pypto.Tensor([DYN, 64], F32), out: pypto.Tensor([DYN, 64], F32)):
    pypto.set_vec_tile_shapes(8, 64)
    for i in pypto.loop(x.shape[0] // 8):
        rows = min(x.shape[0] - i * 8, 8)  # MARK: syntax_builtin_min
        pypto.assemble(pypto.view(x, [8, 64], [i * 8, 0], valid_shape=[rows, 64]), [i * 8, 0], out)


@case("C-SYNTAX-01", "built-in min/max over runtime value", "use pypto.min/pypto.max")
def syntax_builtin_min():
    builtin_min_kernel(r(16, 64), z(16, 64))


@case("C-SYNTAX-01", "while loop inside kernel loop_kernel")
def syntax_while():
    @pypto.frontend.jit
    def loop_kernel(x: pypto.Tensor([8, 64], F32), out: pypto.Tensor([8, 64], F32)):
        while False:  # MARK: syntax_while
            pass
        out[:] = x


# --- C-FRONT / A-FRONT: the frontend's signatures ------------------------------------------------------
@case("C-FRONT-01", "pypto.frontend.jit() got unexpected keyword argument(s) ['fast_math']")
def front_jit_option():
    @pypto.frontend.jit(fast_math=True)  # MARK: front_jit_option
    def kernel(x: pypto.Tensor([8, 64], F32)):
        pypto.set_vec_tile_shapes(8, 64)
        x[:] = pypto.exp(x)


@pypto.frontend.function
def add_into(x, out):
    out[:] = pypto.add(x, x)


@pypto.frontend.jit
def keyword_call_kernel(x: pypto.Tensor([8, 64], F32), out: pypto.Tensor([8, 64], F32)):
    pypto.set_vec_tile_shapes(8, 64)
    add_into(x, out=out)  # MARK: front_keyword_call


@case("C-FRONT-02", "add_into(..., out=...): keyword arguments")
def front_keyword_call():
    keyword_call_kernel(z(8, 64), z(8, 64))


@pypto.frontend.jit
def ifexp_kernel(x: pypto.Tensor([DYN, 64], F32), out: pypto.Tensor([DYN, 64], F32)):
    pypto.set_vec_tile_shapes(8, 64)
    step = 8 if x.shape[0] > 16 else 1  # MARK: syntax_conditional_expression
    for i in pypto.loop(0, x.shape[0], step):
        pypto.assemble(pypto.exp(pypto.view(x, [8, 64], [i, 0])), [i, 0], out)


@case("C-SYNTAX-01", "a conditional expression (`a if c else b`) or assert on runtime value (x.shape[0]>16) (= 1)")
def syntax_conditional_expression():
    ifexp_kernel(z(32, 64), z(32, 64))


@pypto.frontend.jit
def countdown_kernel(x: pypto.Tensor([16, 64], F32), out: pypto.Tensor([16, 64], F32)):
    pypto.set_vec_tile_shapes(1, 64)
    out[:] = pypto.neg(x)
    for i in pypto.loop(15, -1, -1):  # MARK: loop_negative_step
        pypto.assemble(pypto.exp(pypto.view(x, [1, 64], [i, 0])), [i, 0], out)


@advice_case("A-LOOP-03", "pypto.loop(15, -1, -1): step -1 < 0", "would run 16")
def loop_negative_step():
    x, out = r(16, 64), z(16, 64)
    countdown_kernel(x, out)
    assert torch.equal(out, -x)  # no iteration ran, as in pypto


@pypto.frontend.jit
def misspelt_loop_kernel(x: pypto.Tensor([8, 64], F32), out: pypto.Tensor([8, 64], F32)):
    pypto.set_vec_tile_shapes(8, 64)
    for i in pypto.loop(1, name="L", idx_nme="row"):  # MARK: front_loop_keyword
        out[:] = pypto.exp(x)


@advice_case("A-FRONT-01", "pypto.loop(..., idx_nme=...): pypto ignores this keyword")
def front_loop_keyword():
    misspelt_loop_kernel(r(8, 64), z(8, 64))


@pypto.frontend.jit(host_options={"compile_stage": pypto.CompStage.TILE_GRAPH})
def compile_only_kernel(x: pypto.Tensor([8, 64], F32), out: pypto.Tensor([8, 64], F32)):  # MARK: compile_stage
    pypto.set_vec_tile_shapes(8, 64)
    out[:] = pypto.exp(x)


@advice_case("A-FRONT-02", "compile_stage = TILE_GRAPH", "runs nothing")
def compile_stage():
    out = z(8, 64)
    compile_only_kernel(r(8, 64), out)
    assert not out.any()  # pypto compiled up to the tile graph and ran nothing


# --- A-ALIAS: two parameters over one memory ---------------------------------------------------------
@pypto.frontend.jit
def reversed_rows_kernel(x: pypto.Tensor([32, 64], F32), y: pypto.Tensor([32, 64], F32)):
    pypto.set_vec_tile_shapes(8, 64)
    for i in pypto.loop(4):
        pypto.assemble(pypto.exp(pypto.view(x, [8, 64], [(3 - i) * 8, 0])), [i * 8, 0], y)


@pypto.frontend.jit
def shifted_rows_kernel(x: pypto.Tensor([32, 64], F32), y: pypto.Tensor([32, 64], F32)):
    pypto.set_vec_tile_shapes(8, 64)
    for i in pypto.loop(2):
        source = pypto.view(x, [8, 64], [i * 8, 0])  # MARK: alias_read_after_write
        pypto.assemble(pypto.exp(source), [(i + 1) * 8, 0], y)


@advice_case("A-ALIAS-01", "view of 'x': 2048 byte(s) read through 'x' were written through 'y'")
def alias_read_after_write():
    x = r(32, 64)
    expected = x.clone()
    expected[8:24] = torch.exp(x[:16])  # rows 8-15 read as the caller passed them, as pypto's CPU run does
    shifted_rows_kernel(x, x)
    assert torch.equal(x, expected)


def test_aliased_in_place_rows_and_distinct_tensors_pass():
    x = r(32, 64)
    expected = torch.exp(torch.flip(x.view(4, 8, 64), [0]).reshape(32, 64))
    separate = torch.zeros(32, 64)
    reversed_rows_kernel(x.clone(), separate)  # two memories: nothing shared
    assert torch.equal(separate, expected)

    @pypto.frontend.jit
    def in_place(x: pypto.Tensor([32, 64], F32), y: pypto.Tensor([32, 64], F32)):
        pypto.set_vec_tile_shapes(8, 64)
        for i in pypto.loop(4):
            pypto.assemble(pypto.exp(pypto.view(x, [8, 64], [i * 8, 0])), [i * 8, 0], y)

    shared = x.clone()
    in_place(shared, shared)  # each iteration reads and writes its own rows: an in-place update
    assert torch.equal(shared, torch.exp(x))


def test_aliases_are_found_by_bytes_of_one_memory():
    from ptogym.interp.aliasing import find_aliases
    base = torch.zeros(32, 64)
    top, bottom, middle = base[:16], base[16:], base[8:24]
    assert find_aliases(["a", "b"], [top, bottom]) == {}  # one storage, disjoint bytes
    found = find_aliases(["a", "b", "c"], [top, bottom, middle])
    assert sorted(found) == [0, 1, 2] and found[0].memory is found[2].memory
    assert found[2].base - found[0].base == 8 * 64 * 4  # middle starts 8 rows into top
    assert find_aliases(["a", "b"], [torch.zeros(4, 64), torch.empty(4, 64, device="meta")]) == {}


# --- the tests ----------------------------------------------------------------------------------------
def test_every_check_has_a_case():
    assert {c.check_id for c in CASES} == set(CHECKS)
    assert {c.check_id for c in ADVICE_CASES} == set(checks.ADVICE)
    assert len({c.name for c in CASES + ADVICE_CASES}) == len(CASES + ADVICE_CASES)


@pytest.mark.parametrize("c", ADVICE_CASES, ids=lambda c: f"{c.check_id}:{c.name}")
def test_advice_warns_once_per_site_and_is_silenced_per_id(c):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        c.run()
        c.run()  # the same site again: not repeated
    advice = [w for w in caught if issubclass(w.category, ConstraintWarning)
              and str(w.message).startswith(f"[{c.check_id}]")]
    assert len(advice) == 1, [str(w.message) for w in advice]
    message = str(advice[0].message)
    assert message.startswith(f"[{c.check_id}] {__file__}:{marked_line(c.name)}: "), message
    assert (advice[0].filename, advice[0].lineno) == (__file__, marked_line(c.name))
    assert checks.ADVICE[c.check_id] in message and checks.check_class(c.check_id) == "advice"
    for fragment in c.fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    checks._advised.clear()
    pypto.silence(c.check_id)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        c.run()
    assert not [w for w in caught if str(w.message).startswith(f"[{c.check_id}]")]


def test_silence_refuses_error_ids_and_reads_the_environment():
    with pytest.raises(ValueError, match="not an advice id"):
        pypto.silence("C-VIEW-02")
    assert checks.silenced_by_env({"PTOGYM_SILENCE": "A-SUM-01, A-OUT-01,"}) == {"A-SUM-01", "A-OUT-01"}
    assert checks.silenced_by_env({}) == set()


@pytest.mark.parametrize("c", CASES, ids=lambda c: f"{c.check_id}:{c.name}")
def test_violation(c):
    with pytest.raises(ConstraintViolation) as info:
        c.run()
    err = info.value
    assert isinstance(err, ValueError)
    assert err.check_id == c.check_id, str(err)
    path, line = err.location.rsplit(":", 1)
    assert os.path.samefile(path, __file__), err.location
    assert int(line) == marked_line(c.name), str(err)
    message = str(err)
    assert message.startswith(f"[{c.check_id}] {err.location}: ")
    assert CHECKS[c.check_id] in message
    for fragment in c.fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"


@pytest.mark.parametrize("c", CASES, ids=lambda c: f"{c.check_id}:{c.name}")
def test_lenient_warns_instead(c):
    with lenient(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if c.lenient_runs:
            c.run()
        else:  # the program is meaningless past the violation; only the warning is promised
            try:
                c.run()
            except ConstraintViolation:
                raise
            except Exception:  # noqa: BLE001 - torch may refuse what the violation let through
                pass
    relevant = [w for w in caught if issubclass(w.category, ConstraintWarning)]
    assert relevant, f"no ConstraintWarning for {c.name}"
    first = str(relevant[0].message)
    assert first.startswith(f"[{c.check_id}]"), first
    assert all(fragment in first for fragment in c.fragments)


def test_view_past_its_source_is_clipped_and_valid_shape_passes():
    x = r(8, 64)
    out = torch.full((8, 64), -1.0)
    checks._advised.clear()
    with pytest.warns(ConstraintWarning) as record:
        view_oob_kernel(x, out)
    assert [str(w.message)[:11] for w in record] == ["[A-VIEW-01]", "[A-OUT-01] "]
    assert torch.equal(out[:4], x[4:])  # pypto clips the view to the source
    assert (out[4:] == -1).all()

    @pypto.frontend.jit
    def covered(x: pypto.Tensor([8, 64], F32), out: pypto.Tensor([8, 64], F32)):
        pypto.set_vec_tile_shapes(8, 64)
        tile = pypto.view(x, [8, 64], [4, 0], valid_shape=[4, 64])  # the overhang is not valid data
        pypto.assemble(pypto.exp(tile), [0, 0], out)
        pypto.assemble(pypto.view(x, [8, 64], [0, 0], valid_shape=[4, 64]), [4, 0], out)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        covered(x, out)
    assert torch.equal(out[:4], torch.exp(x[4:])) and torch.equal(out[4:], x[:4])


def test_lenient_then_strict_still_raises():
    """A tile check let through by lenient() is not remembered as valid."""
    x = z(64, 512)
    with lenient(), pytest.warns(ConstraintWarning, match="C-TILE-03"):
        ub_kernel(x, x.clone())
    with pytest.raises(ConstraintViolation, match="C-TILE-03"):
        ub_kernel(x, x.clone())


def test_lenient_nesting():
    assert not checks.is_lenient()
    with lenient():
        assert checks.is_lenient()
        with lenient(False):
            with pytest.raises(ConstraintViolation):
                tile_cube_capacity()
        assert checks.is_lenient()
    assert not checks.is_lenient()


def test_valid_programs_near_the_limits_pass():
    """The boundaries are where the rules say: 32 B tiles, 192 KB UB, 64 KB sum."""
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([16, 1024], F32), y: pypto.Tensor([8, 16], BF16), out: pypto.Tensor([16, 1], F32),
               out2: pypto.Tensor([8, 16], BF16)):
        pypto.set_vec_tile_shapes(16, 1024)  # 64 KB input tile: exactly the sum buffer
        out[:] = pypto.sum(x, -1, keepdim=True)
        pypto.set_vec_tile_shapes(8, 16)  # 16 x 2 B = 32 B
        out2[:] = pypto.exp(y)
        pypto.set_vec_tile_shapes(8, 48)  # larger than the [8, 16] tensor (whose 32 B rows need no more)
        out2[:] = pypto.exp(out2)
        pypto.set_vec_tile_shapes(4096, 4096)  # far beyond UB, but clipped to [8, 16] tensors
        out2[:] = pypto.add(out2, y)

    x, y = r(16, 1024), r(8, 16, dtype=torch.bfloat16)
    out, out2 = z(16, 1), z(8, 16, dtype=torch.bfloat16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kernel(x, y, out, out2)
    assert torch.allclose(out.double(), x.double().sum(-1, keepdim=True), atol=1e-3)
    assert torch.equal(out2, torch.exp(torch.exp(y)) + y)


# --- the same kernels through real pypto 0.2.0 ------------------------------------------------------------
# tests/check_probes.py holds a kernel per check and per fixed false positive; real pypto's verdicts
# and outputs are recorded in tests/fixtures/checks_pypto.json (scripts/record_check_fixtures.py).
RECORDED = json.loads((pathlib.Path(__file__).parent / "fixtures" / "checks_pypto.json").read_text())


def run_probe(probe):
    """Run a probe on the interpreter: (tensors, advice ids, error or None)."""
    tensors = probe.inputs()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            probe.build(pypto)(*tensors, **probe.scalars)
            error = None
        except ConstraintViolation as exc:
            error = exc
    advice = {str(w.message)[1:].split("]")[0] for w in caught if issubclass(w.category, ConstraintWarning)}
    return tensors, advice, error


@pytest.mark.parametrize("rows, n", [(24, 512), (12, 1024), (6, 2048)])
def test_argsort_at_its_sort_buffer_limit_runs(rows, n):
    """argsort tiles whose sort needs exactly the 196,608 B of UB: real pypto 0.2.0 compiles
    them (measured 2026-12-04; its cost model then has no pipe for their TWOTILEMRGSORT,
    F92001, so no recorded outputs), one row more it refuses (probes argsort_sort_*_overflow).
    The interpreter sorts them as torch does."""
    from check_probes import _argsort_kernel

    x = torch.randn(rows, n, generator=torch.Generator().manual_seed(n))
    ids = torch.zeros(rows, n, dtype=torch.int32)
    _argsort_kernel(pypto, rows, n)(x, ids)
    assert torch.equal(x.gather(1, ids.long()), x.sort(-1, descending=True).values)


def test_every_check_is_backed_by_a_probe():
    probed = {check_id for probe in PROBES.values() for check_id in probe.interp.split(",")} | set(SUITE_EVIDENCE)
    assert set(CHECKS) | set(checks.ADVICE) <= probed, sorted(set(CHECKS) | set(checks.ADVICE) - probed)


@pytest.mark.parametrize("check_id", sorted(SUITE_EVIDENCE))
def test_advice_backed_by_pypto_suite_shows_it(check_id):
    """Advice whose evidence is a recorded test of pypto's own suite: pypto passed it, and
    its recorded calls show what the advice says."""
    from pypto_suite import suite

    test, _what, shows = SUITE_EVIDENCE[check_id]
    recorded = suite.load_fixtures()[test.split("::")[0]]["tests"][test]
    assert recorded["outcome"] == "passed" and shows(recorded["calls"]), recorded["message"]


def _probe_param(name: str):
    """A probe not recorded yet (real pypto's lock was not to be had) is a strict expected
    failure, so it shows, and turns into a plain test once recorded."""
    if name in RECORDED:
        return name
    return pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=f"real pypto's verdict not recorded yet: "
                                                                          f"scripts/record_check_fixtures.py {name}"))


@pytest.mark.parametrize("name", [_probe_param(name) for name in PROBES])
def test_probe_agrees_with_real_pypto(name):
    probe, recorded = PROBES[name], RECORDED.get(name)
    assert recorded is not None, f"{name}: not recorded; run scripts/record_check_fixtures.py {name}"
    tensors, advice, error = run_probe(probe)
    if probe.interp.startswith("C-"):
        assert error is not None and error.check_id == probe.interp, (error, advice)
        # an error is what pypto does too, or pypto's own recorded result is garbage
        if recorded["verdict"] == "accepted":
            assert probe.recorded_garbage is not None, f"{name}: pypto accepts it and computes; make it advice"
            assert probe.recorded_garbage(probe.inputs(), [decode_entry(e) for e in recorded["outputs"]]), name
        return
    assert error is None, error
    assert advice == (set(probe.interp.split(",")) if probe.interp.startswith("A-") else set())
    assert recorded["verdict"] == "accepted", recorded
    assert len(recorded["outputs"]) == len(probe.outputs), f"{name}: re-record it (its outputs changed)"
    for index, entry in zip(probe.outputs, recorded["outputs"]):
        want = decode_entry(entry)
        if probe.atol:
            torch.testing.assert_close(tensors[index].float(), want.float(), atol=probe.atol, rtol=0)
        else:
            assert_same(tensors[index], want)


LIVE = ["annotation_dynamic_ellipsis", "api_broadcast_lower_rank", "syntax_for_else", "front_function_keyword_call",
        "graph_read_then_assemble"]


@pytest.mark.pypto
@pytest.mark.skipif(importlib.util.find_spec("pypto") is None, reason="the real pypto package is not installed")
@pytest.mark.parametrize("name", LIVE)
def test_recorded_verdicts_still_hold_live(name):
    """A few probes through real pypto now (one process each, as the recorder runs them)."""
    live, recorded = recorder_output("record_check_fixtures.py", "--child", name, timeout=170), RECORDED[name]
    assert live["verdict"] == recorded["verdict"]
    assert live.get("outputs") == recorded.get("outputs")  # bit for bit


def test_docs_list_every_check_with_its_recorded_evidence():
    """docs/fidelity.md's evidence and probe tables are the ones the probes and recorded verdicts give."""
    spec = importlib.util.spec_from_file_location("gen_check_table", pathlib.Path(__file__).parents[1] / "scripts" /
                                                  "gen_check_table.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    assert gen.docs_blocks() == gen.tables(), "docs/fidelity.md is stale: run scripts/gen_check_table.py --write"
