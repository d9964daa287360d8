"""Shared pytest options and fixtures.

``--backend NAME``  backend the operator cases run on (default: $PTOGYM_BACKEND or interp)
``--quick``         keep only the operator cases tagged "quick"
"""
from __future__ import annotations

import os

import pytest

from ptogym.backends._pypto_runtime import cache_root

# Tests that call real pypto directly (live probes, result-dtype and signature checks)
# would leave pypto's output_* run directories in the working tree: keep them in the cache.
os.environ.setdefault("TILE_FWK_OUTPUT_DIR", str(cache_root() / "pypto-test-output"))

# lint fixtures are sample kernels and tests for `ptogym lint`, not tests of ours
collect_ignore = ["fixtures"]


def pytest_addoption(parser):
    parser.addoption("--backend", default=os.environ.get("PTOGYM_BACKEND") or "interp",
                     help="ptogym backend for the operator cases (default: $PTOGYM_BACKEND or interp)")
    parser.addoption("--quick", action="store_true", help="run only the operator cases tagged 'quick'")


@pytest.fixture(scope="session")
def ptogym_backend(request):
    """The backend chosen with --backend; fails (never skips) when it cannot run here."""
    from ptogym.verify.runner import open_backend

    name = request.config.getoption("--backend")
    try:
        return open_backend(name)
    except Exception as error:  # unknown name, missing module or unavailable device
        pytest.fail(f"backend {name!r} cannot run here: {type(error).__name__}: {error}", pytrace=False)


@pytest.fixture
def ptogym_cli():
    """Call the ``ptogym`` command line in-process: ``ptogym_cli([...]) -> exit code``."""
    from ptogym.cli import main

    return main


@pytest.fixture
def interp_builds(monkeypatch):
    """The interpreter backend, recording the static build parameters of every launch:
    ``backend, statics = interp_builds``."""
    from ptogym.backends import get_backend

    interp = get_backend("interp")
    statics = []
    real_launch = interp.launch

    def launch(build, static, *rest):
        statics.append(static)
        return real_launch(build, static, *rest)

    monkeypatch.setattr(interp, "launch", launch)
    return interp, statics
