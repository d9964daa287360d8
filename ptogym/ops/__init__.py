"""The operator registry: one sub-package per operator, one ``OpSpec`` each.

An operator package ``ptogym/ops/<name>/`` holds ``kernel.py`` (PyPTO source, a
builder taking the ``pypto`` namespace), ``golden.py`` (plain torch, fp32),
``op.py`` (public API, torch.library registration and the ``SPEC``), ``cases.json``
and ``README.md``; its ``__init__.py`` docstring's first line is what ``ptogym list``
shows.  The verification runner, pytest collection and the benchmark all go through
``get_op``.

Nothing here imports torch: an operator's ``op.py`` (and with it its torch.library
registration) loads on first use - ``get_op(name)``, or ``ptogym.ops.<name>``,
which is always the operator's public function ``op.<name>``.
"""
from __future__ import annotations

import dataclasses
import hashlib
import importlib
import importlib.util
import os
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

OPS_DIR = Path(__file__).parent
# every sub-package with an op.py is an operator, so `ptogym new` needs no registration edit
OP_NAMES = tuple(sorted(path.parent.name for path in OPS_DIR.glob("*/op.py")))


@dataclass(frozen=True)
class OpSpec:
    """Everything the runner, tests and benches need to know about one operator.

    make_inputs(case, generator, device) -> dict[str, Tensor]   deterministic from the case seed
    golden(inputs, attrs) -> dict[str, Tensor]          independent torch reference (gets copies)
    run(inputs, attrs, backend) -> (dict[str, Tensor], LaunchReport)   the kernel via a backend
    check_case(case) -> list[str]                       violated shape/dtype rules
    hbm_bytes(case) -> int                              bytes the kernel must move
    attr_names                                          the case attributes it takes (None: not declared,
                                                        which tests/test_reliability.py refuses)
    writes                                              inputs it overwrites in place; they are checked
                                                        with ``ptogym.ops.inplace.check_inplace_arguments``
    output_names                                        the keys of the dicts golden and run return (None: not
                                                        declared); cases.json tolerances are keyed by them
    """

    name: str
    description: str
    make_inputs: Callable[..., dict]
    golden: Callable[..., dict]
    run: Callable[..., dict]
    check_case: Callable[..., list]
    hbm_bytes: Callable[..., int]
    input_names: tuple = ()
    attr_names: tuple | None = None
    writes: tuple = ()
    output_names: tuple | None = None
    required_levels: tuple = ()
    extra: Mapping[str, Any] = field(default_factory=dict)
    cases_file: Path | None = None  # default: ptogym/ops/<name>/cases.json

    @property
    def cases_path(self) -> Path:
        return self.cases_file or OPS_DIR / self.name / "cases.json"


def _op_module(name: str):
    if name not in OP_NAMES:
        raise KeyError(f"unknown operator {name!r}; known: {', '.join(OP_NAMES)}")
    return importlib.import_module(f"{__name__}.{name}.op")


@dataclass(frozen=True)
class OpLocation:
    """Where an operator package lives and the name it is imported under."""

    name: str
    directory: Path
    package: str


def locate(op: str | Path) -> OpLocation:
    """The operator package *op* names: a registered operator (``ptogym list``), or
    the directory of an operator package anywhere (``__init__.py`` and ``op.py``; a
    scaffold under ``examples/`` or a scratch directory).  Every tool that takes an
    OP (run, stage, bisect, bench) resolves it here.  A name with a path separator is
    always a directory.  Raises KeyError naming what was looked for."""
    text = str(op)
    path = Path(text)
    looks_like_path = isinstance(op, Path) or os.sep in text or "/" in text or text in (".", "..")
    if not looks_like_path and text in OP_NAMES:
        return OpLocation(text, OPS_DIR / text, f"{__name__}.{text}")
    if looks_like_path or path.is_dir():
        return _locate_directory(path)
    raise KeyError(f"unknown operator {text!r}; known: {', '.join(OP_NAMES)} "
                   "(or give the directory of an operator package, e.g. examples/add_rms_norm_scale)")


def _locate_directory(path: Path) -> OpLocation:
    missing = [name for name in ("__init__.py", "op.py") if not (path / name).is_file()]
    if not path.is_dir() or missing:
        why = "no such directory" if not path.is_dir() else f"it has no {' or '.join(missing)}"
        raise KeyError(f"operator package {str(path)!r}: {why} (an operator package holds __init__.py and op.py)")
    directory = path.resolve()
    if directory.parent == OPS_DIR.resolve() and directory.name in OP_NAMES:  # imported once, under its own name
        return OpLocation(directory.name, OPS_DIR / directory.name, f"{__name__}.{directory.name}")
    digest = hashlib.sha1(str(directory).encode()).hexdigest()[:10]
    package = f"_ptogym_op_{directory.name}_{digest}"
    if package not in sys.modules:
        module_spec = importlib.util.spec_from_file_location(package, directory / "__init__.py",
                                                             submodule_search_locations=[str(directory)])
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[package] = module
        try:
            module_spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[package]
            raise
    return OpLocation(directory.name, path, package)  # the path as given: what the tools print


def get_op(op: str | Path) -> OpSpec:
    """The OpSpec of a registered operator or of the operator package in a directory (``locate``)."""
    location = locate(op)
    spec = importlib.import_module(f"{location.package}.op").SPEC
    if spec.cases_file is None and location.package != f"{__name__}.{location.name}":
        spec = dataclasses.replace(spec, cases_file=location.directory / "cases.json")  # outside ptogym/ops
    return spec


def all_ops() -> list[OpSpec]:
    return [get_op(n) for n in OP_NAMES]


def describe(name: str) -> str:
    """One line about operator *name*, without importing torch when its package has a docstring."""
    if name not in OP_NAMES:
        raise KeyError(f"unknown operator {name!r}; known: {', '.join(OP_NAMES)}")
    package = f"{__name__}.{name}"
    doc = importlib.import_module(package).__doc__ if importlib.util.find_spec(package) else None
    return doc.strip().splitlines()[0] if doc and doc.strip() else get_op(name).description


class _Registry(types.ModuleType):
    """``ptogym.ops.<name>`` is the operator's function, loaded on first use.  Importing
    ``ptogym.ops.<name>.op`` would bind the attribute to the sub-package: that binding
    is dropped, and the function is stored once resolved (torch.compile reads module
    dictionaries directly)."""

    def __getattribute__(self, attribute: str):
        if attribute in OP_NAMES:
            function = getattr(_op_module(attribute), attribute)
            self.__dict__[attribute] = function
            return function
        return super().__getattribute__(attribute)

    def __setattr__(self, attribute: str, value) -> None:
        if attribute in OP_NAMES and isinstance(value, types.ModuleType):
            return  # the import system binding the operator's package
        super().__setattr__(attribute, value)


sys.modules[__name__].__class__ = _Registry
