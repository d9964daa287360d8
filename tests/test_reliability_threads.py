"""The interpreter runs kernels from several threads at once: each thread has its own
kernel state (tile shapes, loops, records), ``lenient()`` and ``trace.recording()``
apply to the thread that enters them, and concurrent first calls build a kernel once.

Every result is compared with plain torch computed in fp32 (not the kernel's path).  No
``from __future__ import annotations`` here: pypto refuses kernels defined under it."""

import threading
import time
import warnings

import pytest
import torch

import ptogym.interp as interp
from ptogym.backends.interp import Backend
from ptogym.interp import checks, trace

THREADS = 6


def build_scaled_exp(pypto, *, hidden, tile_rows):
    """y = exp(x) * 0.5, ``tile_rows`` rows per vector tile."""
    @pypto.frontend.jit()
    def scaled_exp(x: pypto.Tensor([pypto.DYNAMIC, hidden], pypto.DT_FP32),
                   y: pypto.Tensor([pypto.DYNAMIC, hidden], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(tile_rows, hidden)
        for row in pypto.loop(0, x.shape[0], tile_rows, name="ROWS", idx_name="row"):
            tile = pypto.view(x, [tile_rows, hidden], [row, 0], valid_shape=[(x.shape[0] - row).min(tile_rows), hidden])
            pypto.assemble(pypto.mul(pypto.exp(tile), 0.5), [row, 0], y)
    return scaled_exp


def build_matmul(pypto, *, k, n, m_tile):
    """c = a @ b (fp16 in, fp32 out), ``m_tile`` rows per cube tile."""
    @pypto.frontend.jit()
    def matmul(a: pypto.Tensor([pypto.DYNAMIC, k], pypto.DT_FP16), b: pypto.Tensor([k, n], pypto.DT_FP16),
               c: pypto.Tensor([pypto.DYNAMIC, n], pypto.DT_FP32)):
        pypto.set_cube_tile_shapes([m_tile, m_tile], [k, k], [n, n])
        for row in pypto.loop(0, a.shape[0], m_tile, name="ROWS", idx_name="row"):
            tile = pypto.view(a, [m_tile, k], [row, 0], valid_shape=[(a.shape[0] - row).min(m_tile), k])
            pypto.assemble(pypto.matmul(tile, b, pypto.DT_FP32), [row, 0], c)
    return matmul


def run_threads(work, count=THREADS):
    """Run ``work(index)`` in ``count`` threads started together; the exceptions they raised."""
    start = threading.Barrier(count)
    errors = []

    def target(index):
        start.wait()
        try:
            work(index)
        except BaseException as error:  # noqa: BLE001 - collected and reported by the test
            errors.append(error)

    threads = [threading.Thread(target=target, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def test_warm_and_cold_calls_of_two_kernels_from_six_threads_match_torch():
    """Six threads alternate a vector kernel and a cube kernel, each with its own tile
    shapes, on shapes some of them compile first (cold) while others run warm calls;
    before per-thread state, 40% of such calls raised a bogus constraint error."""
    backend = Backend()  # fresh: no kernel cached yet
    calls = []

    def work(index):
        generator = torch.Generator().manual_seed(index)
        for step in range(8):
            rows = 3 + 5 * index + step
            if (index + step) % 2:
                hidden = 32 * (1 + step % 3)  # three shapes: cold the first time in any thread
                x = torch.randn(rows, hidden, generator=generator)
                y = torch.full_like(x, float("nan"))
                backend.launch(build_scaled_exp, {"hidden": hidden, "tile_rows": 2 + index % 3}, [x, y])
                torch.testing.assert_close(y, torch.exp(x) * 0.5, rtol=1e-6, atol=1e-6)
            else:
                k, n = 32 * (1 + step % 2), 64
                a = torch.randn(rows, k, generator=generator).half()
                b = torch.randn(k, n, generator=generator).half()
                c = torch.full((rows, n), float("nan"))
                backend.launch(build_matmul, {"k": k, "n": n, "m_tile": 16 * (1 + index % 2)}, [a, b, c])
                torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-3, atol=1e-3)
            calls.append(1)

    assert run_threads(work) == []
    assert len(calls) == THREADS * 8


def test_concurrent_first_calls_build_a_kernel_once():
    backend = Backend()
    builds = []

    def counting_build(pypto, **static):
        builds.append(static)
        time.sleep(0.05)  # a slow build: the other threads arrive while it runs
        return build_scaled_exp(pypto, **static)

    def work(index):
        x = torch.randn(4, 32)
        y = torch.empty_like(x)
        backend.launch(counting_build, {"hidden": 32, "tile_rows": 2}, [x, y])
        torch.testing.assert_close(y, torch.exp(x) * 0.5)

    assert run_threads(work) == []
    assert builds == [{"hidden": 32, "tile_rows": 2}]


def test_a_kernel_keeps_its_tile_shapes_while_another_thread_starts_one():
    """Thread A sets its tile shapes and pauses; the main thread enters a kernel that
    sets none yet; A's op must still see A's shapes (with one process-wide stack it saw
    the main thread's kernel and was refused: "before any pypto.set_vec_tile_shapes")."""
    a_has_tiles, main_inside, a_done = threading.Event(), threading.Event(), threading.Event()

    @interp.frontend.jit()
    def kernel_a(x: interp.Tensor([4, 32], interp.DT_FP32), y: interp.Tensor([4, 32], interp.DT_FP32)):
        interp.set_vec_tile_shapes(4, 32)
        a_has_tiles.set()
        main_inside.wait(10)
        y[:] = interp.exp(x)

    @interp.frontend.jit()
    def kernel_main(x: interp.Tensor([4, 32], interp.DT_FP32), y: interp.Tensor([4, 32], interp.DT_FP32)):
        main_inside.set()
        a_done.wait(10)
        interp.set_vec_tile_shapes(2, 32)
        y[:] = interp.mul(x, 2.0)

    x, y_a, y_main = torch.randn(4, 32), torch.empty(4, 32), torch.empty(4, 32)

    errors = []

    def thread_a():
        try:
            kernel_a(x, y_a)
        except interp.ConstraintViolation as error:
            errors.append(error)
        finally:
            a_done.set()

    first = threading.Thread(target=thread_a)
    first.start()
    assert a_has_tiles.wait(10)
    kernel_main(x, y_main)
    first.join()
    assert errors == []
    torch.testing.assert_close(y_a, torch.exp(x))
    torch.testing.assert_close(y_main, x * 2)


def test_lenient_applies_to_the_thread_that_enters_it(monkeypatch):
    monkeypatch.setattr(checks._mode, "lenient", False)
    entered, done = threading.Event(), threading.Event()
    seen = {}

    def lenient_thread():
        with checks.lenient():
            entered.set()
            done.wait(10)
            seen["lenient thread"] = checks.is_lenient()

    thread = threading.Thread(target=lenient_thread)
    thread.start()
    assert entered.wait(10)
    seen["other thread"] = checks.is_lenient()
    done.set()
    thread.join()
    assert seen == {"lenient thread": True, "other thread": False}


def test_advice_is_shown_once_per_site_across_threads():
    """A-OUT-01 at one kernel site, reached by six threads at once: one warning."""
    @interp.frontend.jit()
    def never_writes(x: interp.Tensor([4, 32], interp.DT_FP32), out: interp.Tensor([4, 32], interp.DT_FP32)):
        interp.set_vec_tile_shapes(4, 32)
        unused = interp.exp(x)  # noqa: F841

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert run_threads(lambda index: never_writes(torch.randn(4, 32), torch.empty(4, 32))) == []
    messages = [str(w.message) for w in caught if "A-OUT-01" in str(w.message)]
    assert len(messages) == 1 and "parameter out" in messages[0]


def test_trace_records_only_the_recording_thread():
    backend = Backend()
    x = torch.randn(4, 32)
    started, stop = threading.Event(), threading.Event()

    def other_thread():
        started.set()
        while not stop.is_set():
            backend.launch(build_scaled_exp, {"hidden": 32, "tile_rows": 4}, [x, torch.empty_like(x)])

    thread = threading.Thread(target=other_thread)
    thread.start()
    try:
        assert started.wait(10)
        with trace.recording() as records:
            backend.launch(build_scaled_exp, {"hidden": 32, "tile_rows": 2}, [x, torch.empty_like(x)])
    finally:
        stop.set()
        thread.join()
    # two 2-row tiles (tile_rows=2, this thread's), each exp then mul; none of the other thread's 4-row tiles
    assert [(r.op, tuple(r.data.shape)) for r in records][1::2] == [("mul", (2, 32))] * 2
    assert [tuple(r.data.shape) for r in records] == [(2, 32)] * 4
    assert not trace.recorders
