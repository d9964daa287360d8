"""Shared pytest options and fixtures.

``--backend NAME``  backend the operator cases run on (default: $PTOGYM_BACKEND or interp)
``--quick``         keep only the operator cases tagged "quick"
"""
from __future__ import annotations

import argparse
import os

import pytest


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
    """Call ``ptogym compare/run/list`` in-process: ``ptogym_cli([...]) -> exit code``.

    Built from the verify sub-commands only, so these tests do not depend on the
    other tools' modules.
    """
    from ptogym.verify import compare, runner

    parser = argparse.ArgumentParser(prog="ptogym")
    subparsers = parser.add_subparsers(dest="command", required=True)
    compare.add_cli(subparsers)
    runner.add_cli(subparsers)

    def call(argv: list[str]) -> int:
        args = parser.parse_args(argv)
        return args.func(args)

    return call
