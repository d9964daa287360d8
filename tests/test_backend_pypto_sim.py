"""The ``pypto-sim`` backend: real pypto 0.2.0 compile + cost model on a CPU.

Every launch recompiles (about 0.3 s for the tiny kernel here once pypto is
imported); the first launch that computes numbers in a fresh cache builds pypto's
op calculator with cmake (about 25 s, once per cache directory).

pypto itself is never imported at module level: the backend must be the first to
import it so that its output/log directories are redirected.  No ``from __future__
import annotations`` here: real pypto reads the kernels' annotation objects.
"""
import contextlib
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from cli_helpers import assert_stops_on_signal
from sim_builds import COMPARED, case_figures, digest, load_fixture, report_figures
from ptogym.backends import BackendUnavailable
from ptogym.backends import _pypto_runtime as rt
from ptogym.backends._pypto_worker import stop_workers
from ptogym.backends.base import OutputsNotComputed

pytestmark = pytest.mark.pypto
HAVE_PYPTO = importlib.util.find_spec("pypto") is not None
needs_pypto = pytest.mark.skipif(not HAVE_PYPTO, reason="the real pypto package is not installed")
REPO = Path(__file__).resolve().parents[1]

HIDDEN, ROWS = 64, 8


def build_add(pypto, *, hidden, rows):
    """out = x + y for fp32 [N, hidden] with N a multiple of ``rows``, one task per tile."""

    @pypto.frontend.jit
    def add_rows(
        x: pypto.Tensor([pypto.DYNAMIC, hidden], pypto.DT_FP32),
        y: pypto.Tensor([pypto.DYNAMIC, hidden], pypto.DT_FP32),
        out: pypto.Tensor([pypto.DYNAMIC, hidden], pypto.DT_FP32),
    ):
        pypto.set_vec_tile_shapes(rows, hidden)
        for i in pypto.loop(x.shape[0] // rows):
            a = pypto.view(x, [rows, hidden], [i * rows, 0])
            b = pypto.view(y, [rows, hidden], [i * rows, 0])
            pypto.assemble(pypto.add(a, b), [i * rows, 0], out)

    return add_rows


def build_broken(pypto, *, hidden):
    """Whole-tensor op on a DYNAMIC shape outside a loop: pypto 0.2.0 rejects it."""

    @pypto.frontend.jit
    def broken(
        x: pypto.Tensor([pypto.DYNAMIC, hidden], pypto.DT_FP32),
        out: pypto.Tensor([pypto.DYNAMIC, hidden], pypto.DT_FP32),
    ):
        pypto.set_vec_tile_shapes(ROWS, hidden)
        out[:] = pypto.mul(x, 2.0)

    return broken


def build_stalled(pypto, *, hidden):
    """A builder that waits without using the CPU, as pypto 0.2.0's main thread does
    when one of its compile threads fails."""
    import time

    time.sleep(600)


def build_unrolled_exp(pypto, *, hidden):
    """y = exp(x) walked by loop_unroll over blocks of 8, 4 and 1 rows."""

    @pypto.frontend.jit
    def unrolled_exp(
        x: pypto.Tensor([pypto.DYNAMIC, hidden], pypto.DT_FP32),
        y: pypto.Tensor([pypto.DYNAMIC, hidden], pypto.DT_FP32),
    ):
        pypto.set_vec_tile_shapes(8, hidden)
        for row, size in pypto.loop_unroll(0, x.shape[0], 1, name="ROWS", idx_name="row", unroll_list=[8, 4, 1]):
            pypto.assemble(pypto.exp(pypto.view(x, [size, hidden], [row, 0])), [row, 0], y)

    return unrolled_exp


def build_counted_exp(pypto, *, hidden):
    """y[:n] = exp(x[:n]) in 8-row tasks, n = count[0] read from a tensor at run time."""

    @pypto.frontend.jit
    def counted_exp(
        x: pypto.Tensor([32, hidden], pypto.DT_FP32),
        count: pypto.Tensor([1], pypto.DT_INT32),
        y: pypto.Tensor([32, hidden], pypto.DT_FP32),
    ):
        pypto.set_vec_tile_shapes(8, hidden)
        for i in pypto.loop(count[0] // 8, name="ROWS", idx_name="i"):
            pypto.assemble(pypto.exp(pypto.view(x, [8, hidden], [i * 8, 0])), [i * 8, 0], y)

    return counted_exp


def build_gather_rows_without_tile(pypto):
    """index_select before any vec tile: pypto rejects it only in a compile pass."""

    @pypto.frontend.jit
    def gather_rows(
        x: pypto.Tensor([16, 64], pypto.DT_FP32),
        idx: pypto.Tensor([8], pypto.DT_INT32),
        out: pypto.Tensor([8, 64], pypto.DT_FP32),
    ):
        pypto.assemble(pypto.index_select(x, 0, idx), [0, 0], out)

    return gather_rows


def add_inputs(rows=32, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, HIDDEN, generator=g)
    y = torch.randn(rows, HIDDEN, generator=g)
    return x, y, torch.zeros(rows, HIDDEN)


@pytest.fixture(scope="module", autouse=True)
def _fresh_worker_memory():
    """pypto keeps the memory of every kernel it compiled (2.5 GB after level1 with
    numbers): stop the worker when this module is done, so later tests run without it."""
    yield
    stop_workers()


@pytest.fixture(scope="module")
def sim():
    from ptogym.backends.pypto_sim import Backend

    backend = Backend()  # own instance: tests change its attributes
    backend.keep_artifacts = False
    backend.verbose = False
    return backend


# ------------------------------------------------------------------ no pypto needed
def test_cache_root_resolution(monkeypatch, tmp_path):
    monkeypatch.delenv("PTOGYM_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert rt.cache_root() == tmp_path / ".cache" / "ptogym"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert rt.cache_root() == tmp_path / "xdg" / "ptogym"
    monkeypatch.setenv("PTOGYM_CACHE_DIR", str(tmp_path / "mine"))
    assert rt.cache_root() == tmp_path / "mine"


def test_unavailable_without_pypto(monkeypatch):
    from ptogym.backends.pypto_sim import Backend

    monkeypatch.setattr(rt, "pypto_package_dir", lambda: None)
    with pytest.raises(BackendUnavailable, match=re.escape("pip install 'ptogym[pypto]'")):
        Backend().check_available()
    with pytest.raises(BackendUnavailable, match="pypto"):
        rt.platform_model()


def test_parse_swim(tmp_path):
    lanes = [
        {"blockIdx": 0, "coreType": "AIC", "tasks": []},
        {"blockIdx": 1, "coreType": "AIV", "tasks": [{"execStart": 1000, "execEnd": 2800}]},
        {"blockIdx": 2, "coreType": "AIV", "tasks": [{"execStart": 1200, "execEnd": 4600},
                                                      {"execStart": 4700, "execEnd": 4600}]},
        {"blockIdx": 3, "coreType": "HUB", "tasks": [{"execStart": 0, "execEnd": 99999}]},
    ]
    path = tmp_path / "_simulate.swim.json"
    path.write_text(json.dumps(lanes))
    summary = rt.parse_swim(path)
    assert summary["cycles"] == 3600 and summary["simulated_us"] == pytest.approx(2.0)
    assert summary["tasks"] == 2 and summary["cores"] == 2 and summary["lanes"] == 3
    assert summary["cube_busy_us"] == 0 and summary["vector_busy_us"] == pytest.approx((1800 + 3400) / 1800)


def test_parse_total_cycles(tmp_path):
    report = tmp_path / "_simulate.stat.report.txt"
    report.write_text("=====ASC++ MachineModel Report=====\nTotal Cycles..........:     30530\n"
                      "Total Steps...:  1257\n=====Core Machine Top Statistics=====\nTotal Cycles.....:  99\n")
    assert rt.parse_total_cycles(report) == 30530  # the MachineModel's, not a later section's
    report.write_text("no figures")
    assert rt.parse_total_cycles(report) is None


def _stall_watch_after(command, window_s=0.5):
    from ptogym.backends._pypto_worker import _StallWatch

    process = subprocess.Popen(command, start_new_session=True)  # its own process group, as the worker's
    try:
        watch = _StallWatch(process.pid, window_s)
        time.sleep(window_s * 1.5)
        watch.check()
    finally:
        process.kill()
        process.wait()


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="the stall watch reads /proc")
def test_stall_watch_stops_an_idle_worker_and_spares_a_busy_one():
    from ptogym.backends._pypto_worker import WorkerStalled

    with pytest.raises(WorkerStalled, match="s of CPU in"):
        _stall_watch_after(["sleep", "30"])
    _stall_watch_after([sys.executable, "-c", "while True: pass"])  # a compile keeps a core busy: no stop


def test_loop_bounds_are_evaluated_on_the_call_shapes_or_left_alone():
    shapes = {"x1": (37, 256)}
    dim = "RUNTIME_GetInputShapeDim(ARG_x1,0)"
    assert rt.concrete_int(5, shapes) == 5
    assert rt.concrete_int(f"((({dim}-({dim}*0))/16368)*48)", shapes) == 0
    assert rt.concrete_int(f"(({dim}-{dim}%4)/2)", shapes) == 18
    assert rt.concrete_int(f"({dim}-40)", shapes) == -3
    for unknown in (f"({dim}+loop_idx_0)", "RUNTIME_GetInputShapeDim(ARG_other,0)",
                    "RUNTIME_GetInputShapeDim(ARG_x1,2)", f"(({dim}-40)/2)", f"({dim}/0)", True):
        assert rt.concrete_int(unknown, shapes) is None, unknown


# ------------------------------------------------------------------ real pypto
@needs_pypto
@pytest.mark.parametrize("rows", [5, 13, 1])
def test_a_reduced_build_simulates_and_computes_what_the_full_build_does(sim, rows):
    """5 rows run the 4- and 1-row branches (the 8-row loop is left out), 13 all three, 1
    only the last: cycles, tasks, cores and pypto's computed outputs equal the full build's."""
    x = torch.randn(rows, HIDDEN, generator=torch.Generator().manual_seed(rows))
    reports, outputs = {}, {}
    for full in (True, False):
        sim.full_build, sim.no_cache = full, True
        outputs[full] = torch.zeros_like(x)
        try:
            reports[full] = sim.launch(build_unrolled_exp, {"hidden": HIDDEN}, [x, outputs[full]])
        finally:
            sim.full_build = sim.no_cache = False
    full, reduced = reports[True], reports[False]
    assert (full.extra["build"], reduced.extra["build"]) == ("full", "reduced")
    assert (full.extra["loops_skipped"], reduced.extra["loops_skipped"]) == (0, {5: 1, 13: 0, 1: 2}[rows])
    assert (reduced.simulated_us, reduced.extra["kernel_us"], reduced.tasks, reduced.cores) == (
        full.simulated_us, full.extra["kernel_us"], full.tasks, full.cores)
    assert full.outputs_valid and reduced.outputs_valid
    assert torch.equal(outputs[True], outputs[False])
    torch.testing.assert_close(outputs[False], torch.exp(x))


@needs_pypto
def test_simulates_computes_and_is_deterministic(sim, monkeypatch):
    for name in [m for m in sys.modules if m == "pypto" or m.startswith("pypto.")]:
        monkeypatch.delitem(sys.modules, name)  # (imported by earlier tests: lint, API fixtures)
    x, y, out = add_inputs()
    first = sim.launch(build_add, {"hidden": HIDDEN, "rows": ROWS}, [x, y, out])
    assert first.backend == "pypto-sim"
    assert first.simulated_us > 0 and first.tasks >= 1 and 1 <= first.cores <= first.tasks
    assert first.outputs_valid and first.extra["compute"] == "pypto-interpreter"
    torch.testing.assert_close(out, x + y)

    out2 = torch.zeros_like(out)
    second = sim.launch(build_add, {"hidden": HIDDEN, "rows": ROWS}, [x, y, out2])
    assert (second.simulated_us, second.tasks, second.cores) == (first.simulated_us, first.tasks, first.cores)
    torch.testing.assert_close(out2, x + y)
    # the per-call run directories are gone: nothing is left in the worker's session output dir
    # (other processes on the machine may be running pypto at the same time: only ours count)
    from ptogym.backends._pypto_worker import _workers
    pid = _workers["pypto-sim"].process.pid
    assert [p for p in (rt.cache_root() / "pypto-runs").glob(f"run-{pid}-*/out/*")] == []
    assert "pypto" not in sys.modules  # the launches ran in the worker process


@needs_pypto
def test_above_threshold_raises_and_cost_only_leaves_tensors_untouched(sim, monkeypatch):
    """Above max_compute_elements a launch would compute nothing: it raises before
    compiling; inside cost_only() it runs the cost model alone and writes nothing."""
    x, y, _ = add_inputs()
    computed = sim.launch(build_add, {"hidden": HIDDEN, "rows": ROWS}, [x, y, torch.zeros_like(x)])
    monkeypatch.setattr(sim, "max_compute_elements", 3 * x.numel() - 1)
    x0, y0 = x.clone(), y.clone()
    out = torch.full_like(x, 7.0)
    with pytest.raises(OutputsNotComputed, match="PTOGYM_SIM_MAX_ELEMENTS"):
        sim.launch(build_add, {"hidden": HIDDEN, "rows": ROWS}, [x, y, out])
    with sim.cost_only():
        report = sim.launch(build_add, {"hidden": HIDDEN, "rows": ROWS}, [x, y, out])
    assert report.outputs_valid is False and report.extra["compute"] == "none"
    assert torch.equal(out, torch.full_like(x, 7.0)) and torch.equal(x, x0) and torch.equal(y, y0)
    # computing the numbers does not change what the cost model reports
    assert (report.simulated_us, report.tasks, report.cores) == (
        computed.simulated_us, computed.tasks, computed.cores)


@needs_pypto
def test_the_cost_model_sees_trip_counts_read_from_tensors_in_cost_only_mode_too(sim):
    """A loop bound read from a tensor: the cost model runs as many iterations as the
    value says, whether pypto's interpreter computes the numbers or not (the worker sends
    the values; uninitialised copies gave random trip counts) - and a cached result is
    keyed by them."""
    x = torch.randn(32, HIDDEN)
    figures = {}
    for rows in (8, 32):
        count = torch.tensor([rows], dtype=torch.int32)
        computed = sim.launch(build_counted_exp, {"hidden": HIDDEN}, [x, count, torch.zeros_like(x)])
        with sim.cost_only():
            cost_only = sim.launch(build_counted_exp, {"hidden": HIDDEN}, [x, count, torch.zeros_like(x)])
        assert (cost_only.simulated_us, cost_only.tasks) == (computed.simulated_us, computed.tasks)
        figures[rows] = computed.tasks
    assert figures[32] > figures[8]


@needs_pypto
def test_a_failed_compile_pass_names_its_cause_from_pypto_native_log(sim):
    """Python sees "Errcode: FFFFFF! Run pass failed"; pypto's own log says which pass
    rejected what, and the error carries those lines."""
    x, idx = torch.randn(16, 64), torch.arange(8, dtype=torch.int32)
    with pytest.raises(rt.PyptoRunError) as failure:
        sim.launch(build_gather_rows_without_tile, {}, [x, idx, torch.zeros(8, 64)])
    assert "FFFFFF" in str(failure.value)
    assert "pypto's native log" in str(failure.value) and "ExpandFunction failed" in str(failure.value)


@needs_pypto
def test_interrupt_during_a_pypto_sim_run_stops_within_2_s_and_removes_its_run_directory(tmp_path):
    """pypto compiles in C++ (Python signal handlers wait for it): the launch runs in a
    worker process that the interrupted parent kills, with its run directory."""
    cache = tmp_path / "cache"
    cache.mkdir()
    calculator = rt.cache_root() / "pypto-calculator"
    if calculator.is_dir():  # reuse the built op calculator: no 25 s cmake build here
        (cache / "pypto-calculator").symlink_to(calculator)
    env = {**os.environ, "PTOGYM_CACHE_DIR": str(cache), "PYTHONPATH": str(REPO)}
    assert_stops_on_signal([sys.executable, "-m", "ptogym", "run", "inplace_add_rms_norm", "level1", "--backend",
                            "pypto-sim"], env, signal.SIGINT, cwd=tmp_path,
                           ready=lambda: bool(list((cache / "pypto-runs").glob("run-*"))))  # the worker is up
    assert list((cache / "pypto-runs").iterdir()) == []


def _alive(pid: int) -> bool:
    """Running (a zombie left for a parent that does not reap counts as gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


@needs_pypto
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_the_worker_dies_with_its_parent_killed_with_sigkill(tmp_path):
    """kill -9 of the process that started the worker (no handler runs there) takes the
    worker down at once, in the middle of a launch, instead of letting it finish."""
    script = textwrap.dedent(f"""
        import sys, torch
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_backend_pypto_sim import build_stalled, HIDDEN
        from ptogym.backends import _pypto_worker as worker
        from ptogym.backends.pypto_sim import Backend
        worker._workers["pypto-sim"] = started = worker._Worker("pypto-sim")
        print(started.process.pid, flush=True)
        x = torch.zeros(8, HIDDEN)
        Backend().launch(build_stalled, {{"hidden": HIDDEN}}, [x, x.clone()])
    """)
    env = {**os.environ, "PTOGYM_CACHE_DIR": str(tmp_path), "PTOGYM_SIM_STALL_S": "0",
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    parent = subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        child = int(parent.stdout.readline())
        time.sleep(5)  # the worker is in the launch (importing pypto, then asleep in the builder)
        assert _alive(child)
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 2
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(child), "the worker outlived its parent"
        assert "Traceback" not in parent.stderr.read()
    finally:
        parent.kill()
        with contextlib.suppress(NameError, ProcessLookupError):
            os.kill(child, signal.SIGKILL)


@needs_pypto
def test_a_long_launch_prints_progress_lines_with_phase_elapsed_and_memory(sim, monkeypatch, capfd):
    monkeypatch.setenv("PTOGYM_PROGRESS_S", "0.5")
    monkeypatch.setenv("PTOGYM_SIM_STALL_S", "4")
    x, _, out = add_inputs()
    with pytest.raises(rt.PyptoRunError, match="made no progress"):
        sim.launch(build_stalled, {"hidden": HIDDEN}, [x, out])
    lines = capfd.readouterr().err.splitlines()
    progress = [line for line in lines if line.startswith("[pypto-sim test_backend_pypto_sim] ")]
    assert len(progress) >= 4, lines
    assert re.fullmatch(r"\[pypto-sim test_backend_pypto_sim\] building the kernel: \d+ s, \d+\.\d\d GB resident",
                        progress[-1]), progress
    monkeypatch.setenv("PTOGYM_PROGRESS_S", "0")
    x, y, out = add_inputs()
    sim.launch(build_add, {"hidden": HIDDEN, "rows": ROWS}, [x, y, out])
    assert capfd.readouterr().err == ""


@needs_pypto
def test_keep_artifacts_and_platform_model_match_the_cost_model(sim, monkeypatch):
    monkeypatch.setattr(sim, "keep_artifacts", True)
    x, y, out = add_inputs()
    report = sim.launch(build_add, {"hidden": HIDDEN, "rows": ROWS}, [x, y, out])
    kept = Path(report.artifacts)
    try:
        names = {p.name for p in kept.iterdir()}
        assert {"_simulate.pefetto.trace.json", "_simulate.swim.json"} <= names
        assert json.loads((kept / "_simulate.pefetto.trace.json").read_text())
        assert rt.parse_swim(kept / "_simulate.swim.json")["simulated_us"] == report.simulated_us
        # the whole kernel (the cost model's Total Cycles) includes the scheduler's start-up
        total = rt.parse_total_cycles(kept / "_simulate.stat.report.txt")
        assert report.extra["kernel_us"] == pytest.approx(total / rt.SIM_CLOCK_MHZ)
        assert report.extra["kernel_us"] > report.simulated_us
        # each task copies two [ROWS, HIDDEN] fp32 tiles in and one out: the pipe
        # usage the cost model reports matches the latency model in platform_model()
        stats = (kept / "_simulate.stat.report.txt").read_text()
        mte_in = float(re.search(r"Average MTE_IN Usage\.*:\s*([\d.]+)", stats).group(1))
        mte_out = float(re.search(r"Average MTE_OUT Usage\.*:\s*([\d.]+)", stats).group(1))
        tile = ROWS * HIDDEN * 4
        assert mte_in == 2 * rt.copy_tile_cycles(tile, "in")
        assert mte_out == rt.copy_tile_cycles(tile, "out")
    finally:
        shutil.rmtree(kept, ignore_errors=True)

    model = rt.platform_model()
    assert (model["vector_cores"], model["cube_cores"], model["ub_bytes"]) == (48, 24, 196608)
    assert model["clock_ghz"] == 1.8
    assert model["hbm_gbps"] == pytest.approx(48 * 1.8 / (2.613e-6 * 2 * 2000))
    assert model["hbm_gbps"] > model["platform_ddr_gbps"] > 0


@needs_pypto
def test_a_launch_that_stops_making_progress_is_stopped_with_a_clear_error(sim, monkeypatch):
    monkeypatch.setenv("PTOGYM_SIM_STALL_S", "2")
    x, _, out = add_inputs()
    start = time.monotonic()
    with pytest.raises(rt.PyptoRunError, match=r"'build_stalled' made no progress .*PTOGYM_SIM_STALL_S"):
        sim.launch(build_stalled, {"hidden": HIDDEN}, [x, out])
    assert time.monotonic() - start < 30
    monkeypatch.delenv("PTOGYM_SIM_STALL_S")
    x, y, out = add_inputs()  # a fresh worker takes the next launch
    sim.launch(build_add, {"hidden": HIDDEN, "rows": ROWS}, [x, y, out])
    torch.testing.assert_close(out, x + y)


@needs_pypto
def test_failure_raises_with_log_tail_then_recovers(sim, capfd):
    x, _, out = add_inputs()
    with pytest.raises(rt.PyptoRunError, match="pypto log") as caught:
        sim.launch(build_broken, {"hidden": HIDDEN}, [x, out])
    assert "INT32_MAX" in str(caught.value)
    x, y, out = add_inputs()
    report = sim.launch(build_add, {"hidden": HIDDEN, "rows": ROWS}, [x, y, out])
    assert report.simulated_us > 0
    torch.testing.assert_close(out, x + y)
    captured = capfd.readouterr()
    assert captured.out == "" and captured.err == "", "pypto chatter leaked to the console"


@needs_pypto
def test_nothing_written_to_cwd_or_home(tmp_path):
    """A fresh process with HOME and the cwd in tmp_path: pypto's files go to the
    cache under $HOME/.cache/ptogym (the cost-only result kept in sim-results) and the
    per-run ones are gone at exit."""
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    script = textwrap.dedent(f"""
        import json, sys, torch
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_backend_pypto_sim import build_add, add_inputs, HIDDEN, ROWS
        from ptogym.backends.pypto_sim import Backend
        b = Backend()
        x, y, out = add_inputs()
        with b.cost_only():
            r = b.launch(build_add, {{"hidden": HIDDEN, "rows": ROWS}}, [x, y, out])
        print(json.dumps({{"us": r.simulated_us, "valid": r.outputs_valid}}))
    """)
    env = {k: v for k, v in os.environ.items()
           if k not in {"PTOGYM_CACHE_DIR", "XDG_CACHE_HOME", "TILE_FWK_OUTPUT_DIR", "PYPTO_HOME",
                        "ASCEND_PROCESS_LOG_PATH", "TILEFWK_CONFIG_PATH", "PTOGYM_VERBOSE",
                        "PTOGYM_KEEP_ARTIFACTS"}}
    env.update(HOME=str(home), PTOGYM_SIM_MAX_ELEMENTS="0",
               PYTHONPATH=os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", script], cwd=work, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stderr == ""
    lines = proc.stdout.splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["us"] > 0, proc.stdout[-2000:]
    assert list(work.iterdir()) == []
    left = sorted(str(p.relative_to(home)) for p in home.rglob("*"))
    assert left[:4] == [".cache", ".cache/ptogym", ".cache/ptogym/pypto-runs", ".cache/ptogym/sim-results"], left
    assert len(left) == 5 and left[4].endswith(".json"), left  # the cost-only result, cached


# ------------------------------------------------------------------ every operator
def _op_names():
    from ptogym.ops import OP_NAMES

    return list(OP_NAMES)


@pytest.fixture
def fresh_worker():
    """pypto keeps every kernel it compiled until its process ends: one worker per
    operator keeps the suite's memory bounded (<= 4 GB with g++ running beside it)."""
    yield
    stop_workers()


@needs_pypto
@pytest.mark.parametrize("op_name", _op_names())
def test_op_level0_compiles_simulates_and_matches_interp(op_name, sim, fresh_worker):
    """CI proof that each operator's kernel source is real PyPTO: its level0 case
    compiles and simulates under pypto-sim, and where pypto's interpreter computed
    numbers they match ptogym's own interpreter within the case tolerance."""
    from ptogym.backends.interp import Backend as InterpBackend
    from ptogym.ops import get_op
    from ptogym.verify.compare import detailed_tensor_compare

    from ptogym.verify.cases import load_cases
    from ptogym.verify.runner import make_case_inputs

    spec = get_op(op_name)
    case = next(c for c in load_cases(spec.cases_path, spec) if c.id == "level0")

    inputs = make_case_inputs(spec, case)
    expected, _ = spec.run({k: v.clone() for k, v in inputs.items()}, case.attrs, InterpBackend())
    actual, report = spec.run({k: v.clone() for k, v in inputs.items()}, case.attrs, sim)
    assert report.backend == "pypto-sim" and report.extra["build"] == "reduced"
    assert report.simulated_us > 0 and report.tasks >= 1 and report.cores >= 1
    recorded = load_fixture().get(op_name, {}).get("level0")
    if recorded is not None:  # the reduced build simulates what the full build recorded
        assert report_figures(report) == {key: recorded[key] for key in COMPARED}
        if report.outputs_valid and "outputs" in recorded:
            assert {name: digest(actual[name]) for name in recorded["outputs"]} == recorded["outputs"]
    if not report.outputs_valid:
        pytest.skip(f"{op_name} level0 ({report.extra.get('elements')} elements) is above "
                    "the interpreter threshold: cost only")
    assert set(actual) == set(expected)
    for name in expected:
        result = detailed_tensor_compare(actual[name], expected[name], name, **case.tolerance(name).bounds())
        assert result.all_close, f"{op_name}.{name}: pypto-sim vs interp\n{result}"


@needs_pypto
def test_tuned_schedule_numbers_under_pypto_interpreter(sim):
    """level1 (128 rows) runs its tuned table's schedule (band tokens<=128: 4-row blocks,
    ``ptogym tune``'s winner); pypto's own interpreter must reproduce the golden with it,
    not only our interpreter."""
    from ptogym.verify.cases import load_cases
    from ptogym.verify.runner import run_case
    from ptogym.ops import get_op

    spec = get_op("inplace_add_rms_norm")
    case = next(c for c in load_cases(spec.cases_path, spec) if c.id == "level1")
    try:
        result = run_case(spec, case, sim)
    finally:  # pypto's interpreter leaves 2.5 GB in the worker: release it before the next test
        stop_workers()
    assert result.launch.outputs_valid and result.launch.tasks == 32
    assert result.status == "PASS", result.report(verbose=True)


@needs_pypto
def test_run_cli_keep_artifacts_prints_where(tmp_path):
    """``ptogym run ... --backend pypto-sim --keep-artifacts`` passes and keeps the
    Perfetto trace and swimlane json where it says."""
    env = {k: v for k, v in os.environ.items() if k not in {"PTOGYM_KEEP_ARTIFACTS", "PTOGYM_VERBOSE"}}
    proc = subprocess.run([sys.executable, "-m", "ptogym", "run", "inplace_add_rms_norm", "level0",
                           "--backend", "pypto-sim", "--keep-artifacts"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.stdout.splitlines()[-1] == "[PRECISION_PASS]"
    assert re.search(r"^level0 .* PASS .* sim [0-9.]+ us \(reduced build\)$", proc.stdout, flags=re.M), proc.stdout  # measured
    kept = re.search(r"artifacts kept in (\S+)", proc.stdout)
    assert kept, proc.stdout
    folder = Path(kept.group(1))
    try:
        names = {p.name for p in folder.rglob("*")}
        assert any(name.endswith("swim.json") for name in names), names
        assert any("trace" in name for name in names), names
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    assert list(tmp_path.iterdir()) == []


def _recorded_levels():
    return [(op, level) for op, levels in sorted(load_fixture().items()) for level in sorted(levels)]


@needs_pypto
@pytest.mark.slow
@pytest.mark.parametrize("op_name, level", _recorded_levels())
def test_reduced_builds_match_the_recorded_full_builds(op_name, level, sim, fresh_worker):
    """Every level recorded by scripts/record_full_builds.py: the reduced build's µs,
    kernel µs, tasks, cores and computed outputs equal the full build's."""
    from ptogym.ops import get_op
    from ptogym.verify.cases import load_cases

    spec = get_op(op_name)
    case = next(c for c in load_cases(spec.cases_path, spec) if c.id == level)
    recorded = load_fixture()[op_name][level]
    reduced = case_figures(spec, case, sim, full_build=False)
    assert reduced["build"] == "reduced"
    assert {key: reduced[key] for key in COMPARED} == {key: recorded[key] for key in COMPARED}
    assert reduced.get("outputs") == recorded.get("outputs")


@needs_pypto
@pytest.mark.slow
@pytest.mark.parametrize("op_name", _op_names())
def test_full_build_of_every_branch_compiles_level0(op_name, sim, fresh_worker):
    """A full build (every loop_unroll branch: what a device binary holds) compiles and
    simulates; where recorded, it still gives the recorded figures."""
    from ptogym.ops import get_op
    from ptogym.verify.cases import load_cases

    spec = get_op(op_name)
    case = next(c for c in load_cases(spec.cases_path, spec) if c.id == "level0")
    full = case_figures(spec, case, sim, full_build=True)
    assert full["build"] == "full" and full["simulated_us"] > 0 and full["tasks"] >= 1
    recorded = load_fixture().get(op_name, {}).get("level0")
    if recorded is not None:
        assert {key: full[key] for key in COMPARED} == {key: recorded[key] for key in COMPARED}
