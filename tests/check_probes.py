"""Small kernels that pin down what real pypto 0.2.0 accepts, rejects and computes.

Each probe is a builder ``build(pypto) -> jit kernel`` plus its inputs; the same
builder runs against the real pypto (``scripts/record_check_fixtures.py`` records
its verdict and outputs in ``tests/fixtures/checks_pypto.json``) and against
``ptogym.interp`` (``tests/test_interp_checks.py`` compares the two).

``interp`` says what the interpreter must do with the probe:

* ``"ok"``: run without error; outputs bitwise equal to real pypto's (``atol`` where the
  two compute with different math libraries - transcendental ops - or the interpreter
  rounds as a device does and pypto's CPU run does not: TF32);
* ``"C-..."``: raise that check (pypto rejects it, or ``device_garbage`` says why the
  device would compute garbage although pypto's compiler lets it through);
* ``"A-..."``: run with that advice (comma-separated: those), outputs as for ``"ok"``;
  ``outputs=()`` where what pypto writes is uninitialised memory.

No ``from __future__ import annotations`` here: pypto's parser reads the kernels.
"""
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Callable, Optional

import torch


@dataclass
class Probe:
    name: str
    build: Callable
    inputs: Callable
    interp: str
    outputs: tuple = (-1,)  # indices of the tensors the kernel writes
    atol: float = 0.0
    device_garbage: str = ""  # why an error is right although pypto's compiler accepts the kernel
    scalars: dict = field(default_factory=dict)
    # for an error pypto accepts: (inputs, pypto's recorded outputs) -> True when those outputs are
    # garbage, the evidence test_probe_agrees_with_real_pypto asks for
    recorded_garbage: Optional[Callable] = None


PROBES: dict[str, Probe] = {}


def probe(interp, *, inputs, outputs=(-1,), atol=0.0, device_garbage="", scalars=None, recorded_garbage=None):
    def register(build):
        PROBES[build.__name__] = Probe(build.__name__, build, inputs, interp, outputs, atol, device_garbage,
                                       scalars or {}, recorded_garbage)
        return build
    return register


def rand(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    return torch.randint(-100, 100, shape, generator=g).to(dtype)


def member(pypto, enum: str, name: str):
    """``pypto.<enum>.<name>``, or the name where the namespace lacks the enum (ptogym.interp
    takes enum members by name)."""
    return getattr(getattr(pypto, enum), name) if hasattr(pypto, enum) else name


def zeros(*shape, dtype=torch.float32):
    return torch.zeros(shape, dtype=dtype)


def x_out(*shape, dtype=torch.float32, out_shape=None, out_dtype=None):
    return lambda: [rand(*shape, dtype=dtype), zeros(*(out_shape or shape), dtype=out_dtype or dtype)]


# --- kernel arguments -----------------------------------------------------------------------
@probe("ok", inputs=x_out(32, 128))
def annotation_tensor_no_args(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor(), out: pypto.Tensor()):
        pypto.set_vec_tile_shapes(32, 128)
        out[:] = pypto.exp(x)
    return kernel


@probe("ok", inputs=x_out(32, 128))
def annotation_empty_shape(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([], pypto.DT_FP32), out: pypto.Tensor([], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(32, 128)
        out[:] = pypto.exp(x)
    return kernel


@probe("ok", inputs=x_out(16, 128))
def annotation_dynamic_ellipsis(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([pypto.DYNAMIC, ...], pypto.DT_FP32),
               out: pypto.Tensor([pypto.DYNAMIC, ...], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 128)
        for i in pypto.loop(x.shape[0] // 8):
            pypto.assemble(pypto.exp(pypto.view(x, [8, 128], [i * 8, 0])), [i * 8, 0], out)
    return kernel


@probe("C-TILE-08", inputs=lambda: [rand(8, 64, 1), zeros(8, 64)])
def arg_rank(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        out[:] = pypto.add(x, 0.0)
    return kernel


def _read_as_fp32_past_the_end(inputs, outputs) -> bool:
    """out = x + 0 with bf16 x passed for an fp32 annotation: pypto's run gives x's bytes read as
    fp32 for the first half of out, and memory past x's end for the second half."""
    as_fp32 = inputs[0].contiguous().view(torch.float32).reshape(-1)
    return torch.equal(outputs[0].reshape(-1)[:as_fp32.numel()], as_fp32)


@probe("C-ARG-01", inputs=lambda: [rand(8, 64, dtype=torch.bfloat16), zeros(8, 64)],
       device_garbage="pypto checks annotations only in its CHECKATTR debug mode, else reads the bf16 bytes as fp32",
       recorded_garbage=_read_as_fp32_past_the_end)
def arg_dtype(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        out[:] = pypto.add(x, 0.0)
    return kernel


@probe("C-ARG-01", inputs=lambda: [rand(4, 64), zeros(4, 64)])
def arg_static_dim(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([4, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 64)
        out[:] = pypto.add(pypto.view(x, [4, 64], [0, 0]), 0.0)
    return kernel


@probe("C-ARG-02", inputs=lambda: [rand(64, 8).t(), zeros(8, 64)])
def arg_non_contiguous(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        out[:] = pypto.add(x, 0.0)
    return kernel


# --- loops and symbolic scalars -----------------------------------------------------------------
@probe("C-LOOP-01", inputs=x_out(16, 64))
def loop_dynamic_whole(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([pypto.DYNAMIC, 64], pypto.DT_FP32),
               out: pypto.Tensor([pypto.DYNAMIC, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        out.move(pypto.exp(x))
    return kernel


@probe("C-LOOP-02", inputs=x_out(16, 64))
def loop_python_range(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([pypto.DYNAMIC, 64], pypto.DT_FP32),
               out: pypto.Tensor([pypto.DYNAMIC, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        for i in range(x.shape[0] // 8):
            pypto.assemble(pypto.exp(pypto.view(x, [8, 64], [i * 8, 0])), [i * 8, 0], out)
    return kernel


@probe("C-LOOP-03", inputs=x_out(16, 64))
def loop_int_of_symbol(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([pypto.DYNAMIC, 64], pypto.DT_FP32),
               out: pypto.Tensor([pypto.DYNAMIC, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        rows = int(x.shape[0])
        for i in pypto.loop(rows // 8):
            pypto.assemble(pypto.exp(pypto.view(x, [8, 64], [i * 8, 0])), [i * 8, 0], out)
    return kernel


@probe("ok", inputs=x_out(16, 64))
def loop_if_on_index(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([pypto.DYNAMIC, 64], pypto.DT_FP32),
               out: pypto.Tensor([pypto.DYNAMIC, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        for i in pypto.loop(x.shape[0] // 8):
            tile = pypto.view(x, [8, 64], [i * 8, 0])
            if i:
                pypto.assemble(pypto.exp(tile), [i * 8, 0], out)
            else:
                pypto.assemble(pypto.neg(tile), [i * 8, 0], out)
    return kernel


@probe("ok", inputs=x_out(16, 64))
def loop_if_on_dim(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([pypto.DYNAMIC, 64], pypto.DT_FP32),
               out: pypto.Tensor([pypto.DYNAMIC, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        for i in pypto.loop(x.shape[0] // 8):
            tile = pypto.view(x, [8, 64], [i * 8, 0])
            if x.shape[0] > 8:
                pypto.assemble(pypto.exp(tile), [i * 8, 0], out)
            else:
                pypto.assemble(pypto.neg(tile), [i * 8, 0], out)
    return kernel


@probe("ok", inputs=x_out(16, 64))
def loop_symbolic_slice(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([pypto.DYNAMIC, 64], pypto.DT_FP32),
               out: pypto.Tensor([pypto.DYNAMIC, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        for i in pypto.loop(x.shape[0] // 8):
            out[i * 8:i * 8 + 8, :] = pypto.exp(x[i * 8:(i + 1) * 8, :])
    return kernel


@probe("ok", inputs=lambda: [torch.tensor([[1], [0]], dtype=torch.int32), rand(16, 64), zeros(16, 64)])
def element_read_as_offset(pypto):
    @pypto.frontend.jit
    def kernel(idx: pypto.Tensor([2, 1], pypto.DT_INT32), x: pypto.Tensor([16, 64], pypto.DT_FP32),
               out: pypto.Tensor([16, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        for i in pypto.loop(2):
            block = idx[i, 0]
            pypto.assemble(pypto.exp(pypto.view(x, [8, 64], [block * 8, 0])), [i * 8, 0], out)
    return kernel


@probe("C-LOOP-07", inputs=x_out(8, 64))
def loop_begin_not_index(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        if pypto.is_loop_begin(3):
            out[:] = pypto.exp(x)
        else:
            out[:] = pypto.neg(x)
    return kernel


@probe("A-LOOP-02,A-VIEW-01", inputs=x_out(9, 64))
def loop_unroll_extent(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([pypto.DYNAMIC, 64], pypto.DT_FP32),
               out: pypto.Tensor([pypto.DYNAMIC, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        for i, factor in pypto.loop_unroll(0, x.shape[0], 1, name="ROWS", idx_name="i", unroll_list=[4]):
            tile = pypto.view(x, [4, 64], [i, 0])
            pypto.assemble(pypto.neg(tile), [i, 0], out)
    return kernel


@probe("C-LOOP-09", inputs=x_out(8, 64), device_garbage="pypto's compile never ends (grows past 6 GB)")
def loop_zero_step(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        for i in pypto.loop(0, 8, 0):
            out[:] = pypto.exp(x)
    return kernel


@probe("C-LOOP-09", inputs=x_out(8, 64))
def loop_unroll_zero_factor(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(1, 64)
        for i, factor in pypto.loop_unroll(0, 8, 1, name="R", idx_name="i", unroll_list=[0, 4]):
            pypto.assemble(pypto.exp(pypto.view(x, [1, 64], [i, 0])), [i, 0], out)
    return kernel


@probe("A-LOOP-01", inputs=x_out(8, 64))
def loop_unroll_negative_factor(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 64)
        for i, factor in pypto.loop_unroll(0, 8, 1, name="R", idx_name="i", unroll_list=[-2, 4]):
            pypto.assemble(pypto.exp(pypto.view(x, [4, 64], [i, 0])), [i, 0], out)
    return kernel


# --- tiles ------------------------------------------------------------------------------------------
@probe("A-TILE-02", inputs=x_out(8, 24, dtype=torch.bfloat16))
def tile_unaligned(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 24], pypto.DT_BF16), out: pypto.Tensor([8, 24], pypto.DT_BF16)):
        pypto.set_vec_tile_shapes(8, 24)
        out[:] = pypto.exp(x)
    return kernel


@probe("ok", inputs=x_out(4, 3))
def tile_small_tensor(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([4, 3], pypto.DT_FP32), out: pypto.Tensor([4, 3], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 8)
        out[:] = pypto.exp(x)
    return kernel


@probe("C-TILE-03", inputs=lambda: [rand(64, 512), rand(64, 512), zeros(64, 512)])
def tile_ub_overflow(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([64, 512], pypto.DT_FP32), y: pypto.Tensor([64, 512], pypto.DT_FP32),
               out: pypto.Tensor([64, 512], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(64, 512)
        out[:] = pypto.add(x, y)
    return kernel


@probe("C-TILE-04", inputs=x_out(32, 1024, out_shape=(32, 1)))
def tile_sum_buffer(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([32, 1024], pypto.DT_FP32), out: pypto.Tensor([32, 1], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(32, 1024)
        out[:] = pypto.sum(x, -1, keepdim=True)
    return kernel


# pypto's topk sorts a [rows, n] tile through a bitsort into [rows, 2 * n32] (value, index)
# pairs plus a [1, 2 * n32] scratch row (n32: n rounded up to 32): with its input (rows of n
# rounded up to 32 bytes), all in UB at once.  [15, 1000] needs 192,512 B and compiles; [32, 512] needs 200,704 B and [30, 520] (544
# after rounding) 200,192 B: both refused by the OoOSchedule pass ("Global sortOps failed").
def _topk_kernel(pypto, *shape, k=8, tile=None):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor(list(shape), pypto.DT_FP32), values: pypto.Tensor([*shape[:-1], k], pypto.DT_FP32),
               ids: pypto.Tensor([*shape[:-1], k], pypto.DT_INT32)):
        pypto.set_vec_tile_shapes(*(tile or shape))
        top, where = pypto.topk(x, k, -1, True)
        values[:] = top
        ids[:] = where
    return kernel


def _topk_inputs(*shape, k=8):
    return lambda: [rand(*shape), zeros(*shape[:-1], k), zeros(*shape[:-1], k, dtype=torch.int32)]


@probe("ok", inputs=_topk_inputs(15, 1000), outputs=(1, 2))
def topk_bitsort_fits(pypto):
    return _topk_kernel(pypto, 15, 1000)


@probe("C-TILE-03", inputs=_topk_inputs(32, 512), outputs=(1, 2))
def topk_bitsort_overflow(pypto):
    return _topk_kernel(pypto, 32, 512)


@probe("C-TILE-03", inputs=_topk_inputs(30, 520), outputs=(1, 2))
def topk_bitsort_rounded_overflow(pypto):
    return _topk_kernel(pypto, 30, 520)


# a rank-3 tile: its leading dims multiply the rows; the scratch row stays one ([4, 64, 32] needs
# 98,560 B; [8, 64, 32] 196,864 B, 256 B over)
@probe("ok", inputs=_topk_inputs(4, 64, 32, k=2), outputs=(1, 2))
def topk_bitsort_rank3_fits(pypto):
    return _topk_kernel(pypto, 4, 64, 32, k=2)


@probe("C-TILE-03", inputs=_topk_inputs(8, 64, 32, k=2), outputs=(1, 2))
def topk_bitsort_rank3_overflow(pypto):
    return _topk_kernel(pypto, 8, 64, 32, k=2)


# the input's rows take whole 32-byte blocks in UB: [1, 743, 2] under a (1, 743, 8) tile needs
# 743 * 32 + 2 * 743 * 32 * 4 + 2 * 32 * 4 = 214,240 B (196,408 B unpadded: it would fit)
@probe("C-TILE-03", inputs=_topk_inputs(1, 743, 2, k=2), outputs=(1, 2))
def topk_bitsort_padded_rows_overflow(pypto):
    return _topk_kernel(pypto, 1, 743, 2, k=2, tile=(1, 743, 8))


# and one [rows, k] result tile (rows of k rounded up to 32 bytes) beside them: [1, 613, 2] under
# (1, 613, 8) with k = 2 needs 196,416 B and compiles; [1, 615, 2] 197,056 B (177,376 without it)
@probe("ok", inputs=_topk_inputs(1, 613, 2, k=2), outputs=(1, 2))
def topk_bitsort_result_fits(pypto):
    return _topk_kernel(pypto, 1, 613, 2, k=2, tile=(1, 613, 8))


@probe("C-TILE-03", inputs=_topk_inputs(1, 615, 2, k=2), outputs=(1, 2))
def topk_bitsort_result_overflow(pypto):
    return _topk_kernel(pypto, 1, 615, 2, k=2, tile=(1, 615, 8))


# argsort: the sort's input, pairs and result in UB, no scratch row (16 B an element at n % 32 == 0).
# [8, 512] fp32 compiles and computes; [24, 512] and [12, 1024] (196,608 B) compile but pypto's cost
# model has no pipe for their TWOTILEMRGSORT, so they cannot be recorded; [25, 512] and [13, 1024]
# fail the OoOSchedule pass.
def _argsort_kernel(pypto, rows, n):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([rows, n], pypto.DT_FP32), ids: pypto.Tensor([rows, n], pypto.DT_INT32)):
        pypto.set_vec_tile_shapes(rows, n)
        ids[:] = pypto.argsort(x, -1, True)
    return kernel


@probe("ok", inputs=lambda: [rand(8, 512), zeros(8, 512, dtype=torch.int32)])
def argsort_sort_fits(pypto):
    return _argsort_kernel(pypto, 8, 512)


@probe("C-TILE-03", inputs=lambda: [rand(25, 512), zeros(25, 512, dtype=torch.int32)])
def argsort_sort_overflow(pypto):
    return _argsort_kernel(pypto, 25, 512)


@probe("C-TILE-03", inputs=lambda: [rand(13, 1024), zeros(13, 1024, dtype=torch.int32)])
def argsort_sort_wide_overflow(pypto):
    return _argsort_kernel(pypto, 13, 1024)


# Vector ops whose lowering holds UB of its own beside operands and result (interp's SCRATCH):
# each at the largest [rows, 512] fp32 tile real pypto compiles and one row more.  (pypto's cost
# model has no pipe for fmod, tril, exp2, hypot and copysign: their largest tiles compile - tril
# 48, exp2 47, hypot 47, fmod and copysign 32 rows - but only the refusals can be recorded; log1p
# is under-counted on purpose: it compiles 39 rows, the check refuses from 49.)
_SCRATCH_OPS = {
    "rsqrt": lambda p, x, y: p.rsqrt(x), "reciprocal": lambda p, x, y: p.reciprocal(x),
    "sigmoid": lambda p, x, y: p.sigmoid(x), "tril": lambda p, x, y: p.tril(x), "sin": lambda p, x, y: p.sin(x),
    "cos": lambda p, x, y: p.cos(x), "round": lambda p, x, y: p.round(x), "exp2": lambda p, x, y: p.exp2(x),
    "sign": lambda p, x, y: p.sign(x), "expm1": lambda p, x, y: p.expm1(x), "log1p": lambda p, x, y: p.log1p(x),
    "hypot": lambda p, x, y: p.hypot(x, y), "pow": lambda p, x, y: p.pow(x, y), "fmod": lambda p, x, y: p.fmod(x, y),
    "copysign": lambda p, x, y: p.copysign(x, y), "where": lambda p, x, y: p.where(p.gt(x, y), x, y),
}


_BINARY = ("hypot", "pow", "fmod", "copysign", "where")


def _scratch_probe(op, rows, verdict):
    def build(pypto):
        if op in _BINARY:
            @pypto.frontend.jit
            def kernel(x: pypto.Tensor([rows, 512], pypto.DT_FP32), y: pypto.Tensor([rows, 512], pypto.DT_FP32),
                       out: pypto.Tensor([rows, 512], pypto.DT_FP32)):
                pypto.set_vec_tile_shapes(rows, 512)
                out[:] = _SCRATCH_OPS[op](pypto, x, y)
            return kernel

        @pypto.frontend.jit
        def unary_kernel(x: pypto.Tensor([rows, 512], pypto.DT_FP32), out: pypto.Tensor([rows, 512], pypto.DT_FP32)):
            pypto.set_vec_tile_shapes(rows, 512)
            out[:] = _SCRATCH_OPS[op](pypto, x, None)
        return unary_kernel

    def inputs():  # in [0.5, 1.5): every op defined; transcendental results within 1e-6 of pypto's
        operands = [rand(rows, 512).abs() % 1 + 0.5, rand(rows, 512, seed=1).abs() % 1 + 0.5][:2 if op in _BINARY else 1]
        return [*operands, zeros(rows, 512)]

    build.__name__ = f"scratch_{op}_{rows}_rows"
    probe(verdict, inputs=inputs, atol=1e-6 if verdict == "ok" else 0.0)(build)


for _op, _fits, _over in [("rsqrt", 48, 49), ("reciprocal", 48, 49), ("sigmoid", 48, 49), ("tril", None, 49),
                          ("sin", 32, 33), ("cos", 32, 33), ("round", 47, 48), ("exp2", None, 48), ("sign", 95, 96),
                          ("expm1", 95, 96), ("log1p", 39, 49), ("hypot", None, 48), ("pow", 24, 25),
                          ("where", 27, 28), ("fmod", None, 33), ("copysign", None, 33)]:
    if _fits:
        _scratch_probe(_op, _fits, "ok")
    _scratch_probe(_op, _over, "C-TILE-03")


# Reductions along the last axis (standalone, through real pypto): sum's input tile, its
# [rows, 1] result (a 32-byte block a row) and the 64 KB reduction buffer fit UB ([63, 512]
# fp32 and [31, 1024] compile, [64, 512] does not; [32, 1024] is tile_sum_buffer); amax and
# amin of [49, 512] compile; prod [48, 512] does not (47 compiles, no pipe in the cost model);
# cumsum holds two tiles more ([32, 512] compiles, [33, 512] does not).
def _reduce_kernel(pypto, op, rows, n):
    if op == "cumsum":
        @pypto.frontend.jit
        def scan_kernel(x: pypto.Tensor([rows, n], pypto.DT_FP32), out: pypto.Tensor([rows, n], pypto.DT_FP32)):
            pypto.set_vec_tile_shapes(rows, n)
            out[:] = pypto.cumsum(x, -1)
        return scan_kernel

    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([rows, n], pypto.DT_FP32), out: pypto.Tensor([rows, 1], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(rows, n)
        out[:] = getattr(pypto, op)(x, -1, keepdim=True)
    return kernel


def _reduce_probe(op, rows, verdict, n=512):
    def build(pypto):
        return _reduce_kernel(pypto, op, rows, n)

    build.__name__ = f"reduce_{op}_{rows}x{n}"
    probe(verdict, inputs=lambda: [rand(rows, n).abs() % 1 + 0.5, zeros(rows, n if op == "cumsum" else 1)],
          atol=1e-4 if verdict == "ok" else 0.0)(build)


_reduce_probe("sum", 63, "ok")
_reduce_probe("sum", 64, "C-TILE-04")
_reduce_probe("sum", 31, "ok", n=1024)
_reduce_probe("amax", 49, "ok")
_reduce_probe("amin", 49, "ok")
_reduce_probe("prod", 48, "C-TILE-03")
_reduce_probe("cumsum", 32, "ok")
_reduce_probe("cumsum", 33, "C-TILE-03")


# A binary op's operand broadcast along the last axis ([rows, 1]) takes a full tile in UB:
# sub of [48, 512] fp32 and [48, 1] compiles (two tiles: exactly UB), of 49 rows does not.
def _broadcast_probe(rows, verdict):
    def build(pypto):
        @pypto.frontend.jit
        def kernel(x: pypto.Tensor([rows, 512], pypto.DT_FP32), y: pypto.Tensor([rows, 1], pypto.DT_FP32),
                   out: pypto.Tensor([rows, 512], pypto.DT_FP32)):
            pypto.set_vec_tile_shapes(rows, 512)
            out[:] = pypto.sub(x, y)
        return kernel

    build.__name__ = f"broadcast_last_axis_{rows}_rows"
    probe(verdict, inputs=lambda: [rand(rows, 512), rand(rows, 1, seed=1), zeros(rows, 512)])(build)


_broadcast_probe(48, "ok")
_broadcast_probe(49, "C-TILE-03")


# A reduction along the last axis needs the vector tile's last dim (a lower-rank tensor takes the
# tile's leading entries; unclamped) * dtype bytes 32-byte aligned (FC1001); along another axis it
# does not.
@probe("C-TILE-09", inputs=x_out(16, 8, out_shape=(16, 1)))
def reduce_tile_last_unaligned(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([16, 8], pypto.DT_FP32), out: pypto.Tensor([16, 1], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(16, 2)
        out[:] = pypto.amax(x, -1, keepdim=True)
    return kernel


@probe("C-TILE-09", inputs=x_out(16, 3, out_shape=(16, 1)))
def reduce_tile_last_unaligned_whole_axis(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([16, 3], pypto.DT_FP32), out: pypto.Tensor([16, 1], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(16, 3)
        out[:] = pypto.amax(x, -1, keepdim=True)
    return kernel


@probe("C-TILE-09", inputs=x_out(16, 8, out_shape=(16, 1)))
def reduce_tile_last_unaligned_sum(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([16, 8], pypto.DT_FP32), out: pypto.Tensor([16, 1], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(16, 2)
        out[:] = pypto.sum(x, -1, keepdim=True)
    return kernel


@probe("C-TILE-09", inputs=x_out(16, 8, out_shape=(16, 1)))
def reduce_tile_last_unaligned_amin(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([16, 8], pypto.DT_FP32), out: pypto.Tensor([16, 1], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(16, 2)
        out[:] = pypto.amin(x, -1, keepdim=True)
    return kernel


@probe("C-TILE-09", inputs=x_out(20, 64, out_shape=(20, 1)))
def reduce_tile_higher_rank_leading(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([20, 64], pypto.DT_FP32), out: pypto.Tensor([20, 1], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 2, 64)
        out[:] = pypto.amax(x, -1, keepdim=True)
    return kernel


@probe("ok", inputs=x_out(16, 3, out_shape=(16, 1)))
def reduce_tile_clamped_aligned(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([16, 3], pypto.DT_FP32), out: pypto.Tensor([16, 1], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(16, 64)
        out[:] = pypto.amax(x, -1, keepdim=True)
    return kernel


@probe("A-TILE-02", inputs=x_out(16, 64, out_shape=(1, 64)))
def reduce_tile_first_axis_unaligned(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([16, 64], pypto.DT_FP32), out: pypto.Tensor([1, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(16, 2)
        out[:] = pypto.amax(x, 0, keepdim=True)
    return kernel


@probe("ok", inputs=x_out(16, 64, out_shape=(16, 1)))
def reduce_tile_higher_rank_aligned(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([16, 64], pypto.DT_FP32), out: pypto.Tensor([16, 1], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(1, 16, 2)
        out[:] = pypto.amax(x, -1, keepdim=True)
    return kernel


def _special_fp32():
    x = zeros(8, 64)
    x[0, :8] = torch.tensor([0.25, 0.75, 1.25, -0.85, 1.35, -1.25, 3e9, float("nan")])
    x[1] = torch.linspace(-3, 3, 64)
    return x


# A move (out[:] = v) of another dtype converts as C converts: to the nearest float, toward zero
# into an integer (NaN and out of range: INT_MIN); an assemble of another dtype is refused.
@probe("ok", inputs=lambda: [_special_fp32(), zeros(8, 64, dtype=torch.int32)])
def move_fp32_into_int32(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_INT32)):
        pypto.set_vec_tile_shapes(8, 64)
        out[:] = pypto.add(x, x)
    return kernel


def _three(value0, value1, value2=0.0):
    return lambda: [torch.full((32, 32), value0), torch.full((32, 32), value1), torch.full((32, 32), value2)]


@probe("ok", inputs=_three(11.0, 20.0), outputs=(0, 1, 2))
def move_into_static_input_in_loop(pypto):
    @pypto.frontend.jit()
    def kernel(t0: pypto.Tensor([pypto.STATIC, pypto.STATIC], pypto.DT_FP32),
               t1: pypto.Tensor([pypto.STATIC, pypto.STATIC], pypto.DT_FP32),
               out: pypto.Tensor([pypto.STATIC, pypto.STATIC], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(32, 32)
        out.move(pypto.add(t0, t1))
        for _ in pypto.loop(2, name="L0", idx_name="i"):
            t0.move(pypto.add(t0, t1))
            out.move(pypto.add(t0, out))
    return kernel


@probe("ok", inputs=_three(11.0, 20.0), outputs=(0, 1, 2))
def move_into_input_no_loop(pypto):
    @pypto.frontend.jit
    def kernel(t0: pypto.Tensor([32, 32], pypto.DT_FP32), t1: pypto.Tensor([32, 32], pypto.DT_FP32),
               out: pypto.Tensor([32, 32], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(32, 32)
        t0.move(pypto.add(t0, t1))
        out.move(pypto.add(t0, t1))
    return kernel


@probe("A-OUT-01", inputs=_three(11.0, 20.0), outputs=(0, 1, 2))
def move_into_input_only(pypto):
    @pypto.frontend.jit
    def kernel(t0: pypto.Tensor([32, 32], pypto.DT_FP32), t1: pypto.Tensor([32, 32], pypto.DT_FP32),
               out: pypto.Tensor([32, 32], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(32, 32)
        t0.move(pypto.add(t0, t1))
    return kernel


@probe("ok", inputs=_three(11.0, 20.0), outputs=(0, 1, 2))
def assign_into_input(pypto):
    @pypto.frontend.jit
    def kernel(t0: pypto.Tensor([32, 32], pypto.DT_FP32), t1: pypto.Tensor([32, 32], pypto.DT_FP32),
               out: pypto.Tensor([32, 32], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(32, 32)
        t0[:] = pypto.add(t0, t1)
        out[:] = pypto.add(t1, t1)
    return kernel


@probe("ok", inputs=lambda: [rand(8, 64), zeros(8, 64, dtype=torch.bfloat16)])
def move_fp32_into_bf16(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_BF16)):
        pypto.set_vec_tile_shapes(8, 64)
        out[:] = pypto.exp(x)
    return kernel


def _class_ids():
    return [torch.arange(8, dtype=torch.int32) % 4, zeros(8, 16, dtype=torch.int32)]


@probe("ok", inputs=_class_ids)
def one_hot_tile_classes(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8], pypto.DT_INT32), out: pypto.Tensor([8, 16], pypto.DT_INT32)):
        pypto.set_vec_tile_shapes(8, 16)
        out[:] = pypto.one_hot(x, 16)
    return kernel


@probe("C-TILE-10", inputs=_class_ids)
def one_hot_tile_not_classes(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8], pypto.DT_INT32), out: pypto.Tensor([8, 16], pypto.DT_INT32)):
        pypto.set_vec_tile_shapes(8, 64)
        out[:] = pypto.one_hot(x, 16)
    return kernel


def _seven_by_zero_and_two():
    divisor = zeros(8, 64, dtype=torch.int32)
    divisor[:, ::2] = 2
    return [torch.full((8, 64), 7, dtype=torch.int32), divisor, zeros(8, 64, dtype=torch.int32)]


@probe("A-DIV-01", inputs=_seven_by_zero_and_two)
def int_ceil_div_by_zero(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_INT32), y: pypto.Tensor([8, 64], pypto.DT_INT32),
               out: pypto.Tensor([8, 64], pypto.DT_INT32)):
        pypto.set_vec_tile_shapes(8, 64)
        out[:] = pypto.ceil_div(x, y)
    return kernel


def _mm_inputs(m=16, k=32, n=16, dtype=torch.bfloat16, out_dtype=torch.float32, batch=()):
    return lambda: [rand(*batch, m, k, dtype=dtype, seed=1), rand(*batch, k, n, dtype=dtype, seed=2),
                    zeros(*batch, m, n, dtype=out_dtype)]


@probe("C-TILE-05", inputs=_mm_inputs())
def tile_cube_l1_multiple(pypto):
    @pypto.frontend.jit
    def kernel(a: pypto.Tensor([16, 32], pypto.DT_BF16), b: pypto.Tensor([32, 16], pypto.DT_BF16),
               out: pypto.Tensor([16, 16], pypto.DT_FP32)):
        pypto.set_cube_tile_shapes([16, 40], [32, 32], [16, 16])
        out[:] = pypto.matmul(a, b, pypto.DT_FP32)
    return kernel


@probe("C-TILE-05", inputs=_mm_inputs(128, 512, 16, dtype=torch.float32))
def tile_cube_l0_capacity(pypto):
    @pypto.frontend.jit
    def kernel(a: pypto.Tensor([128, 512], pypto.DT_FP32), b: pypto.Tensor([512, 16], pypto.DT_FP32),
               out: pypto.Tensor([128, 16], pypto.DT_FP32)):
        pypto.set_cube_tile_shapes([128, 128], [512, 512], [16, 16])
        out[:] = pypto.matmul(a, b, pypto.DT_FP32)
    return kernel


def _clamped_cube_tile_kernel(pypto, n):
    """An fp16 [16, 512] x [512, n] matmul under the n tile [128, 128]: declared, L0B would
    need 512 x 128 x 2 B = 128 KB of 64 KB; clamped to n (rounded up to 16), 512 x n x 2 B."""
    @pypto.frontend.jit
    def kernel(a: pypto.Tensor([16, 512], pypto.DT_FP16), b: pypto.Tensor([512, n], pypto.DT_FP16),
               out: pypto.Tensor([16, n], pypto.DT_FP32)):
        assert n  # pypto resolves annotation names among the body's free variables
        pypto.set_cube_tile_shapes([16, 16], [512, 512], [128, 128])
        out[:] = pypto.matmul(a, b, pypto.DT_FP32)
    return kernel


@probe("ok", inputs=_mm_inputs(16, 512, 24, dtype=torch.float16))
def tile_cube_l0_clamped_to_operand(pypto):
    return _clamped_cube_tile_kernel(pypto, 24)


@probe("ok", inputs=_mm_inputs(16, 512, 64, dtype=torch.float16))
def tile_cube_l0_clamped_full(pypto):
    return _clamped_cube_tile_kernel(pypto, 64)


@probe("C-TILE-05", inputs=_mm_inputs(16, 512, 80, dtype=torch.float16))
def tile_cube_l0_clamped_over(pypto):
    return _clamped_cube_tile_kernel(pypto, 80)


@probe("C-TILE-05", inputs=_mm_inputs(dtype=torch.int8, out_dtype=torch.int32))
def tile_cube_n_alignment(pypto):
    @pypto.frontend.jit
    def kernel(a: pypto.Tensor([16, 32], pypto.DT_INT8), b: pypto.Tensor([32, 16], pypto.DT_INT8),
               out: pypto.Tensor([16, 16], pypto.DT_INT32)):
        pypto.set_cube_tile_shapes([16, 16], [32, 32], [16, 16])
        out[:] = pypto.matmul(a, b, pypto.DT_INT32)
    return kernel


@probe("C-TILE-05", inputs=_mm_inputs(16, 64, 32, dtype=torch.int8, out_dtype=torch.int32))
def tile_cube_k_alignment(pypto):
    @pypto.frontend.jit
    def kernel(a: pypto.Tensor([16, 64], pypto.DT_INT8), b: pypto.Tensor([64, 32], pypto.DT_INT8),
               out: pypto.Tensor([16, 32], pypto.DT_INT32)):
        pypto.set_cube_tile_shapes([16, 16], [16, 16], [32, 32])
        out[:] = pypto.matmul(a, b, pypto.DT_INT32)
    return kernel


@probe("C-TILE-06", inputs=x_out(8, 64))
def tile_missing_vec(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        out[:] = pypto.exp(x)
    return kernel


def _rows_index(*values):
    return torch.tensor(values, dtype=torch.int32)


# index_select, gather and scatter_update are vector ops too: without a vec tile pypto
# rejects them (index_select only in its ExpandFunction pass, as "Errcode: FFFFFF! Run
# pass failed": the cause of moe_experts' compile failure)
@probe("C-TILE-06", inputs=lambda: [rand(16, 64), _rows_index(3, 1, 4, 1, 5, 9, 2, 6), zeros(8, 64)])
def tile_missing_vec_index_select(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([16, 64], pypto.DT_FP32), idx: pypto.Tensor([8], pypto.DT_INT32),
               out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.assemble(pypto.index_select(x, 0, idx), [0, 0], out)
    return kernel


@probe("ok", inputs=lambda: [rand(16, 64), _rows_index(3, 1, 4, 1, 5, 9, 2, 6), zeros(8, 64)])
def tile_set_vec_index_select(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([16, 64], pypto.DT_FP32), idx: pypto.Tensor([8], pypto.DT_INT32),
               out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        pypto.assemble(pypto.index_select(x, 0, idx), [0, 0], out)
    return kernel


@probe("C-TILE-06", inputs=lambda: [rand(16, 64), torch.randint(0, 64, (16, 8), generator=torch.Generator().manual_seed(0),
                                                              dtype=torch.int32), zeros(16, 8)])
def tile_missing_vec_gather(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([16, 64], pypto.DT_FP32), idx: pypto.Tensor([16, 8], pypto.DT_INT32),
               out: pypto.Tensor([16, 8], pypto.DT_FP32)):
        pypto.assemble(pypto.gather(x, 1, idx), [0, 0], out)
    return kernel


@probe("C-TILE-06", inputs=lambda: [rand(16, 64), _rows_index(5, 0, 12, 7).reshape(4, 1), rand(4, 64, seed=1),
                                    zeros(16, 64)])
def tile_missing_vec_scatter_update(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([16, 64], pypto.DT_FP32), idx: pypto.Tensor([4, 1], pypto.DT_INT32),
               src: pypto.Tensor([4, 64], pypto.DT_FP32), out: pypto.Tensor([16, 64], pypto.DT_FP32)):
        pypto.assemble(pypto.scatter_update(x, -2, idx, src), [0, 0], out)
    return kernel


@probe("C-TILE-06", inputs=_mm_inputs())
def tile_missing_cube(pypto):
    @pypto.frontend.jit
    def kernel(a: pypto.Tensor([16, 32], pypto.DT_BF16), b: pypto.Tensor([32, 16], pypto.DT_BF16),
               out: pypto.Tensor([16, 16], pypto.DT_FP32)):
        out[:] = pypto.matmul(a, b, pypto.DT_FP32)
    return kernel


@probe("C-TILE-06", inputs=x_out(16, 64))
def tile_symbolic_view_shape(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([pypto.DYNAMIC, 64], pypto.DT_FP32),
               out: pypto.Tensor([pypto.DYNAMIC, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        for i in pypto.loop(1):
            pypto.assemble(pypto.exp(pypto.view(x, [x.shape[0], 64], [0, 0])), [0, 0], out)
    return kernel


@probe("C-TILE-08", inputs=x_out(2, 8, 64))
def tile_rank_lower(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([2, 8, 64], pypto.DT_FP32), out: pypto.Tensor([2, 8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        out[:] = pypto.exp(x)
    return kernel


@probe("ok", inputs=x_out(2, 8, 64))
def tile_rank_higher(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([2, 8, 64], pypto.DT_FP32), out: pypto.Tensor([2, 8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(1, 2, 8, 64)
        out[:] = pypto.exp(x)
    return kernel


def _rank_higher_tile_kernel(pypto, rows, tile):
    """exp of an fp32 [2, rows, 256] tensor under a 4-D vector tile: pypto applies tile axis i
    to tensor axis i (the 4th entry is unused), clamped to the tensor."""
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([2, rows, 256], pypto.DT_FP32), out: pypto.Tensor([2, rows, 256], pypto.DT_FP32)):
        assert rows  # pypto resolves annotation names among the body's free variables
        pypto.set_vec_tile_shapes(*tile)
        out[:] = pypto.exp(x)
    return kernel


@probe("ok", inputs=x_out(2, 64, 256))
def tile_rank_higher_leading_dims(pypto):
    # leading dims [2, 32, 256]: 2 x 64 KB of UB; the trailing dims would clamp to [2, 64, 256], 2 x 128 KB
    return _rank_higher_tile_kernel(pypto, 64, (2, 32, 256, 1024))


@probe("ok", inputs=x_out(2, 48, 256))
def tile_ub_exactly_full(pypto):
    # two operands of [2, 48, 256] fp32 = 96 KB each: 192 KB, the whole UB
    return _rank_higher_tile_kernel(pypto, 48, (2, 64, 256, 1024))


@probe("ok", inputs=x_out(2, 49, 256))
def tile_ub_one_row_over(pypto):
    # [2, 49, 256] fp32 = 98 KB each: 196 KB > 192 KB, yet pypto compiles it: exp's result takes its input's buffer
    return _rank_higher_tile_kernel(pypto, 49, (2, 64, 256, 1024))


# --- views and assembles ---------------------------------------------------------------------------
@probe("A-VIEW-01,A-OUT-01", inputs=x_out(8, 64), outputs=())  # outputs: recorded when it was an error probe
def view_out_of_bounds(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        pypto.assemble(pypto.exp(pypto.view(x, [8, 64], [4, 0])), [0, 0], out)
    return kernel


@probe("C-VIEW-02", inputs=x_out(8, 64))
def view_rank(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        out[:] = pypto.exp(pypto.view(x, [64], [0, 0]))
    return kernel


@probe("C-VIEW-03", inputs=x_out(8, 64), outputs=())
def view_negative_offset(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 32)
        pypto.assemble(pypto.exp(pypto.view(x, [8, 32], [0, -32])), [0, 0], out)
        pypto.assemble(pypto.exp(pypto.view(x, [8, 32], [0, 32])), [0, 32], out)
    return kernel


@probe("C-VIEW-03", inputs=x_out(8, 64), outputs=())
def view_negative_valid_shape(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        pypto.assemble(pypto.exp(pypto.view(x, [8, 64], [0, 0], valid_shape=[-8, 64])), [0, 0], out)
    return kernel


@probe("A-VIEW-03", inputs=x_out(8, 64))  # pypto's CPU run computes the 8 valid rows (bitwise here)
def view_valid_beyond_shape(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        pypto.assemble(pypto.exp(pypto.view(x, [4, 64], [0, 0], valid_shape=[8, 64])), [0, 0], out)
        pypto.assemble(pypto.exp(pypto.view(x, [4, 64], [4, 0])), [4, 0], out)
    return kernel


@probe("C-ASSEMBLE-01", inputs=x_out(8, 64), outputs=(), device_garbage="writes past the end of the output in GM")
def assemble_out_of_bounds(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        pypto.assemble(pypto.exp(x), [4, 0], out)
    return kernel


@probe("C-ASSEMBLE-02", inputs=x_out(8, 64))
def assemble_rank(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        pypto.assemble(pypto.exp(pypto.view(x, [8, 64], [0, 0])), [0], out)
    return kernel


@probe("C-GRAPH-01", inputs=lambda: [rand(8, 64)], outputs=(0,))
def graph_view_and_assemble(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 64)
        top = pypto.view(x, [4, 64], [0, 0])
        pypto.assemble(pypto.exp(top), [4, 0], x)
    return kernel


@probe("ok", inputs=lambda: [rand(8, 64)], outputs=(0,))
def inplace_same_region(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        x[:] = pypto.exp(x)
    return kernel


@probe("C-MEM-01", inputs=x_out(8, 64), outputs=(),
       device_garbage="a workspace is uninitialised memory on the device")
def mem_uninitialised(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        acc = pypto.tensor([8, 64], pypto.DT_FP32, "acc")
        out[:] = pypto.add(acc, x)
    return kernel


@probe("A-OUT-01", inputs=lambda: [rand(8, 64), zeros(8, 64), zeros(8, 64)], outputs=(1, 2))
def out_never_written(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32),
               unused: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        out[:] = pypto.exp(x)
    return kernel


@probe("A-OUT-01", inputs=x_out(8, 64))
def out_partly_written(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 64)
        pypto.assemble(pypto.exp(pypto.view(x, [4, 64], [0, 0])), [0, 0], out)
    return kernel


# --- op arguments ----------------------------------------------------------------------------------
@probe("C-API-01", inputs=lambda: [rand(8, 64, dtype=torch.bfloat16), rand(8, 64), zeros(8, 64)])
def api_mixed_dtypes(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_BF16), y: pypto.Tensor([8, 64], pypto.DT_FP32),
               out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        out[:] = pypto.add(x, y)
    return kernel


@probe("C-API-01", inputs=x_out(8, 64, out_dtype=torch.bfloat16))
def api_assemble_dtype(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_BF16)):
        pypto.set_vec_tile_shapes(8, 64)
        pypto.assemble(pypto.exp(pypto.view(x, [8, 64], [0, 0])), [0, 0], out)
    return kernel


@probe("C-API-07", inputs=lambda: [rand(8, 64, dtype=torch.int32), zeros(8, 64, dtype=torch.int32)])
def api_shift_int32(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_INT32), out: pypto.Tensor([8, 64], pypto.DT_INT32)):
        pypto.set_vec_tile_shapes(8, 64)
        out[:] = pypto.bitwise_left_shift(x, 1)
    return kernel


@probe("C-API-02", inputs=lambda: [rand(16, 32, dtype=torch.bfloat16), rand(32, 16, dtype=torch.float16),
                                   zeros(16, 16)])
def api_matmul_mixed(pypto):
    @pypto.frontend.jit
    def kernel(a: pypto.Tensor([16, 32], pypto.DT_BF16), b: pypto.Tensor([32, 16], pypto.DT_FP16),
               out: pypto.Tensor([16, 16], pypto.DT_FP32)):
        pypto.set_cube_tile_shapes([16, 16], [32, 32], [16, 16])
        out[:] = pypto.matmul(a, b, pypto.DT_FP32)
    return kernel


@probe("ok", inputs=_mm_inputs(16, 32, 32, dtype=torch.int8))
def api_matmul_int8_to_fp32(pypto):
    @pypto.frontend.jit
    def kernel(a: pypto.Tensor([16, 32], pypto.DT_INT8), b: pypto.Tensor([32, 32], pypto.DT_INT8),
               out: pypto.Tensor([16, 32], pypto.DT_FP32)):
        pypto.set_cube_tile_shapes([16, 16], [32, 32], [32, 32])
        out[:] = pypto.matmul(a, b, pypto.DT_FP32)
    return kernel


@probe("C-API-03", inputs=lambda: [rand(8, 64), rand(4, 64), zeros(8, 64)])
def api_broadcast_mismatch(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), y: pypto.Tensor([4, 64], pypto.DT_FP32),
               out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        out[:] = pypto.mul(x, y)
    return kernel


@probe("ok", inputs=lambda: [rand(32, 128), rand(128, seed=3), zeros(32, 128)])
def api_broadcast_lower_rank(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([32, 128], pypto.DT_FP32), w: pypto.Tensor([128], pypto.DT_FP32),
               out: pypto.Tensor([32, 128], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(32, 128)
        out[:] = pypto.mul(x, w)
    return kernel


@probe("ok", inputs=lambda: [rand(32, 128), rand(32, 1, seed=3), zeros(32, 128)])
def api_broadcast_column(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([32, 128], pypto.DT_FP32), w: pypto.Tensor([32, 1], pypto.DT_FP32),
               out: pypto.Tensor([32, 128], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(32, 128)
        out[:] = pypto.sub(x, w)
    return kernel


@probe("A-SUM-01", inputs=x_out(8, 64, dtype=torch.bfloat16, out_shape=(8, 1)))
def api_sum_bf16(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_BF16), out: pypto.Tensor([8, 1], pypto.DT_BF16)):
        pypto.set_vec_tile_shapes(8, 64)
        out[:] = pypto.sum(x, -1, keepdim=True)
    return kernel


@probe("C-API-06", inputs=x_out(8, 64, out_shape=(8, 32)))
def api_slice_step(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 32], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        out[:] = pypto.exp(x[:, ::2])
    return kernel


@probe("C-API-06", inputs=x_out(8, 64, out_shape=(8, 1)))
def api_reduce_dim_range(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 1], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        out[:] = pypto.amax(x, 2, keepdim=True)
    return kernel


@probe("C-API-06", inputs=_mm_inputs(16, 32, 32, batch=()), outputs=())
def api_matmul_inner(pypto):
    @pypto.frontend.jit
    def kernel(a: pypto.Tensor([16, 32], pypto.DT_BF16), b: pypto.Tensor([32, 32], pypto.DT_BF16),
               out: pypto.Tensor([16, 32], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(16, 32)
        pypto.set_cube_tile_shapes([16, 16], [32, 32], [16, 16])
        out[:] = pypto.matmul(a, pypto.view(b, [16, 32], [0, 0]), pypto.DT_FP32)
    return kernel


# --- pypto.full's fill value ---------------------------------------------------------------------------
def _full_kernel(pypto, dtype_name, values):
    """One [1, 16] output per fill value, each ``pypto.full`` of that value in ``dtype_name``."""
    dtype = getattr(pypto, dtype_name)
    count = len(values)

    @pypto.frontend.jit
    def kernel(out: pypto.Tensor([count, 16], dtype)):
        assert dtype and count  # pypto resolves annotation names among the body's free variables
        pypto.set_vec_tile_shapes(1, 16)
        for i in range(count):
            out[i:i + 1, :] = pypto.full([1, 16], values[i], dtype)
    return kernel


@probe("ok", inputs=lambda: [zeros(5, 16)])
def full_fp32_clamped(pypto):
    """fp32 fills are clamped to +-FP32_MAX (the infinities too), NaN kept: as scalar operands."""
    return _full_kernel(pypto, "DT_FP32", [float("-inf"), float("inf"), 1e39, float("nan"), 1e-46])


@probe("ok", inputs=lambda: [zeros(4, 16, dtype=torch.float16)])
def full_fp16_keeps_infinities(pypto):
    return _full_kernel(pypto, "DT_FP16", [float("-inf"), float("inf"), float("nan"), 65504.0])


@probe("ok", inputs=lambda: [zeros(3, 16, dtype=torch.bfloat16)])
def full_bf16_rounds(pypto):
    return _full_kernel(pypto, "DT_BF16", [float("inf"), 70000.0, 65504.0])


@probe("C-API-06", inputs=lambda: [zeros(1, 16, dtype=torch.float16)])
def full_fp16_overflow(pypto):
    return _full_kernel(pypto, "DT_FP16", [70000.0])


@probe("C-API-06", inputs=lambda: [zeros(1, 16, dtype=torch.bfloat16)])
def full_bf16_overflow(pypto):
    return _full_kernel(pypto, "DT_BF16", [3.4e38])


# --- matmul forms ------------------------------------------------------------------------------------
@probe("ok", inputs=_mm_inputs())
def matmul_2d(pypto):
    @pypto.frontend.jit
    def kernel(a: pypto.Tensor([16, 32], pypto.DT_BF16), b: pypto.Tensor([32, 16], pypto.DT_BF16),
               out: pypto.Tensor([16, 16], pypto.DT_FP32)):
        pypto.set_cube_tile_shapes([16, 16], [32, 32], [16, 16])
        out[:] = pypto.matmul(a, b, pypto.DT_FP32)
    return kernel


# pypto's calculator sums a float matmul over K in chunks of the cube tile's L1 k, each chunk a
# torch fp32 matmul, added in order: the interpreter does too (ops/matmul._fp32_product), bit for bit
@probe("ok", inputs=_mm_inputs(17, 1000, 40, dtype=torch.float16))
def matmul_k_steps_ragged(pypto):
    @pypto.frontend.jit
    def kernel(a: pypto.Tensor([17, 1000], pypto.DT_FP16), b: pypto.Tensor([1000, 40], pypto.DT_FP16),
               out: pypto.Tensor([17, 40], pypto.DT_FP32)):
        pypto.set_cube_tile_shapes([32, 32], [64, 128], [64, 64])  # K = 7 x 128 + 104
        out[:] = pypto.matmul(a, b, pypto.DT_FP32)
    return kernel


@probe("ok", inputs=lambda: [rand(1, 4096, dtype=torch.bfloat16, seed=1), rand(64, 4096, dtype=torch.bfloat16, seed=2),
                             zeros(1, 64)])
def matmul_k_steps_one_row(pypto):
    @pypto.frontend.jit
    def kernel(a: pypto.Tensor([1, 4096], pypto.DT_BF16), b: pypto.Tensor([64, 4096], pypto.DT_BF16),
               out: pypto.Tensor([1, 64], pypto.DT_FP32)):
        pypto.set_cube_tile_shapes([16, 16], [64, 256], [64, 64])
        out[:] = pypto.matmul(a, b, pypto.DT_FP32, b_trans=True)
    return kernel


@probe("ok", inputs=_mm_inputs(32, 1024, 64))
def matmul_k_steps_l1_wider_than_l0(pypto):
    @pypto.frontend.jit
    def kernel(a: pypto.Tensor([32, 1024], pypto.DT_BF16), b: pypto.Tensor([1024, 64], pypto.DT_BF16),
               out: pypto.Tensor([32, 64], pypto.DT_FP32)):
        pypto.set_cube_tile_shapes([16, 32], [128, 512], [32, 64])  # steps of L1 k 512, not L0 k 128
        out[:] = pypto.matmul(a, b, pypto.DT_FP32)
    return kernel


@probe("ok", inputs=lambda: [torch.full((16, 64), -0.0, dtype=torch.bfloat16), rand(64, 16, dtype=torch.bfloat16, seed=2)
                             .abs(), zeros(16, 16)])
def matmul_k_steps_negative_zero(pypto):
    """-0 x positive sums to -0; pypto's calculator adds the K steps onto +0, so +0 comes out."""
    @pypto.frontend.jit
    def kernel(a: pypto.Tensor([16, 64], pypto.DT_BF16), b: pypto.Tensor([64, 16], pypto.DT_BF16),
               out: pypto.Tensor([16, 16], pypto.DT_FP32)):
        pypto.set_cube_tile_shapes([16, 16], [32, 32], [16, 16])
        out[:] = pypto.matmul(a, b, pypto.DT_FP32)
    return kernel


def _a_trans_kernel(pypto, k, m):
    """bf16 [k, m] (transposed: [m, k]) x [k, 32] -> fp32 under the k tile [32, 32]."""
    @pypto.frontend.jit
    def kernel(a: pypto.Tensor([k, m], pypto.DT_BF16), b: pypto.Tensor([k, 32], pypto.DT_BF16),
               out: pypto.Tensor([m, 32], pypto.DT_FP32)):
        assert k and m  # pypto resolves annotation names among the body's free variables
        pypto.set_cube_tile_shapes([16, 16], [32, 32], [32, 32])
        out[:] = pypto.matmul(a, b, pypto.DT_FP32, a_trans=True)
    return kernel


@probe("ok", inputs=lambda: [rand(192, 32, dtype=torch.bfloat16, seed=1), rand(192, 32, dtype=torch.bfloat16, seed=2),
                             zeros(32, 32)])
def matmul_k_steps_a_trans_equal_m(pypto):
    """With a_trans the calculator compares its K step with A's stored last dim, M: at L1 k
    = M = 32 it multiplies all 192 of K at once."""
    return _a_trans_kernel(pypto, 192, 32)


@probe("ok", inputs=lambda: [rand(256, 48, dtype=torch.bfloat16, seed=1), rand(256, 32, dtype=torch.bfloat16, seed=2),
                             zeros(48, 32)])
def matmul_k_steps_a_trans(pypto):
    """a_trans with L1 k 32 != M 48: steps of 32 along K."""
    return _a_trans_kernel(pypto, 256, 48)


@probe("ok", inputs=_mm_inputs(batch=(2, 2)))
def matmul_4d(pypto):
    @pypto.frontend.jit
    def kernel(a: pypto.Tensor([2, 2, 16, 32], pypto.DT_BF16), b: pypto.Tensor([2, 2, 32, 16], pypto.DT_BF16),
               out: pypto.Tensor([2, 2, 16, 16], pypto.DT_FP32)):
        pypto.set_cube_tile_shapes([16, 16], [32, 32], [16, 16])
        out[:] = pypto.matmul(a, b, pypto.DT_FP32)
    return kernel


@probe("ok", inputs=lambda: [rand(1, 16, 32, dtype=torch.bfloat16, seed=1), rand(3, 32, 16, dtype=torch.bfloat16, seed=2),
                             zeros(3, 16, 16)])
def matmul_batch_broadcast(pypto):
    @pypto.frontend.jit
    def kernel(a: pypto.Tensor([1, 16, 32], pypto.DT_BF16), b: pypto.Tensor([3, 32, 16], pypto.DT_BF16),
               out: pypto.Tensor([3, 16, 16], pypto.DT_FP32)):
        pypto.set_cube_tile_shapes([16, 16], [32, 32], [16, 16])
        out[:] = pypto.matmul(a, b, pypto.DT_FP32)
    return kernel


@probe("ok", inputs=lambda: [rand(16, 32, dtype=torch.float16, seed=1), rand(32, 16, dtype=torch.float16, seed=2),
                             rand(1, 16, dtype=torch.float16, seed=3), zeros(16, 16, dtype=torch.float16)])
def matmul_bias(pypto):
    @pypto.frontend.jit
    def kernel(a: pypto.Tensor([16, 32], pypto.DT_FP16), b: pypto.Tensor([32, 16], pypto.DT_FP16),
               bias: pypto.Tensor([1, 16], pypto.DT_FP16), out: pypto.Tensor([16, 16], pypto.DT_FP16)):
        pypto.set_cube_tile_shapes([16, 16], [32, 32], [16, 16])
        out[:] = pypto.matmul(a, b, pypto.DT_FP16, extend_params={"bias_tensor": bias})
    return kernel


@probe("ok", inputs=_mm_inputs(16, 32, 32, dtype=torch.int8, out_dtype=torch.float16))
def matmul_int8_scale(pypto):
    @pypto.frontend.jit
    def kernel(a: pypto.Tensor([16, 32], pypto.DT_INT8), b: pypto.Tensor([32, 32], pypto.DT_INT8),
               out: pypto.Tensor([16, 32], pypto.DT_FP16)):
        pypto.set_cube_tile_shapes([16, 16], [32, 32], [32, 32])
        out[:] = pypto.matmul(a, b, pypto.DT_FP16, extend_params={"scale": 0.5, "relu_type": member(pypto, "ReLuType", "RELU")})
    return kernel


@probe("ok", inputs=_mm_inputs(16, 64, 32, dtype=torch.int8, out_dtype=torch.int32))
def matmul_int8_exact(pypto):
    @pypto.frontend.jit
    def kernel(a: pypto.Tensor([16, 64], pypto.DT_INT8), b: pypto.Tensor([64, 32], pypto.DT_INT8),
               out: pypto.Tensor([16, 32], pypto.DT_INT32)):
        pypto.set_cube_tile_shapes([16, 16], [64, 64], [32, 32])
        out[:] = pypto.matmul(a, b, pypto.DT_INT32)
    return kernel


# --- valid shapes through ops ----------------------------------------------------------------------
def _tail_blocks_kernel(pypto, combine, dtype, out_rows=None):
    """A kernel over 4-row blocks of a 17-row x (the last block has one valid row):
    ``combine(tile, ones)`` per block, with ``ones`` a full-valid [4, 32] tile, assembled
    at the block's offset in out ([out_rows, 32], or as many rows as x).  Annotations and
    values travel on one object the body references (pypto resolves names from it)."""
    spec = SimpleNamespace(x=pypto.Tensor([pypto.DYNAMIC, 32], dtype),
                           out=pypto.Tensor([out_rows or pypto.DYNAMIC, 32], dtype), dtype=dtype, combine=combine)

    @pypto.frontend.jit
    def kernel(x: spec.x, out: spec.out):
        pypto.set_vec_tile_shapes(4, 32)
        for i in pypto.loop((x.shape[0] + 3) // 4):
            tile = pypto.view(x, [4, 32], [i * 4, 0], valid_shape=[pypto.min(4, x.shape[0] - i * 4), 32])
            ones = pypto.full([4, 32], 1.0, spec.dtype, valid_shape=[4, 32])
            pypto.assemble(spec.combine(tile, ones), [i * 4, 0], out)
    return kernel


@probe("ok", inputs=x_out(17, 32, out_shape=(20, 32)), outputs=())
def valid_binary_full_first(pypto):
    # the result is valid over the whole 4-row tile (its first operand's extent): rows 17-19 of out
    # get the tail tile's padding plus one, which pypto's CPU interpreter fills from the valid row and a
    # device from whatever its buffer held (the interpreter: NaN), so outputs are not compared
    return _tail_blocks_kernel(pypto, lambda tile, ones: pypto.add(ones, tile), pypto.DT_FP32, 20)


@probe("A-OUT-01", inputs=x_out(17, 32, out_shape=(20, 32)))  # rows 17-19 left as they were
def valid_binary_tail_first(pypto):
    return _tail_blocks_kernel(pypto, lambda tile, ones: pypto.add(tile, ones), pypto.DT_FP32, 20)


@probe("A-OUT-01", inputs=x_out(17, 32, out_shape=(20, 32)))  # rows 17-19 left as they were
def valid_sigmoid_then_tail_first(pypto):
    return _tail_blocks_kernel(pypto, lambda tile, ones: pypto.mul(tile, pypto.sigmoid(tile)), pypto.DT_FP32, 20)


@probe("C-ASSEMBLE-01", inputs=x_out(17, 32))
def valid_sigmoid_tail_assembled(pypto):
    # pypto's sigmoid is div(full(shape, 1.0), 1 + exp(-x)): valid over the whole tile, so the last
    # block overhangs the 17-row output (ASSEMBLEOpError; generated case gen_040 found it)
    return _tail_blocks_kernel(pypto, lambda tile, ones: pypto.sigmoid(tile), pypto.DT_FP32)


@probe("A-VALID-01", inputs=x_out(17, 32, dtype=torch.int32, out_shape=(20, 32)), outputs=())
def valid_binary_full_first_int(pypto):
    # as valid_binary_full_first, in int32: rows 17-19 of out are undefined on a device, not compared
    return _tail_blocks_kernel(pypto, lambda tile, ones: pypto.add(ones, tile), pypto.DT_INT32, 20)


def _int_valued(*shape):
    return lambda: [torch.randint(-3, 4, shape, generator=torch.Generator().manual_seed(seed)).float()
                    for seed in (0, 1)] + [zeros(*shape)]


def _tail_matmul_kernel(pypto, a_valid, b_valid):
    """out = a[16, 16] viewed with valid shape ``a_valid`` @ b[16, 16] viewed with ``b_valid``
    (None: b whole)."""
    spec = SimpleNamespace(a=pypto.Tensor([16, 16], pypto.DT_FP32), b=pypto.Tensor([16, 16], pypto.DT_FP32),
                           out=pypto.Tensor([16, 16], pypto.DT_FP32), a_valid=a_valid, b_valid=b_valid)

    @pypto.frontend.jit
    def kernel(a: spec.a, b: spec.b, out: spec.out):
        pypto.set_cube_tile_shapes([16, 16], [16, 16], [16, 16])
        b_tile = pypto.view(b, [16, 16], [0, 0], valid_shape=spec.b_valid) if spec.b_valid is not None else b
        out.move(pypto.matmul(pypto.view(a, [16, 16], [0, 0], valid_shape=spec.a_valid), b_tile, pypto.DT_FP32))
    return kernel


@probe("ok", inputs=_int_valued(16, 16))
def matmul_tail_inner_same(pypto):
    # both operands' valid inner extent is 2: pypto multiplies over those 2 only
    return _tail_matmul_kernel(pypto, [16, 2], [2, 16])


@probe("C-API-06", inputs=_int_valued(16, 16))
def matmul_tail_inner_differs(pypto):
    # a's valid inner extent 2, b's 4 (the qwen3-next unaligned gated-delta-rule case): rejected
    return _tail_matmul_kernel(pypto, [16, 2], [4, 16])


@probe("C-API-06", inputs=_int_valued(16, 16))
def matmul_tail_inner_one_side(pypto):
    return _tail_matmul_kernel(pypto, [16, 2], None)


def _scale_tensor_inputs(out_dtype=torch.float16, high_bits=False):
    def make():
        g = torch.Generator().manual_seed(0)
        a = torch.randint(-128, 128, (16, 32), generator=g).to(torch.int8)
        b = torch.randint(-128, 128, (32, 32), generator=g).to(torch.int8)
        scales = (torch.rand(32, generator=g) * 0.01 + 1e-4) * torch.where(torch.arange(32) % 3 == 0, -1.0, 1.0)
        bits = scales.view(torch.int32).to(torch.int64) & 0xFFFFFFFF
        if high_bits:
            bits |= (1 << 46) | (3 << 33)
        return [a, b, bits.reshape(1, 32).view(torch.uint64), zeros(16, 32, dtype=out_dtype)]
    return make


def _scale_tensor_kernel(pypto, out_dtype, relu):
    @pypto.frontend.jit
    def kernel(a: pypto.Tensor([16, 32], pypto.DT_INT8), b: pypto.Tensor([32, 32], pypto.DT_INT8),
               s: pypto.Tensor([1, 32], pypto.DT_UINT64), out: pypto.Tensor([16, 32], out_dtype)):
        pypto.set_cube_tile_shapes([16, 16], [32, 32], [32, 32])
        extend = {"scale_tensor": s, "relu_type": pypto.ReLuType.RELU} if relu else {"scale_tensor": s}
        out.move(pypto.matmul(a, b, out_dtype, extend_params=extend))
    return kernel


@probe("ok", inputs=_scale_tensor_inputs())
def matmul_int8_scale_tensor(pypto):
    return _scale_tensor_kernel(pypto, pypto.DT_FP16, relu=False)


@probe("ok", inputs=_scale_tensor_inputs(high_bits=True))
def matmul_int8_scale_tensor_relu_high_bits(pypto):
    # ReLU before the (partly negative) scales; the high 32 bits of each scale are ignored
    return _scale_tensor_kernel(pypto, pypto.DT_FP16, relu=True)


@probe("C-API-02", inputs=_scale_tensor_inputs(out_dtype=torch.bfloat16))
def matmul_int8_scale_tensor_bf16(pypto):
    return _scale_tensor_kernel(pypto, pypto.DT_BF16, relu=False)


@probe("ok", inputs=lambda: [rand(16, 256, dtype=torch.bfloat16), rand(256, 64, dtype=torch.bfloat16, seed=1),
                             zeros(16, 64)])
def cube_tile_three_k(pypto):
    # k may list three tiles (pypto's CubeTile takes 2 or 3; upstream's MLA prolog uses [128, 1024, 512])
    @pypto.frontend.jit
    def kernel(a: pypto.Tensor([16, 256], pypto.DT_BF16), b: pypto.Tensor([256, 64], pypto.DT_BF16),
               out: pypto.Tensor([16, 64], pypto.DT_FP32)):
        pypto.set_cube_tile_shapes([16, 16], [64, 256, 128], [64, 64])
        out.move(pypto.matmul(a, b, pypto.DT_FP32))
    return kernel


@probe("C-TILE-06", inputs=lambda: [rand(16, 256, dtype=torch.bfloat16), rand(256, 64, dtype=torch.bfloat16, seed=1),
                                   zeros(16, 64)])
def cube_tile_three_m(pypto):
    @pypto.frontend.jit
    def kernel(a: pypto.Tensor([16, 256], pypto.DT_BF16), b: pypto.Tensor([256, 64], pypto.DT_BF16),
               out: pypto.Tensor([16, 64], pypto.DT_FP32)):
        pypto.set_cube_tile_shapes([16, 16, 16], [64, 256], [64, 64])
        out.move(pypto.matmul(a, b, pypto.DT_FP32))
    return kernel


# --- the parser's language --------------------------------------------------------------------------
@probe("C-SYNTAX-01", inputs=x_out(8, 64))
def syntax_while(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        while False:
            pass
        out[:] = pypto.exp(x)
    return kernel


@probe("C-SYNTAX-01", inputs=x_out(8, 64))
def syntax_return_value(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        out[:] = pypto.exp(x)
        return out
    return kernel


@probe("C-SYNTAX-01", inputs=x_out(8, 64))
def syntax_bare_return(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        out[:] = pypto.exp(x)
        return
    return kernel


@probe("C-SYNTAX-01", inputs=x_out(8, 64))
def syntax_for_else(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        for i in pypto.loop(1):
            out[:] = pypto.exp(x)
        else:
            pass
    return kernel


@probe("C-SYNTAX-01", inputs=x_out(8, 64))
def syntax_import(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        import math
        pypto.set_vec_tile_shapes(8, 64)
        out[:] = pypto.mul(x, math.pi)
    return kernel


@probe("C-SYNTAX-01", inputs=x_out(16, 64))
def syntax_builtin_min_symbolic(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([pypto.DYNAMIC, 64], pypto.DT_FP32),
               out: pypto.Tensor([pypto.DYNAMIC, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        for i in pypto.loop(x.shape[0] // 8):
            rows = min(x.shape[0] - i * 8, 8)
            pypto.assemble(pypto.exp(pypto.view(x, [8, 64], [i * 8, 0], valid_shape=[rows, 64])), [i * 8, 0], out)
    return kernel


@probe("C-SYNTAX-01", inputs=x_out(8, 64))
def syntax_keyword_only(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), *, out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        out[:] = pypto.exp(x)
    return kernel


@probe("C-SYNTAX-01", inputs=x_out(8, 64))
def syntax_if_python_int(pypto):
    negate = 1  # a build-time int: pypto's parser wants a bool or a symbolic scalar as the test

    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        if negate:
            out[:] = pypto.neg(x)
        else:
            out[:] = pypto.exp(x)
    return kernel


@probe("C-SYNTAX-01", inputs=x_out(8, 64))
def syntax_if_python_none(pypto):
    bias = None

    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        if bias:
            out[:] = pypto.neg(x)
        else:
            out[:] = pypto.exp(x)
    return kernel


@probe("ok", inputs=x_out(8, 64))
def if_python_bool_of_int(pypto):
    negate = 1

    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        if negate != 0 and not bias_free():
            out[:] = pypto.exp(x)
        elif bool(negate):
            out[:] = pypto.neg(x)
        else:
            out[:] = pypto.exp(x)
    return kernel


def bias_free():
    return True


@probe("ok", inputs=x_out(8, 64))
def if_python_int_untaken_branch(pypto):
    flag = True
    count = 3

    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        if flag:
            out[:] = pypto.neg(x)
        elif count:  # never evaluated: the parser evaluates an elif only when the if's test is False
            out[:] = pypto.exp(x)
    return kernel


_OVERFLOW_K = 135168  # 127 * 127 * K > 2**31 - 1 would overflow int32, but pypto wants K < 65535 (ND)


@probe("C-API-06", inputs=lambda: [torch.full((16, _OVERFLOW_K), 127, dtype=torch.int8),
                             torch.full((_OVERFLOW_K, 32), 127, dtype=torch.int8), zeros(16, 32, dtype=torch.int32)])
def matmul_int8_overflow(pypto):
    @pypto.frontend.jit
    def kernel(a: pypto.Tensor([16, _OVERFLOW_K], pypto.DT_INT8), b: pypto.Tensor([_OVERFLOW_K, 32], pypto.DT_INT8),
               out: pypto.Tensor([16, 32], pypto.DT_INT32)):
        pypto.set_cube_tile_shapes([16, 16], [2048, 8192], [32, 32])
        out[:] = pypto.matmul(a, b, pypto.DT_INT32)
    return kernel


# pypto's CPU interpreter ignores trans_mode (its result is plain fp32); ptogym rounds the inputs to
# TF32 as the device does, so the two differ by up to ~5e-3 here
@probe("ok", inputs=lambda: [rand(16, 32, seed=1), rand(32, 16, seed=2), zeros(16, 16)], atol=1e-2)
def matmul_tf32_round(pypto):
    @pypto.frontend.jit
    def kernel(a: pypto.Tensor([16, 32], pypto.DT_FP32), b: pypto.Tensor([32, 16], pypto.DT_FP32),
               out: pypto.Tensor([16, 16], pypto.DT_FP32)):
        pypto.set_cube_tile_shapes([16, 16], [32, 32], [16, 16])
        out[:] = pypto.matmul(a, b, pypto.DT_FP32, extend_params={"trans_mode": member(pypto, "TransMode", "CAST_ROUND")})
    return kernel


@probe("ok", inputs=lambda: [rand(2, 16, 64), rand(16, 1, 64, seed=3), zeros(2, 16, 64)])
def api_broadcast_3d(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([2, 16, 64], pypto.DT_FP32), w: pypto.Tensor([16, 1, 64], pypto.DT_FP32),
               out: pypto.Tensor([2, 16, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(2, 16, 64)
        out[:] = pypto.add(x, pypto.reshape(w, [16, 64]))
    return kernel


@probe("C-LOOP-01", inputs=lambda: [rand(32, 128, seed=0), zeros(32, 128)])
def annotation_status_higher_rank(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([pypto.DYNAMIC], pypto.DT_FP32), out: pypto.Tensor([pypto.DYNAMIC], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(32, 128)
        out[:] = pypto.exp(x)
    return kernel


@probe("A-ARG-04", inputs=lambda: [rand(8, 64), zeros(8, 64)])
def arg_rank_lower_reshaped(pypto):
    """A rank-2 tensor for a rank-3 annotation, reshaped in the kernel (the DeepSeek-V3.2
    lightning indexer's query scale): pypto compares ranks only in CHECKATTR mode."""
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([pypto.STATIC, pypto.STATIC, pypto.STATIC], pypto.DT_FP32),
               out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        out[:] = pypto.add(pypto.reshape(x, [8, 64], inplace=True), 1.0)
    return kernel


@probe("ok", inputs=x_out(8, 64))
def tile_shape_folded_min(pypto):
    """set_vec_tile_shapes given pypto.min of two constants (the DeepSeek-V3.2 lightning
    indexer): pypto folds it to a concrete scalar and takes its value."""
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(pypto.min(4 * 2, 16), 64)
        out[:] = pypto.exp(x)
    return kernel


@probe("ok", inputs=lambda: [rand(16, 64), zeros(16, 64)])
def workspace_symbolic_shape(pypto):
    """A pypto.tensor sized by a dynamic dim (DeepSeek-V3.2 sparse flash attention's output
    workspace): pypto's Tensor takes symbolic dims."""
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([pypto.DYNAMIC, 64], pypto.DT_FP32), out: pypto.Tensor([pypto.DYNAMIC, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        work = pypto.tensor([x.shape[0], 64], pypto.DT_FP32, "work")
        for i in pypto.loop(x.shape[0] // 8):
            pypto.assemble(pypto.exp(pypto.view(x, [8, 64], [i * 8, 0])), [i * 8, 0], work)
        for i in pypto.loop(x.shape[0] // 8):
            pypto.assemble(pypto.add(pypto.view(work, [8, 64], [i * 8, 0]), 1.0), [i * 8, 0], out)
    return kernel


@probe("A-ARG-03", inputs=lambda: [rand(8, 64), rand(16, 64, seed=1), zeros(8, 64)])
def arg_named_dim_mismatch(pypto):
    rows = pypto.frontend.dynamic("ROWS")

    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([rows, 64], pypto.DT_FP32), y: pypto.Tensor([rows, 64], pypto.DT_FP32),
               out: pypto.Tensor([rows, 64], pypto.DT_FP32)):
        assert rows is not None  # pypto resolves annotation names among the body's free variables
        pypto.set_vec_tile_shapes(8, 64)
        for i in pypto.loop(x.shape[0] // 8):
            a = pypto.view(x, [8, 64], [i * 8, 0])
            b = pypto.view(y, [8, 64], [i * 8, 0])
            pypto.assemble(pypto.add(a, b), [i * 8, 0], out)
    return kernel


@probe("A-MEM-01", inputs=x_out(8, 64), outputs=())
def mem_partly_written(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        acc = pypto.tensor([8, 64], pypto.DT_FP32, "acc")
        acc[0:4, :] = x[0:4, :]
        out[:] = pypto.mul(acc, 2.0)
    return kernel


@probe("A-LOOP-02,A-OUT-01", inputs=x_out(8, 64))
def loop_unroll_view_narrower(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 64)
        for i, factor in pypto.loop_unroll(0, 8, 1, name="R", idx_name="i", unroll_list=[4]):
            pypto.assemble(pypto.exp(pypto.view(x, [1, 64], [i, 0])), [i, 0], out)
    return kernel


# --- concat of tail tiles (valid_shape smaller than the tile) --------------------------------------
# pypto copies each input's valid data to its full tile's place; the rest of out stays unwritten
@probe("A-OUT-01", inputs=x_out(16, 16, out_shape=(12, 16)))
def concat_tail_other_axis(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([16, 16], pypto.DT_FP32), out: pypto.Tensor([12, 16], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(16, 16)
        top = pypto.view(x, [8, 16], [0, 0], valid_shape=[8, 6])
        bottom = pypto.view(x, [4, 16], [8, 0], valid_shape=[4, 3])
        pypto.assemble(pypto.concat([top, bottom], 0), [0, 0], out)
    return kernel


@probe("A-OUT-01", inputs=x_out(16, 16, out_shape=(12, 16)))
def concat_tail_concat_axis(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([16, 16], pypto.DT_FP32), out: pypto.Tensor([12, 16], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(16, 16)
        top = pypto.view(x, [8, 16], [0, 0], valid_shape=[5, 16])
        bottom = pypto.view(x, [4, 16], [8, 0], valid_shape=[3, 16])
        pypto.assemble(pypto.concat([top, bottom], 0), [0, 0], out)
    return kernel


@probe("ok", inputs=lambda: [rand(8, 64), rand(8, 64, seed=1) - 1, rand(64, seed=2) + 1, zeros(8, 64)])
def clip_tensor_bounds(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), low: pypto.Tensor([8, 64], pypto.DT_FP32),
               high: pypto.Tensor([64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        out[:] = pypto.clip(x, low, high)
    return kernel


# --- the frontend's signatures (pypto 0.2.0's frontend/parser/entry.py and _controller.py) ---------------
@probe("C-FRONT-01", inputs=x_out(8, 64))
def front_jit_unknown_option(pypto):
    @pypto.frontend.jit(fast_math=True)
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        out[:] = pypto.exp(x)
    return kernel


@probe("C-FRONT-01", inputs=x_out(8, 64))
def front_jit_positional_options(pypto):
    @pypto.frontend.jit({"runtime_options": {}})
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        out[:] = pypto.exp(x)
    return kernel


@probe("ok", inputs=x_out(8, 64))
def front_jit_known_options(pypto):
    @pypto.frontend.jit(host_options=None, codegen_options=None, pass_options=None, verify_options=None,
                        debug_options=None, infer_controlflow_shape=None, use_cache=False)
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        out[:] = pypto.exp(x)
    return kernel


@probe("C-FRONT-01", inputs=x_out(8, 64))
def front_function_options(pypto):
    @pypto.frontend.function(inline=True)
    def twice(x, out):
        out[:] = pypto.add(x, x)

    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        twice(x, out)
    return kernel


@probe("ok", inputs=x_out(8, 64))
def front_function_scalar_param(pypto):
    @pypto.frontend.function
    def scaled(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32), factor: int,
               negate: bool):
        if negate:
            out[:] = pypto.mul(x, -1.0 * factor)
        else:
            out[:] = pypto.mul(x, 1.0 * factor)

    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        scaled(x, out, 3, True)
    return kernel


@probe("ok", inputs=x_out(16, 64))
def front_function_symbolic_param(pypto):
    @pypto.frontend.function
    def rows(x, out, row):
        pypto.assemble(pypto.exp(pypto.view(x, [8, 64], [row, 0])), [row, 0], out)

    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([pypto.DYNAMIC, 64], pypto.DT_FP32),
               out: pypto.Tensor([pypto.DYNAMIC, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        for i in pypto.loop(x.shape[0] // 8):
            rows(x, out, i * 8)
    return kernel


@probe("C-FRONT-02", inputs=x_out(8, 64))
def front_function_keyword_call(pypto):
    @pypto.frontend.function
    def twice(x, out):
        out[:] = pypto.add(x, x)

    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        twice(x, out=out)
    return kernel


@probe("C-FRONT-02", inputs=x_out(8, 64))
def front_function_default_left_out(pypto):
    @pypto.frontend.function
    def scaled(x, out, factor=2.0):
        out[:] = pypto.mul(x, factor)

    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        scaled(x, out)
    return kernel


@probe("C-SYNTAX-01", inputs=x_out(8, 64))
def front_function_return(pypto):
    @pypto.frontend.function
    def twice(x):
        return pypto.add(x, x)

    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        out[:] = twice(x)
    return kernel


@probe("C-ARG-01", inputs=x_out(8, 64))
def front_function_annotation_dtype(pypto):
    @pypto.frontend.function
    def twice(x: pypto.Tensor([8, 64], pypto.DT_BF16), out):
        out[:] = pypto.add(x, x)

    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        twice(x, out)
    return kernel


@probe("ok", inputs=x_out(8, 64))  # pypto compares an int parameter's default with int, not its annotation
def front_function_int_param_float(pypto):
    @pypto.frontend.function
    def scaled(x, out, factor: int):
        out[:] = pypto.mul(x, factor * 1.0)

    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        scaled(x, out, 2.5)
    return kernel


@probe("C-FRONT-02", inputs=x_out(8, 64), scalars={"factor": 2.0})
def front_jit_tensor_after_scalar(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), factor, out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        out[:] = pypto.mul(x, factor)
    return kernel


@probe("A-FRONT-01", inputs=x_out(8, 64))
def front_loop_unknown_keyword(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        for i in pypto.loop(1, name="L", idx_nme="row"):
            out[:] = pypto.exp(x)
    return kernel


@probe("C-FRONT-01", inputs=x_out(8, 64))
def front_cond_file_without_line(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([pypto.DYNAMIC, 64], pypto.DT_FP32),
               out: pypto.Tensor([pypto.DYNAMIC, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        for i in pypto.loop(x.shape[0] // 8):
            tile = pypto.view(x, [8, 64], [i * 8, 0])
            if pypto.cond(i == 0, file="kernel.py"):
                pypto.assemble(pypto.exp(tile), [i * 8, 0], out)
            else:
                pypto.assemble(pypto.neg(tile), [i * 8, 0], out)
    return kernel


# --- loops: negative steps, bounds from runtime conditions -------------------------------------------------
@probe("A-LOOP-03,A-OUT-01", inputs=x_out(16, 64))  # no iteration runs: out keeps its zeros
def loop_negative_step(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([16, 64], pypto.DT_FP32), out: pypto.Tensor([16, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(1, 64)
        for i in pypto.loop(15, -1, -1):
            pypto.assemble(pypto.exp(pypto.view(x, [1, 64], [i, 0])), [i, 0], out)
    return kernel


@probe("C-LOOP-09", inputs=x_out(16, 64), device_garbage="pypto never finishes (killed after 90 s)")
def loop_negative_step_rising(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([16, 64], pypto.DT_FP32), out: pypto.Tensor([16, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(1, 64)
        for i in pypto.loop(0, 16, -1):
            pypto.assemble(pypto.exp(pypto.view(x, [1, 64], [0, 0])), [0, 0], out)
    return kernel


@probe("C-SYNTAX-01", inputs=x_out(32, 64))
def syntax_conditional_expression_symbolic(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([pypto.DYNAMIC, 64], pypto.DT_FP32),
               out: pypto.Tensor([pypto.DYNAMIC, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        step = 8 if x.shape[0] > 16 else 1
        for i in pypto.loop(0, x.shape[0], step):
            pypto.assemble(pypto.exp(pypto.view(x, [8, 64], [i, 0])), [i, 0], out)
    return kernel


@probe("ok", inputs=x_out(32, 64))
def conditional_expression_static(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([32, 64], pypto.DT_FP32), out: pypto.Tensor([32, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        step = 8 if x.shape[0] > 16 else 1
        for i in pypto.loop(0, x.shape[0], step):
            pypto.assemble(pypto.exp(pypto.view(x, [8, 64], [i, 0])), [i, 0], out)
    return kernel


@probe("C-SYNTAX-01", inputs=x_out(16, 64))
def syntax_bool_operator_symbolic(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([pypto.DYNAMIC, 64], pypto.DT_FP32),
               out: pypto.Tensor([pypto.DYNAMIC, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        for i in pypto.loop(x.shape[0] // 8):
            tile = pypto.view(x, [8, 64], [i * 8, 0])
            if i > 0 and i < 4:
                pypto.assemble(pypto.exp(tile), [i * 8, 0], out)
            else:
                pypto.assemble(pypto.neg(tile), [i * 8, 0], out)
    return kernel


@probe("C-SYNTAX-01", inputs=x_out(32, 64))
def syntax_if_pypto_cond(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([pypto.DYNAMIC, 64], pypto.DT_FP32),
               out: pypto.Tensor([pypto.DYNAMIC, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        if pypto.cond(x.shape[0] > 16):
            step = 8
        else:
            step = 16
        for i in pypto.loop(0, x.shape[0], step):
            pypto.assemble(pypto.exp(pypto.view(x, [8, 64], [i, 0])), [i, 0], out)
    return kernel


@probe("ok", inputs=x_out(32, 64))
def loop_bounds_from_if_branches(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([pypto.DYNAMIC, 64], pypto.DT_FP32),
               out: pypto.Tensor([pypto.DYNAMIC, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        if x.shape[0] > 16:
            blocks = x.shape[0] // 8
        else:
            blocks = 1
        for i in pypto.loop(blocks):
            pypto.assemble(pypto.exp(pypto.view(x, [8, 64], [i * 8, 0])), [i * 8, 0], out)
    return kernel


# --- one parameter written and read in one graph ------------------------------------------------------------
@probe("ok", inputs=x_out(8, 64))
def graph_write_read_write(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        out[:] = pypto.exp(x)
        doubled = pypto.add(out, out)
        out[:] = doubled
    return kernel


@probe("C-GRAPH-01", inputs=lambda: [rand(8, 64)], outputs=(0,))
def graph_read_then_assemble(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        pypto.assemble(pypto.exp(x), [0, 0], x)
    return kernel


@probe("ok", inputs=lambda: [rand(8, 64), zeros(8, 64), zeros(8, 64)], outputs=(1, 2))
def graph_write_then_read(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), y: pypto.Tensor([8, 64], pypto.DT_FP32),
               out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        y[:] = pypto.exp(x)
        out[:] = pypto.add(y, 1.0)
    return kernel


@probe("C-GRAPH-01", inputs=x_out(16, 64))
def graph_assemble_read_assemble(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([16, 64], pypto.DT_FP32), out: pypto.Tensor([16, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        pypto.assemble(pypto.exp(pypto.view(x, [8, 64], [0, 0])), [0, 0], out)
        pypto.assemble(pypto.exp(pypto.view(x, [8, 64], [8, 0])), [8, 0], out)
        pypto.assemble(pypto.add(out, 1.0), [0, 0], out)
    return kernel


# --- two parameters over one memory --------------------------------------------------------------------------
def _aliased(rows=32, cols=64):
    def make():
        x = rand(rows, cols)
        return [x, x]
    return make


@probe("A-ALIAS-01", inputs=_aliased(), outputs=(0,))  # pypto's CPU run reads every row as the caller passed it
def alias_rows_written_by_another_iteration(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([32, 64], pypto.DT_FP32), y: pypto.Tensor([32, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        for i in pypto.loop(4):
            source = pypto.view(x, [8, 64], [(3 - i) * 8, 0])
            pypto.assemble(pypto.exp(source), [i * 8, 0], y)
    return kernel


@probe("ok", inputs=_aliased(), outputs=(0,))
def alias_in_place_rows(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([32, 64], pypto.DT_FP32), y: pypto.Tensor([32, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        for i in pypto.loop(4):
            pypto.assemble(pypto.exp(pypto.view(x, [8, 64], [i * 8, 0])), [i * 8, 0], y)
    return kernel


@probe("ok", inputs=lambda: [rand(8, 64), zeros(8, 64), zeros(8, 64)], outputs=(1, 2))
def graph_assemble_then_read(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), y: pypto.Tensor([8, 64], pypto.DT_FP32),
               out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        pypto.assemble(pypto.exp(x), [0, 0], y)
        out[:] = pypto.add(y, 1.0)
    return kernel


@probe("C-GRAPH-02", inputs=lambda: [rand(8, 64), zeros(8, 64)], outputs=(1,))
def graph_move_then_assemble(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        out[:] = pypto.exp(x)
        pypto.assemble(pypto.add(x, 1.0), [0, 0], out)
    return kernel


@probe("ok", inputs=lambda: [rand(8, 64), zeros(8, 64)], outputs=(1,))
def graph_assemble_then_move(pypto):
    """A parameter assembled into, then moved into: accepted (the move's value stays)."""
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        pypto.assemble(pypto.add(x, 1.0), [0, 0], out)
        out[:] = pypto.mul(x, 2.0)
    return kernel


@probe("ok", inputs=lambda: [rand(8, 64), zeros(8, 64)], outputs=(1,))
def graph_move_then_assemble_across_loops(pypto):
    """A parameter moved into in one loop's body, assembled into in the next one's: accepted."""
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        for _ in pypto.loop(1, name="LOOP_MOVE", idx_name="i"):
            out[:] = pypto.mul(x, 2.0)
        for _ in pypto.loop(1, name="LOOP_ASSEMBLE", idx_name="j"):
            pypto.assemble(pypto.view(x, [4, 32], [0, 0]), [0, 0], out)
    return kernel


@probe("C-GRAPH-02", inputs=x_out(8, 64))
def graph_move_then_assemble_workspace(pypto):
    """The same rule for a pypto.tensor workspace (found zero-filling a tile, then
    assembling query groups into it)."""
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        ws = pypto.tensor([8, 64], pypto.DT_FP32, "ws")
        ws[:] = pypto.full([8, 64], 0.0, pypto.DT_FP32)
        pypto.assemble(pypto.view(x, [4, 32], [0, 0]), [0, 0], ws)
        out[:] = pypto.add(ws, 1.0)
    return kernel


@probe("ok", inputs=x_out(8, 64))
def graph_assemble_then_move_workspace(pypto):
    """The other order is accepted."""
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        ws = pypto.tensor([8, 64], pypto.DT_FP32, "ws")
        pypto.assemble(pypto.exp(x), [0, 0], ws)
        ws[:] = pypto.add(ws, 1.0)
        out[:] = pypto.add(ws, 1.0)
    return kernel


@probe("ok", inputs=x_out(8, 64))
def graph_move_then_assemble_workspace_across_loops(pypto):
    """Moved in one loop's body, assembled into in the next one's: accepted."""
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        ws = pypto.tensor([8, 64], pypto.DT_FP32, "ws")
        for _ in pypto.loop(1, name="LOOP_MOVE", idx_name="i"):
            ws[:] = pypto.exp(x)
        for _ in pypto.loop(1, name="LOOP_ASSEMBLE", idx_name="j"):
            pypto.assemble(pypto.view(x, [4, 32], [0, 0]), [0, 0], ws)
        out[:] = pypto.add(ws, 1.0)
    return kernel


@probe("ok", inputs=x_out(8, 64))
def workspace_assembled_in_pieces(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        ws = pypto.tensor([8, 64], pypto.DT_FP32, "ws")
        pypto.assemble(pypto.exp(pypto.view(x, [8, 32], [0, 0])), [0, 0], ws)
        pypto.assemble(pypto.view(x, [8, 32], [0, 32]), [0, 32], ws)
        out[:] = pypto.add(ws, 1.0)
    return kernel


def _blocks_by_cond(pypto, x):
    """A plain helper (not parsed by pypto: Python runs it) choosing a loop bound by pypto.cond."""
    if pypto.cond(x.shape[0] > 16):
        blocks = x.shape[0] // 8
    else:
        blocks = 1
    return blocks


@probe("ok", inputs=x_out(32, 64))
def loop_bounds_from_cond_in_helper(pypto):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([pypto.DYNAMIC, 64], pypto.DT_FP32),
               out: pypto.Tensor([pypto.DYNAMIC, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        for i in pypto.loop(_blocks_by_cond(pypto, x)):
            pypto.assemble(pypto.exp(pypto.view(x, [8, 64], [i * 8, 0])), [i * 8, 0], out)
    return kernel


def _ones_after_every_call(calls: list) -> bool:
    from pypto_suite.records import decode_output

    return bool(calls) and all(torch.equal(decode_output(call["outputs"][2]), torch.ones(4, 4)) for call in calls)


#: advice whose real-pypto evidence is a test of pypto's own suite (recorded in
#: tests/pypto_suite/fixtures) rather than a probe here: id -> (test id, what the recorded
#: calls show, a check of them).  The pypto-sim backend cannot run a probe that compiles
#: only: it finds no cost-model result to read.
SUITE_EVIDENCE = {
    "A-FRONT-02": ("python/tests/st/interface/test_compile_stage.py::test_all_compile_stages",
                   "c = a + b keeps the caller's ones after each of its 10 calls", _ones_after_every_call),
}


# --- concat's vector tile (paged attention's gathered blocks, 2026-12-07): a [128, 1024] bf16
# tile (256 KB) is over UB, a [64, 1024] one (128 KB) is not ---------------------------------
def _concat_rows(pypto, rows):
    @pypto.frontend.jit
    def kernel(x: pypto.Tensor([256, 1024], pypto.DT_BF16), out: pypto.Tensor([256, 1024], pypto.DT_BF16)):
        pypto.set_vec_tile_shapes(rows, 1024)
        top = pypto.view(x, [128, 1024], [0, 0])
        bottom = pypto.view(x, [128, 1024], [128, 0])
        out[:] = pypto.concat([top, bottom], 0)
    return kernel


@probe("ok", inputs=x_out(256, 1024, dtype=torch.bfloat16))
def concat_tile_128k(pypto):
    return _concat_rows(pypto, 64)


@probe("C-TILE-03", inputs=x_out(256, 1024, dtype=torch.bfloat16))
def concat_tile_256k(pypto):
    return _concat_rows(pypto, 128)
