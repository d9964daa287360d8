"""ptogym tune: search spaces, tuned tables, trials, the database, both engines.

The sweeps here measure with ``tune_fakes.toy_cost`` (prices the toy kernel's build
parameters, no compile), so they test the mechanics: every candidate checked against
the golden on the interpreter (the toy's wrong-result candidate is the cheapest and
must be rejected), constraints, timeouts and memory caps recorded, resumption from
the database, ``--apply`` changing what the operator builds.  The real pypto-sim
sweep is marked slow."""
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ptogym.cli import main
from ptogym.ops import all_ops, get_op
from ptogym.tune import table
from ptogym.tune.space import config_key, token_band
from ptogym.tune.trial import TrialRequest, execute, load_level
from ptogym.verify.cases import load_cases
from ptogym.workflow.scaffold import scaffold

from tune_fakes import built_static, make_toy_operator

REPO = Path(__file__).resolve().parents[1]
TUNED_OPS = tuple(spec.name for spec in all_ops())  # every operator declares TUNING and reads its tuned.json


def _tune(*argv, timeout=300):
    """``python -m ptogym tune ...`` with this checkout and tests/ on the path."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests")]), "PTOGYM_LENIENT": "0"}
    done = subprocess.run([sys.executable, "-m", "ptogym", "tune", *map(str, argv)], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=timeout)
    assert "Traceback" not in done.stdout + done.stderr, done.stderr[-3000:]
    return done.returncode, done.stdout.strip().splitlines(), done.stderr


def _rows(db: Path, level="level0"):
    connection = sqlite3.connect(db)
    connection.row_factory = sqlite3.Row
    rows = [dict(row) for row in connection.execute("SELECT * FROM trials WHERE level = ? ORDER BY id", (level,))]
    connection.close()
    for row in rows:
        row["config"] = json.loads(row["config"])
    return rows


def _case(spec, level):
    return {case.id: case for case in load_cases(spec.cases_path, spec)}[level]


# ------------------------------------------------------------------ spaces and tables
@pytest.mark.parametrize("op", TUNED_OPS)
def test_tuned_table_values_are_candidates_that_satisfy_the_constraints(op):
    """Every quick level's table configuration is in its space (the sweep's seed)."""
    spec = get_op(op)
    for case in load_cases(spec.cases_path, spec):
        if not case.is_quick:
            continue
        _, _, kernel, tuning = load_level(op, case.id)
        shape = spec.extra["tuning_shape"](case)
        params = table.table_params(kernel, shape)
        assert tuning.violations(params, shape) == [], (op, case.id)
        assert set(tuning.params) <= set(params)


def test_operators_build_with_their_tuned_table_values():
    """The table replaces the constants: what the op builds is the table's default
    (the hand-tuned values) per band, and an override changes it."""
    spec = get_op("inplace_add_rms_norm")
    static = built_static(spec, _case(spec, "level4"))  # 144 rows: the default (the hand-tuned waves)
    assert static["ladder"] == (341, 170, 85, 42, 21, 16, 12, 8, 6, 4, 3, 2, 1) and static["schedule"] == "waves"
    tuned = built_static(spec, _case(spec, "level1"))  # 128 rows: band tokens<=128, tune's winner
    assert (tuned["schedule"], tuned["unroll"]) == ("unroll", (4, 2, 1))
    kernel = load_level("inplace_add_rms_norm", "level4")[2]
    with table.override(kernel, {"ladder": (2, 1), "cores": 24}):
        changed = built_static(spec, _case(spec, "level4"))
    assert (changed["ladder"], changed["cores"]) == ((2, 1), 24)
    assert built_static(spec, _case(spec, "level4")) == static
    linear = get_op("rms_norm_linear")  # a 256 KiB weight reads the default band, an 8 MiB one its own
    assert built_static(linear, _case(linear, "level2"))["unroll"] == (1024, 256, 64, 32, 16, 4, 2, 1)
    assert built_static(linear, _case(linear, "level1"))["unroll"] == (1024, 256, 128, 64, 32, 16, 4, 2, 1)


def test_a_band_entry_that_cannot_be_built_for_a_call_is_left_out_with_a_warning(tmp_path):
    """A winner measured at one width applies to the calls it builds for: 16-row vector
    tiles fit 256-element rows, not 7168-element ones (2 rows at most), which run the
    default and are told why; the width-narrowed band is what ``--apply`` writes to."""
    import types

    from ptogym.ops.per_token_quant import kernel as quant_kernel

    fake = types.ModuleType("tune_table_probe")
    fake.__file__, fake.TUNING = str(tmp_path / "kernel.py"), quant_kernel.TUNING
    (tmp_path / "tuned.json").write_text(json.dumps({"op": "probe", "default": {"unroll": "auto", "tile_rows": None},
                                                     "bands": {"tokens<=16": {"tile_rows": 16}}}))
    narrow = {"rows": 16, "hidden": 256, "dtype": "DT_BF16"}
    assert quant_kernel.TUNING.band(**narrow) == ("tokens<=16", "tokens<=16/tile_rows<=64")
    assert table.table_params(fake, narrow)["tile_rows"] == 16
    with pytest.warns(table.UnbuildableBandWarning, match=r"band tokens<=16 cannot be built for this call "
                      r"\(tile_rows=16 is not one of its candidates\); it runs the default"):
        wide = table.table_params(fake, {"rows": 16, "hidden": 7168, "dtype": "DT_BF16"})
    assert wide["tile_rows"] is None


def test_constraints_name_the_rule():
    _, _, _, tuning = load_level("rms_norm_linear", "level1")
    shape = {"tokens": 16, "k": 4096, "n": 1024, "element_bytes": 2}
    base = {"unroll": (16, 1), "norm_task_rows": "auto", "cube": ((32, 32), (512, 384), (64, 64)), "n_tile": None,
            "k_tile": 256}
    problems = tuning.violations(base, shape)
    assert any("L1 % L0" in problem for problem in problems), problems  # k1 % k0 != 0
    assert any("not one of its candidates" in problem for problem in problems)
    assert token_band(1) == "tokens<=1" and token_band(17) == "tokens<=128" and token_band(10**6) == "tokens>32768"


# ------------------------------------------------------------------ trials in their own process
def test_a_trial_past_its_timeout_or_memory_cap_is_stopped_and_recorded(tmp_path):
    package = make_toy_operator(tmp_path, "tune_toy_limits")
    slow = execute(TrialRequest(str(package), "level0", {}, "tune_fakes:slow_cost", timeout_s=8,
                                sys_path=tuple(sys.path)))
    assert slow["status"] == "timeout" and "8 s" in slow["reason"] and slow["wall_s"] < 20
    capped = execute(TrialRequest(str(package), "level0", {}, "tune_fakes:hog_cost", memory_bytes=300 << 20,
                                  sys_path=tuple(sys.path)))
    assert capped["status"] == "memory" and "cap of 0.29 GB" in capped["reason"] and capped["wall_s"] < 20
    wrong = execute(TrialRequest(str(package), "level0", {"scale": 3.0}, "tune_fakes:toy_cost",
                                 sys_path=tuple(sys.path)))
    assert wrong["status"] == "rejected" and wrong["reason"].startswith("wrong result: y")


# ------------------------------------------------------------------ sweeps
def test_sweep_rejects_the_wrong_result_records_everything_and_apply_changes_the_operator(tmp_path):
    package = make_toy_operator(tmp_path, "tune_toy_local")
    db, report, figure = tmp_path / "tune.sqlite", tmp_path / "tune.json", tmp_path / "tune.png"
    spec = get_op(package)
    before = built_static(spec, _case(spec, "level0"))
    code, lines, stderr = _tune(package, "level0", "--trials", 8, "--workers", 2, "--memory-gb", 1.5,
                                "--measure", "tune_fakes:toy_cost",
                                "--verify-backend", "interp", "--db", db, "--json", report, "--plot", figure, "--apply")
    assert (code, lines[-1]) == (0, "[TUNE_OK]"), stderr[-2000:]
    rows = _rows(db)
    assert len(rows) == 8 and len({row["config_key"] for row in rows}) == 8  # the whole 4 x 2 space, once each
    assert [row["config"] for row in rows if row["origin"] == "table"] == [{"rows_per_tile": 8, "scale": 2.0}]
    by_config = {(row["config"]["rows_per_tile"], row["config"]["scale"]): row for row in rows}
    for tile in (8, 16, 4):  # the cheapest candidates compute 3 x: rejected, with the comparison's words
        assert by_config[tile, 3.0]["status"] == "rejected" and "wrong result: y" in by_config[tile, 3.0]["reason"]
        assert by_config[tile, 3.0]["us"] is None
    assert by_config[32, 2.0]["status"] == "rejected" and "constraint: 32-row tiles" in by_config[32, 2.0]["reason"]
    assert by_config[16, 2.0]["status"] == "ok" and by_config[16, 2.0]["us"] == pytest.approx(100 / 16 + 5)
    assert all(row["compile_s"] is not None and row["peak_rss_bytes"] > 0 for row in rows if row["status"] == "ok")
    assert stderr.count("[tune] level0 ") >= 8  # one progress line per trial
    document = json.loads(report.read_text())
    assert document["levels"][0]["winner"]["config"] == {"rows_per_tile": 16, "scale": 2.0}
    assert document["levels"][0]["table_us"] == pytest.approx(100 / 8 + 5)
    assert document["applied"][0]["band"] == "tokens<=16" and figure.read_bytes()[:4] == b"\x89PNG"
    written = json.loads((package / "tuned.json").read_text())
    assert written["bands"] == {"tokens<=16": {"rows_per_tile": 16, "scale": 2.0}}
    after = built_static(spec, _case(spec, "level0"))
    assert (before["rows_per_tile"], after["rows_per_tile"]) == (8, 16)

    # resumable: the same sweep again finds its 8 trials and runs none
    code, lines, stderr = _tune(package, "level0", "--trials", 8, "--measure", "tune_fakes:toy_cost",
                                "--verify-backend", "interp", "--db", db)
    assert code == 0 and "8 trials in" in stderr and "0 to run" in stderr and len(_rows(db)) == 8


def test_apply_refuses_a_winner_that_slows_another_level_of_its_band(tmp_path):
    """level0 and level1 share one band here; level0's winner (16-row tiles) is measured
    at level1 too (one extra trial), where it is slower than the table: the band keeps
    the table's entry."""
    package = make_toy_operator(tmp_path, "tune_toy_band")
    kernel = package / "kernel.py"
    kernel.write_text(kernel.read_text().replace("band=lambda rows, hidden: (token_band(rows),)",
                                                 "band=lambda rows, hidden: (\"all\",)"))
    db = tmp_path / "tune.sqlite"
    sweep = ("--measure", "tune_fakes:wide_row_cost", "--verify-backend", "interp", "--db", db)
    code, _, stderr = _tune(package, "level0", "--trials", 8, *sweep)
    assert code == 0, stderr[-2000:]
    code, lines, stderr = _tune(package, "level0", "level1", "--trials", 1, "--apply", *sweep)
    assert (code, lines[-1]) == (0, "[TUNE_OK]"), stderr[-2000:]
    [checked] = [row for row in _rows(db, "level1") if row["origin"] == "band"]
    assert checked["config"] == {"rows_per_tile": 16, "scale": 2.0} and checked["us"] == pytest.approx(100 / 16 + 35)
    assert "level0: winner not applied to band all: it slows level1, which shares the band (41.25 us against the table's 17.50 us)" in stderr
    assert json.loads((package / "tuned.json").read_text())["bands"] == {}

    # a sweep of level0 alone with only the swept levels checked knows of no other level
    # in the band, and applies
    code, lines, stderr = _tune(package, "level0", "--trials", 8, "--apply", "--band-check", "swept", *sweep)
    assert code == 0 and json.loads((package / "tuned.json").read_text())["bands"] == {
        "all": {"rows_per_tile": 16, "scale": 2.0}}


def test_apply_measures_the_other_case_levels_of_the_band_it_did_not_sweep(tmp_path):
    """A sweep of level0 alone: level1 (another CI level, 128 wide) reads the same band;
    --apply measures the table's configuration and the winner there first (origin
    ``band``), finds the winner slower, and leaves the band as it is."""
    package = make_toy_operator(tmp_path, "tune_toy_mates")
    kernel = package / "kernel.py"
    kernel.write_text(kernel.read_text().replace("band=lambda rows, hidden: (token_band(rows),)",
                                                 "band=lambda rows, hidden: (\"all\",)"))
    db = tmp_path / "tune.sqlite"
    code, lines, stderr = _tune(package, "level0", "--trials", 8, "--apply", "--measure", "tune_fakes:wide_row_cost",
                                "--verify-backend", "interp", "--db", db, "--json", tmp_path / "sweep.json")
    assert (code, lines[-1]) == (0, "[TUNE_OK]"), stderr[-2000:]
    mate_rows = {json.dumps(row["config"], sort_keys=True): row for row in _rows(db, "level1")}
    assert {row["origin"] for row in mate_rows.values()} == {"band"}
    assert mate_rows['{"rows_per_tile": 8, "scale": 2.0}']["us"] == pytest.approx(100 / 8 + 5)  # the table's
    assert mate_rows['{"rows_per_tile": 16, "scale": 2.0}']["us"] == pytest.approx(100 / 16 + 35)
    assert "level0: winner not applied to band all: it slows level1, which shares the band" in stderr
    assert json.loads((package / "tuned.json").read_text())["bands"] == {}
    [level] = json.loads((tmp_path / "sweep.json").read_text())["levels"]
    assert [mate["level"] for mate in level["band_mates"]] == ["level1"]


def test_a_level_the_measure_refuses_stops_after_one_trial_and_does_not_fail_the_sweep(tmp_path):
    package = make_toy_operator(tmp_path, "tune_toy_refused")
    db = tmp_path / "tune.sqlite"
    code, lines, stderr = _tune(package, "--trials", 8, "--measure", "tune_fakes:refusing_cost",
                                "--verify-backend", "interp", "--db", db)
    assert (code, lines[-1]) == (0, "[TUNE_OK]"), stderr[-2000:]
    [refused] = _rows(db, "level1")
    assert refused["status"] == "failed" and refused["reason"].startswith("NotImplementedError: toy: 128-wide")
    assert "level1 (tokens<=128): 1 trials, 0 ok, 0 rejected, 1 failed/timeout/memory; not measurable this way: " \
           "NotImplementedError: toy: 128-wide rows" in stderr
    # asked for alone, that level is an error: nothing could be tuned
    code, lines, _ = _tune(package, "level1", "--trials", 8, "--measure", "tune_fakes:refusing_cost",
                           "--verify-backend", "interp", "--db", db)
    assert (code, lines[-1]) == (2, "[TUNE_ERROR]")


@pytest.mark.slow  # a local Ray runtime takes ~20 s to start: CI runs it with the slow tests
def test_ray_engine_runs_the_same_sweep(tmp_path):
    pytest.importorskip("ray")
    package = make_toy_operator(tmp_path, "tune_toy_ray")
    db = tmp_path / "tune.sqlite"
    code, lines, stderr = _tune(package, "level0", "--trials", 8, "--workers", 2, "--engine", "ray", "--memory-gb",
                                1, "--measure", "tune_fakes:toy_cost", "--verify-backend", "interp", "--db", db)
    assert (code, lines[-1]) == (0, "[TUNE_OK]"), stderr[-2000:]
    rows = _rows(db)
    assert {row["engine"] for row in rows} == {"ray"} and len(rows) == 8
    winner = min((row for row in rows if row["status"] == "ok"), key=lambda row: row["us"])
    assert winner["config"] == {"rows_per_tile": 16, "scale": 2.0}
    assert sum(row["status"] == "rejected" and "wrong result" in row["reason"] for row in rows) == 3


def test_an_interrupted_sweep_stops_its_trials_at_once(tmp_path):
    """Ctrl-C while trials hang: [INTERRUPTED] 130 long before their timeout, no trial process left."""
    package = make_toy_operator(tmp_path, "tune_toy_interrupt")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests")])}
    process = subprocess.Popen([sys.executable, "-m", "ptogym", "tune", str(package), "level0", "--workers", "2",
                                "--memory-gb", "1.5", "--measure", "tune_fakes:slow_cost", "--timeout", "300", "--db",
                                str(tmp_path / "x.sqlite")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=env, cwd=REPO,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # as in a terminal
    try:
        assert "to run on local x2" in process.stderr.readline()
        deadline = time.monotonic() + 90
        while len(_descendants(process.pid)) < 3 and time.monotonic() < deadline:  # the fork server, two trials
            time.sleep(0.2)
        time.sleep(2)
        children = _descendants(process.pid)
        assert len(children) >= 3, "the trial processes did not start"
        process.send_signal(signal.SIGINT)
    except BaseException:
        process.kill()
        raise
    start = time.monotonic()
    out, err = process.communicate(timeout=60)
    assert time.monotonic() - start < 40 and process.returncode == 130, err[-2000:]  # not at the 300 s timeout
    assert out.splitlines()[-1] == "[INTERRUPTED]" and "Traceback" not in err
    time.sleep(1)
    assert not [pid for pid in children if Path(f"/proc/{pid}").exists()
                and "zombie" not in Path(f"/proc/{pid}/status").read_text()]


def _descendants(root: int) -> list:
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
    found, frontier = [], [root]
    while frontier:
        pid = frontier.pop()
        children = [child for child, parent in parents.items() if parent == pid]
        found += children
        frontier += children
    return found


def test_tune_refuses_bad_arguments_with_its_error_verdict(tmp_path, capsys):
    untuned = scaffold("untuned_op", None, tmp_path)  # a fresh package: its kernel has no TUNING
    for argv, words in (((untuned,), "declares no TUNING"), (("rms_norm_linear", "--workers", 64), "--workers: 64 >"),
                        (("rms_norm_linear", "--address", "x:1"), "--address: only with --engine ray"),
                        (("rms_norm_linear", "--measure", "nowhere"), "--measure"),
                        (("rms_norm_linear", "level99"), "unknown level"),
                        (("rms_norm_linear", "--trials", 0), "--trials: must be >= 1")):
        code = main(["tune", *map(str, argv), "--db", str(tmp_path / "x.sqlite")])
        out, err = capsys.readouterr()
        assert (code, out.splitlines()[-1]) == (2, "[TUNE_ERROR]") and words in err, (argv, err)
        assert "Traceback" not in err
    assert not (tmp_path / "x.sqlite").exists()  # refused before anything was written


def test_seed_and_repeats_use_the_config_key():
    assert config_key({"b": 1, "a": [1, 2]}) == config_key({"a": [1, 2], "b": 1})


@pytest.mark.slow
@pytest.mark.pypto
def test_real_pypto_sweep_measures_and_checks_the_winner_on_pypto(tmp_path):
    """Three pypto-sim trials of rms_norm_linear level1; the winner passes on pypto's interpreter."""
    db = tmp_path / "tune.sqlite"
    code, lines, stderr = _tune("rms_norm_linear", "level1", "--trials", 3, "--db", db, "--memory-gb", 4,
                                "--timeout", 300, timeout=900)
    assert (code, lines[-1]) == (0, "[TUNE_OK]"), stderr[-3000:]
    rows = _rows(db, "level1")
    assert rows[0]["origin"] == "table" and rows[0]["status"] == "ok" and 10 < rows[0]["us"] < 40
    assert all(row["measure"] == "pypto-sim" and row["kernel_us"] >= row["us"] for row in rows if row["status"] == "ok")
    assert "on pypto-sim: PASS" in stderr


def test_a_winner_check_stopped_by_the_memory_cap_or_timeout_is_run_again():
    from ptogym.tune.sweep import earlier_check

    checks = [{"config_key": "a", "backend": "pypto-sim", "verdict": "FAIL"},
              {"config_key": "a", "backend": "pypto-sim", "verdict": "MEMORY"},
              {"config_key": "b", "backend": "pypto-sim", "verdict": "TIMEOUT"},
              {"config_key": "b", "backend": "interp", "verdict": "PASS"}]
    assert earlier_check(checks, "a", "pypto-sim")["verdict"] == "FAIL"  # settled: kept
    assert earlier_check(checks, "b", "pypto-sim") is None  # only a timeout: run it again
    assert earlier_check(checks, "b", "interp")["verdict"] == "PASS"
