"""Atomic, honest writes and operator packages outside ptogym/ops.

* A full disk midway through a report, log or scaffold leaves the previous file (or
  no package) as it was, says "nothing written" only when that is true, and ends
  with the tool's own verdict family.
* ``ptogym run DIR``, ``stage DIR``, ``bisect DIR`` take an operator package
  anywhere; ``ptogym new`` writes into the user's project, never into the installed
  packages, and refuses names that would shadow a module.
"""
from __future__ import annotations

import errno
import json
import os
import sysconfig
from pathlib import Path

import pytest

from ptogym import _io
from ptogym.cli import main
from ptogym.workflow import scaffold as scaffold_module
from ptogym.workflow.scaffold import default_directory, scaffold

REPO = Path(__file__).resolve().parents[1]


def cli(capsys, *argv) -> tuple[int, list[str], str]:
    exit_code = main([str(arg) for arg in argv])
    captured = capsys.readouterr()
    return exit_code, captured.out.rstrip("\n").splitlines(), captured.err


def _disk_full(*_args, **_kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.fixture
def full_disk(monkeypatch):
    """Every atomic write fails after its data went to the temporary file (fsync: ENOSPC)."""
    monkeypatch.setattr(_io.os, "fsync", _disk_full)


def _leftovers(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.iterdir() if path.name.startswith("."))


# ------------------------------------------------------------------ the helper
def test_an_atomic_write_that_fails_leaves_the_previous_file_and_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / "report.json"
    target.write_text("previous\n")
    target.chmod(0o640)
    monkeypatch.setattr(_io.os, "fsync", _disk_full)
    with pytest.raises(OSError):
        _io.write_text(target, "half a report")
    assert target.read_text() == "previous\n" and _leftovers(tmp_path) == []
    monkeypatch.undo()
    _io.write_text(target, "new\n")
    assert target.read_text() == "new\n" and target.stat().st_mode & 0o777 == 0o640  # permissions kept


def test_a_set_of_files_is_replaced_together_or_not_at_all(tmp_path, monkeypatch):
    first, second = tmp_path / "a.md", tmp_path / "a.json"
    first.write_text("old md")
    second.write_text("old json")
    calls = []

    def fsync_fails_on_the_second(descriptor):
        calls.append(descriptor)
        if len(calls) == 2:
            _disk_full()

    monkeypatch.setattr(_io.os, "fsync", fsync_fails_on_the_second)
    with pytest.raises(OSError):
        _io.write_files({first: "new md", second: "new json"})
    assert (first.read_text(), second.read_text()) == ("old md", "old json") and _leftovers(tmp_path) == []


# ------------------------------------------------------------------ each tool on a full disk
def test_run_json_on_a_full_disk_keeps_the_previous_results_and_says_run_error(tmp_path, capsys, full_disk):
    results = tmp_path / "results.json"
    results.write_text('{"previous": true}\n')
    code, lines, err = cli(capsys, "run", "rms_norm", "level0", "--json", results)
    assert code == 2 and lines[-1] == "[RUN_ERROR]"
    assert "No space left on device" in err and "nothing written" in err
    assert json.loads(results.read_text()) == {"previous": True} and _leftovers(tmp_path) == []


def test_lint_json_on_a_full_disk_says_lint_error_and_keeps_the_previous_file(tmp_path, capsys, full_disk):
    findings = tmp_path / "lint.json"
    findings.write_text("[]\n")
    code, lines, _ = cli(capsys, "lint", REPO / "ptogym/ops/rms_norm/kernel.py", "--json", findings)
    assert code == 2 and lines[-1].startswith("[LINT_ERROR]") and "No space left on device" in "\n".join(lines)
    assert findings.read_text() == "[]\n" and _leftovers(tmp_path) == []


def test_new_on_a_full_disk_writes_nothing_and_a_retry_succeeds(tmp_path, capsys, monkeypatch):
    written = []
    real_write_text = Path.write_text

    def fails_on_the_fourth_file(self, *args, **kwargs):
        written.append(self.name)
        if len(written) == 4:
            _disk_full()
        return real_write_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", fails_on_the_fourth_file)
    code, lines, _ = cli(capsys, "new", "wr_half", "--modules", "2", "--dir", tmp_path)
    assert code == 2 and lines[-1] == "[NEW_ERROR] wr_half: nothing written" and "No space left" in lines[0]
    assert list(tmp_path.iterdir()) == []  # neither half a package nor its temporary directory
    monkeypatch.undo()
    code, lines, _ = cli(capsys, "new", "wr_half", "--modules", "2", "--dir", tmp_path)
    assert code == 0 and lines[-1].startswith("[NEW_OK]") and (tmp_path / "wr_half" / "op.py").is_file()
    assert (tmp_path / "wr_half").stat().st_mode & 0o777 == 0o777 & ~_umask()


def _umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask


def test_stage_log_on_a_full_disk_keeps_the_previous_log_and_says_stage_error(tmp_path, capsys, monkeypatch):
    package = scaffold("wr_stage_log", 1, tmp_path)
    log_dir = tmp_path / "logs"
    assert cli(capsys, "stage", package, "--log-dir", log_dir)[0] == 0
    before = {path.name: path.read_text() for path in log_dir.iterdir()}
    monkeypatch.setattr(_io.os, "fsync", _disk_full)
    code, lines, _ = cli(capsys, "stage", package, "--log-dir", log_dir)
    assert code == 2 and lines[-1].startswith("[STAGE_ERROR] wr_stage_log: log not written")
    assert "[STAGE_PASS]" in lines[-1]  # what was verified is still said
    assert {path.name: path.read_text() for path in log_dir.iterdir()} == before


# ------------------------------------------------------------------ packages outside ptogym/ops
def test_run_stage_and_bisect_take_a_package_directory(tmp_path, capsys):
    (tmp_path / "examples").mkdir()
    package = scaffold("wr_outside", 2, tmp_path / "examples")
    for argv, verdict in ((["run", package, "--quick"], "[PRECISION_PASS]"),
                          (["run", package, "--list"], "[OK]"),
                          (["stage", package], "[STAGE_PASS]"),
                          (["bisect", package], "[BISECT_CLEAN]")):
        code, lines, err = cli(capsys, *argv)
        assert code == 0 and lines[-1].startswith(verdict), (argv, lines[-3:], err)


def test_a_directory_that_is_no_operator_package_is_named_with_the_rule(tmp_path, capsys):
    code, lines, _ = cli(capsys, "run", tmp_path)
    assert code == 2 and lines[-1] == "[RUN_ERROR]" and "it has no __init__.py or op.py" in "\n".join(lines)
    code, lines, _ = cli(capsys, "stage", tmp_path / "missing")
    assert code == 2 and "no such directory" in lines[0] and lines[-1].startswith("[STAGE_ERROR]")


def test_a_registered_operator_given_by_its_directory_is_the_registered_package(capsys):
    code, lines, _ = cli(capsys, "run", REPO / "ptogym/ops/rms_norm", "level0")
    assert code == 0 and lines[-1] == "[PRECISION_PASS]"


@pytest.mark.parametrize("name, why", [
    ("inplace", "ptogym/ops/inplace exists"),  # ptogym/ops/inplace.py: every in-place operator imports it
    ("rms_norm", "registered operator"),
    ("json", "standard library"),
    ("sum", "built-in"),
    ("torch", "the package's own files define"),
    ("launch", "the package's own files define"),  # op.py's launch(): the operator function would recurse
    ("kernel", "the package's own files define"),
    ("describe", "part of the operator registry"),  # ptogym.ops.describe
    ("hypothesis", "an installed module"),
])
def test_new_refuses_names_that_shadow_a_module(name, why, tmp_path, capsys):
    code, lines, _ = cli(capsys, "new", name, "--dir", tmp_path)
    assert code == 2 and why in lines[0] and lines[-1] == f"[NEW_ERROR] {name}: nothing written"
    assert list(tmp_path.iterdir()) == []


def test_new_writes_into_the_project_it_runs_in_never_into_site_packages(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # not a ptogym checkout: the package goes here
    code, lines, _ = cli(capsys, "new", "wr_here")
    assert code == 0 and (tmp_path / "wr_here" / "op.py").is_file()
    assert lines[-1] == f"[NEW_OK] {tmp_path / 'wr_here'}: 8 files; next: ptogym run {tmp_path / 'wr_here'} --quick"
    checkout = tmp_path / "checkout"
    (checkout / "ptogym" / "ops").mkdir(parents=True)
    (checkout / "ptogym" / "ops" / "__init__.py").touch()
    (checkout / "pyproject.toml").touch()
    assert default_directory(checkout / "ptogym") == checkout / "ptogym" / "ops"
    site_packages = tmp_path / "venv" / "site-packages"  # a stand-in: the real one is never written to
    (site_packages / "ptogym" / "ops").mkdir(parents=True)
    monkeypatch.setattr(scaffold_module, "installed_roots", lambda: {str(site_packages)})
    monkeypatch.chdir(site_packages)
    code, lines, _ = cli(capsys, "new", "wr_never")
    assert code == 2 and "lies in the installed packages" in lines[0]
    monkeypatch.chdir(tmp_path)
    code, lines, _ = cli(capsys, "new", "wr_never", "--dir", site_packages / "ptogym" / "ops")
    assert code == 2 and "lies in the installed packages" in lines[0]
    assert not list(site_packages.rglob("wr_never"))


def test_the_installed_roots_hold_this_interpreters_site_packages():
    assert sysconfig.get_paths()["purelib"] in scaffold_module.installed_roots()


def test_the_shadow_check_knows_the_scaffold_templates_names():
    names = scaffold_module._template_names()
    assert {"launch", "kernel", "golden", "op", "build", "torch", "rule_violations"} <= names


def test_a_report_behind_a_symlink_is_replaced_where_the_link_points(tmp_path):
    real = tmp_path / "reports" / "results.json"
    real.parent.mkdir()
    real.write_text("old")
    link = tmp_path / "latest.json"
    link.symlink_to(real)
    _io.write_text(link, "new")
    assert link.is_symlink() and real.read_text() == "new"
