"""``ptogym bench``: the table's figures are measured, consistent and plotted."""
import json

import pytest

from ptogym import bench
from ptogym.ops import get_op
from ptogym.verify.cases import load_cases


def test_wall_times_and_ratio_without_simulation():
    rows = bench.run_bench(["inplace_add_rms_norm"], ["level0"], repeat=1, simulate=False, log=lambda *_: None)
    (row,) = rows
    assert row["interp_s"] > 0 and row["golden_s"] > 0
    assert row["interp_over_golden"] == pytest.approx(row["interp_s"] / row["golden_s"])
    case = next(c for c in load_cases(get_op("inplace_add_rms_norm").cases_path) if c.id == "level0")
    assert row["hbm_bytes"] == (4 * 8 * 256 + 256 + 8) * 2 == get_op("inplace_add_rms_norm").hbm_bytes(case)
    assert "sim" not in row


@pytest.mark.pypto
def test_simulated_figures_and_plot(tmp_path, monkeypatch):
    pytest.importorskip("pypto")
    from ptogym.backends._pypto_worker import stop_workers

    stop_workers()  # the worker that bench starts inherits this cache directory
    monkeypatch.setenv("PTOGYM_CACHE_DIR", str(tmp_path / "cache"))
    rows = bench.run_bench(["inplace_add_rms_norm"], ["level0"], repeat=1, log=lambda *_: None)
    assert list((tmp_path / "cache" / "pypto-runs").iterdir()) == []  # issue 9: no run directory left
    sims = rows[0]["sim"]
    assert set(sims) == {"default", "upstream"}
    for sim in sims.values():
        assert sim["simulated_us"] > 0 and sim["tasks"] > 0 and sim["cores"] > 0
        assert sim["effective_gbps"] == pytest.approx(rows[0]["hbm_bytes"] / sim["simulated_us"] / 1e3)
        assert 0 < sim["percent_of_ceiling"] < 100
    pytest.importorskip("matplotlib")
    out = tmp_path / "bench.png"
    bench.plot(rows, str(out))
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_writes_json(tmp_path, capsys):
    from ptogym.cli import main

    out = tmp_path / "bench.json"
    assert main(["bench", "inplace_add_rms_norm", "--levels", "level0", "--no-sim", "--repeat", "1",
                 "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data[0]["level"] == "level0" and data[0]["op"] == "inplace_add_rms_norm"
    assert "ratio" in capsys.readouterr().out


def test_interp_benchmark_script_runs_and_agrees_with_torch(capsys):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).parents[1] / "benchmarks" / "bench_interp.py"
    spec = importlib.util.spec_from_file_location("bench_interp", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    ratio = module.main(["--rows", "100", "--hidden", "256", "--tile-rows", "16", "--repeat", "1"])
    assert ratio > 0
    assert "max |diff| = 0" in capsys.readouterr().out  # tail tiles (valid_shape) included
