"""Record the signatures of real pypto 0.2.0's frontend into
``tests/fixtures/frontend_signatures_pypto.json`` (``tests/test_frontend_parity.py``
holds ``ptogym.interp`` to them).

    flock /tmp/ptogym-pypto.lock python3 scripts/record_frontend_signatures.py

Per callable: its parameters (name, kind, default) from ``inspect.signature``, and for
the ones that take ``**kwargs`` the keyword names their source reads
(``kwargs.get("...")`` / ``kwargs.pop("...")``, found in the AST).
"""
import ast
import inspect
import json
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "frontend_signatures_pypto.json"

#: the callables compared, as ``pypto.<path>``
NAMES = ("frontend.jit", "frontend.function", "frontend.dynamic", "cond", "loop", "loop_unroll", "is_loop_begin",
         "is_loop_end")


def resolve(namespace, path: str):
    value = namespace
    for part in path.split("."):
        value = getattr(value, part)
    return value


def describe(func) -> dict:
    """Parameters as ``[name, kind, repr(default) or None]`` and the keywords read from ``**kwargs``."""
    params = [[p.name, p.kind.name, None if p.default is inspect.Parameter.empty else repr(p.default)]
              for p in inspect.signature(func).parameters.values()]
    entry = {"parameters": params}
    var_keyword = [p.name for p in inspect.signature(func).parameters.values() if p.kind is p.VAR_KEYWORD]
    if var_keyword:
        tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
        entry["keywords_read"] = sorted({
            node.args[0].value for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name) and node.func.value.id == var_keyword[0]
            and node.func.attr in ("get", "pop") and node.args and isinstance(node.args[0], ast.Constant)})
    return entry


def derive() -> dict:
    import pypto
    return {name: describe(resolve(pypto, name)) for name in NAMES}


def main() -> int:
    FIXTURE.write_text(json.dumps(derive(), indent=1) + "\n")
    print(f"wrote {FIXTURE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--print"]:
        print(json.dumps(derive()))
        sys.exit(0)
    sys.exit(main())
