"""Run a fixture as a script: ``ptogym interp --sanitize NAME.py [free]`` (racy by default)."""
import sys


def main(module) -> None:
    import pypto

    getattr(module, sys.argv[1] if len(sys.argv) > 1 else "racy")(pypto)
