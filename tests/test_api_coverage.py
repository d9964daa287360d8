"""Every public name of pypto 0.2.0 that kernel code can reach exists in
``ptogym.interp``: implemented, or a stub raising NotImplementedError that names it
and says why.  The name list comes from the installed pypto (skipped without it);
``docs/api-coverage.md`` is generated from the same table and must be current.
"""
import importlib.util
import sys
from pathlib import Path

import pytest

import ptogym.interp as interp

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
import gen_api_coverage as coverage  # noqa: E402

_skip_without_pypto = pytest.mark.skipif(importlib.util.find_spec("pypto") is None,
                                         reason="the real pypto package is not installed")


def needs_pypto(test):
    return pytest.mark.pypto(_skip_without_pypto(test))


@pytest.fixture(scope="module")
def table():
    from ptogym.backends import _pypto_runtime as rt

    rt.import_pypto()  # import it the quiet way, with its output dirs redirected
    return coverage.rows()


@needs_pypto
def test_every_public_name_is_implemented_or_a_documented_stub(table):
    missing = [f"{r.module}.{r.name}" for r in table if r.status == "MISSING"]
    assert not missing, f"pypto names absent from ptogym.interp: {missing}"
    assert len(table) > 250  # the enumeration found the API (not an empty module)


@needs_pypto
def test_op_families_are_all_reachable_from_the_top_level(table):
    top = {r.name for r in table if r.module == "pypto"}
    for family, names in coverage.op_family_names().items():
        assert set(names) <= top | {"pypto_impl"}, (family, sorted(set(names) - top))


@needs_pypto
def test_api_coverage_doc_is_current(table):
    assert (REPO / "docs" / "api-coverage.md").read_text() == coverage.render(table), \
        "run python3 scripts/gen_api_coverage.py"


@needs_pypto
def test_enum_members_have_pypto_values():
    import pypto

    def values(enum_type):
        return {k: int(getattr(v, "value", v)) for k, v in enum_type.__members__.items()}

    for name in ("TileOpFormat", "ReduceMode", "OpType", "OutType", "ReLuType", "TransMode", "ScatterMode",
                 "AtomicType", "CastMode", "SaturationMode", "CachePolicy"):
        theirs, ours = values(getattr(pypto, name)), values(getattr(interp, name))
        assert ours == theirs, name


def _stubs():
    modules = [interp, interp.experimental, interp.distributed, interp.pypto_impl]
    return sorted({(m.__name__, n) for m in modules for n in dir(m)
                   if hasattr(getattr(m, n), "__not_emulatable__")})


@pytest.mark.parametrize("module,name", _stubs())
def test_stub_raises_naming_the_op_and_the_reason(module, name):
    stub = getattr(sys.modules[module], name)
    with pytest.raises(NotImplementedError) as caught:
        stub()
    message = str(caught.value)
    assert name in message and stub.__not_emulatable__ in message and "not emulated" in message


def test_published_kernel_imports_resolve():
    """The module paths published kernels import from, bound to the interpreter."""
    assert interp.operation.op_wrapper is interp.op_wrapper
    assert interp.pypto_impl.Element is interp.Element
    assert interp.enum.TileOpFormat.TILEOP_NZ == 1 and interp.enum.DT_FP32 is interp.DT_FP32
    for name in ("assemble", "view", "reshape", "clone", "unsqueeze", "max", "min"):
        assert callable(getattr(interp.operation, name))


def test_the_api_reference_page_is_current_and_gives_signatures():
    """docs/api-reference.md, generated from the interpreter's own signatures and
    docstrings (no real pypto needed), matches the code and documents the names a
    newcomer looks for."""
    import gen_api_reference as reference

    text = reference.render(reference.reference_names())
    assert reference.DOC.read_text(encoding="utf-8") == text, "run python3 scripts/gen_api_reference.py"
    assert "matmul(input: 'Tensor', mat2: 'Tensor', out_dtype: 'DataType', *, a_trans=False" in text
    assert "set_cube_tile_shapes(m, k, n, enable_split_k: 'bool' = False)" in text
    assert interp.matmul.__doc__.splitlines()[0] in text
    assert " at 0x" not in text  # no object addresses: the page is the same on every run
