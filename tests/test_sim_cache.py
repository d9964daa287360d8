"""The pypto-sim result cache: keyed by what determines a cost-model result, atomic,
bounded, bypassed by --no-cache.  The worker is replaced by a counting stand-in, so no
real pypto runs here (tests/test_backend_pypto_sim.py times a real second bench)."""
import importlib.util
import os

import pytest
import torch

from ptogym.backends import _pypto_worker, _sim_cache
from ptogym.backends.pypto_sim import Backend

needs_pypto = pytest.mark.skipif(importlib.util.find_spec("pypto") is None, reason="pypto not installed")


def build_scale(pypto, *, hidden):
    """Never built here: the stand-in worker answers for it."""


@pytest.fixture
def counted(monkeypatch, tmp_path):
    """A pypto-sim backend whose worker is a stand-in counting its launches."""
    monkeypatch.setenv("PTOGYM_CACHE_DIR", str(tmp_path))
    calls = []

    def launch_in_worker(backend, builder, static, tensors, scalars, compute):
        calls.append((static, [tuple(t.shape) for t in tensors]))
        return {"outputs_valid": False, "simulated_us": 1.5 * len(calls), "tasks": 3, "cores": 2,
                "artifacts": None, "wall_s": 0.1, "extra": {"build": backend.build_kind, "worker_peak_rss_bytes": 7}}

    monkeypatch.setattr(_pypto_worker, "launch_in_worker", launch_in_worker)
    backend = Backend()
    backend.keep_artifacts = backend.verbose = backend.full_build = backend.no_cache = False
    return backend, calls


def _launch(backend, rows=8, hidden=64, **static):
    x = torch.zeros(rows, hidden)
    with backend.cost_only():
        return backend.launch(build_scale, {"hidden": hidden, **static}, [x, x])


@needs_pypto
def test_a_second_identical_cost_only_launch_is_answered_from_the_cache(counted, tmp_path):
    backend, calls = counted
    first, second = _launch(backend), _launch(backend)
    assert len(calls) == 1
    assert (first.extra["cache"], second.extra["cache"]) == ("miss", "hit")
    assert (second.simulated_us, second.tasks, second.cores) == (first.simulated_us, first.tasks, first.cores)
    assert "worker_peak_rss_bytes" not in second.extra  # a worker's memory is not the cache's
    assert [p.name for p in (tmp_path / "sim-results").iterdir() if p.name.startswith(".tmp")] == []


@needs_pypto
def test_shapes_static_params_build_and_aliasing_make_new_keys(counted):
    backend, calls = counted
    _launch(backend)
    _launch(backend, rows=16)
    _launch(backend, hidden=128)
    _launch(backend, flag=True)
    backend.full_build = True
    _launch(backend)
    backend.full_build = False
    x = torch.zeros(8, 64)
    with backend.cost_only():  # two distinct tensors where the first launch passed one twice
        backend.launch(build_scale, {"hidden": 64}, [x, x.clone()])
    assert len(calls) == 6


@needs_pypto
def test_values_make_new_keys(counted):
    """The cost model reads the values a kernel reads as scalars (trip counts): the same
    shapes with other values are another result."""
    backend, calls = counted
    lengths = torch.tensor([4], dtype=torch.int32)
    for value in (4, 4, 1):
        lengths.fill_(value)
        with backend.cost_only():
            backend.launch(build_scale, {"hidden": 64}, [torch.zeros(8, 64), lengths])
    assert len(calls) == 2


@needs_pypto
def test_no_cache_and_computing_launches_bypass_the_cache(counted):
    backend, calls = counted
    _launch(backend)
    backend.no_cache = True
    assert _launch(backend).extra["cache"] == "off"
    backend.no_cache = False
    x = torch.zeros(8, 64)
    with pytest.raises(RuntimeError, match="outputs were not computed"):  # the stand-in computes nothing
        backend.launch(build_scale, {"hidden": 64}, [x, x])
    assert backend.last_report.extra["cache"] == "off"
    assert _launch(backend).extra["cache"] == "hit"
    assert len(calls) == 3


@needs_pypto
def test_an_edited_source_or_a_damaged_entry_is_a_miss(counted, monkeypatch, tmp_path):
    backend, calls = counted
    _launch(backend)
    monkeypatch.setitem(_sim_cache._source_digests, __name__, "edited")
    assert _launch(backend).extra["cache"] == "miss"
    for entry in (tmp_path / "sim-results").iterdir():
        entry.write_text("{not json")
    assert _launch(backend).extra["cache"] == "miss"
    assert _launch(backend).extra["cache"] == "hit"
    assert len(calls) == 3


def test_the_folder_stays_within_its_bound_least_recently_used_first(tmp_path):
    folder = tmp_path / "sim-results"
    folder.mkdir()
    for index in range(10):
        path = folder / f"entry{index}.json"
        path.write_text("x" * 1000)
        os.utime(path, (index, index))  # entry0 is the least recently used
    _sim_cache.prune(folder, 5500)
    left = sorted(p.name for p in folder.iterdir())
    assert left == [f"entry{index}.json" for index in range(5, 10)], left
