"""Record the public attribute names of the installed real pypto package.

    python3 scripts/gen_pypto_names.py            # rewrites ptogym/lint/pypto_names.json

Lint rule OL55 ("no pypto.<name> that pypto does not have") reads the live package
when it is installed and this recorded list otherwise, so the rule works (and CI
stays deterministic) on machines without pypto.  One level of sub-namespaces is
recorded too (pypto.frontend.jit, pypto.experimental.set_operation_options, ...).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

OUTPUT = Path(__file__).resolve().parents[1] / "ptogym" / "lint" / "pypto_names.json"


def main() -> int:
    sys.path.insert(0, str(OUTPUT.parents[2]))
    from ptogym.lint.pypto_names import live_names

    names = live_names()
    if names is None:
        print("error: the real pypto package is not importable here")
        return 2
    OUTPUT.write_text(json.dumps(names, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {OUTPUT}: pypto {names['version']}, {len(names['top'])} top-level names, "
          f"{len(names['sub'])} sub-namespaces")
    return 0


if __name__ == "__main__":
    sys.exit(main())
