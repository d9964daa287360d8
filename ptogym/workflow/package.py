"""An operator package on disk, by registry name or by path, and what the workflow
tools need from it: its OpSpec, a case, the golden's boundary tensors and the
cumulative staged files ``<op>_module1_impl.py``, ``<op>_module12_impl.py`` ...

Packages outside ``ptogym/ops`` (a scaffold in a scratch directory, the worked
example under ``examples/``) are imported from their path under a private module
name, so the same tools serve both.
"""
from __future__ import annotations

import hashlib
import importlib
import re
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import torch

from ptogym import ops
from ptogym.verify.cases import Case, load_cases
from ptogym.verify.runner import make_case_inputs, select_cases

from .probe import recording_probes

_STAGED = re.compile(r"^(?P<op>.+)_module(?P<suffix>\d+)_impl\.py$")


class WorkflowError(Exception):
    """The tool cannot start or go on (unknown operator, broken chain, ...): exit code 2."""


@contextmanager
def setting_up():
    """Any failure while a tool sets up (operator, case, backend, golden) becomes a
    WorkflowError naming it: the tools' exit code 2, never a traceback."""
    try:
        yield
    except WorkflowError:
        raise
    except Exception as error:  # the user's package, case file or environment
        raise WorkflowError(f"{type(error).__name__}: {error}") from error


@dataclass(frozen=True)
class StagedFile:
    module: int  # k: the last module this cumulative file implements
    path: Path

    @property
    def wrapper_name(self) -> str:
        match = _STAGED.match(self.path.name)
        return f"{match['op']}_module{match['suffix']}_wrapper"


@dataclass
class OpPackage:
    name: str
    directory: Path
    python_package: str  # importable name of the package

    @property
    def spec(self):
        return ops.get_op(self.directory)

    def import_file(self, path: Path) -> ModuleType:
        """A file of the package as a sub-module (relative imports work)."""
        return importlib.import_module(f"{self.python_package}.{path.stem}")

    def staged_wrapper(self, staged: StagedFile):
        """``<op>_module<k>_wrapper(inputs, attrs, backend)`` of a staged file (WorkflowError if absent)."""
        try:
            module = self.import_file(staged.path)
        except Exception as error:  # any error in the user's file: report it, do not crash
            raise WorkflowError(f"{staged.path.name}: import failed: {type(error).__name__}: {error}") from error
        wrapper = getattr(module, staged.wrapper_name, None)
        if wrapper is None:
            raise WorkflowError(f"{staged.path.name} defines no {staged.wrapper_name}(inputs, attrs, backend) "
                                "(lint OL08)")
        return wrapper

    def staged_files(self) -> list[StagedFile]:
        """The cumulative module files in order; raises WorkflowError when the chain is broken."""
        found = {}
        for path in self.directory.glob(f"{self.name}_module*_impl.py"):
            match = _STAGED.match(path.name)
            if match and match["op"] == self.name:
                found[match["suffix"]] = path
        chain = []
        for k in range(1, len(found) + 1):
            suffix = "".join(str(i) for i in range(1, k + 1))
            if suffix not in found:
                raise WorkflowError(f"staged files {sorted(p.name for p in found.values())}: "
                                    f"{self.name}_module{suffix}_impl.py is missing "
                                    "(suffixes are cumulative: 1, 12, 123 ...)")
            chain.append(StagedFile(k, found[suffix]))
        return chain

    def case(self, level: str | None) -> Case:
        """The case ``level``, or the first quick case."""
        spec = self.spec
        cases = load_cases(spec.cases_path, spec)
        try:
            return select_cases(cases, [level] if level else None, quick=level is None)[0]
        except ValueError as error:
            raise WorkflowError(f"level: {error}") from error

    def golden_boundaries(self, inputs: dict, case: Case) -> dict:
        """The golden's boundary tensors: its probes in call order, then its output leaves."""
        probes, outputs = self.golden_probes_and_outputs(inputs, case)
        return {**probes, **leaves(outputs)}

    def golden_probes_and_outputs(self, inputs: dict, case: Case) -> tuple[dict, dict]:
        """(probes in call order, outputs as the golden returns them) of one golden run on
        copies of ``inputs``.  WorkflowError if the golden raises or a probe has the name
        of an output leaf."""
        try:
            with recording_probes() as probes:
                outputs = self.spec.golden(clone_inputs(inputs), case.attrs)
        except Exception as error:  # the user's golden: report it, do not crash
            raise WorkflowError(f"golden raised {type(error).__name__}: {error}") from error
        clashes = sorted(set(probes) & set(leaves(outputs)))
        if clashes:
            raise WorkflowError(f"probe name(s) {', '.join(clashes)} are also golden outputs; rename the probes")
        return dict(probes), outputs

    def inputs(self, case: Case) -> dict:
        return make_case_inputs(self.spec, case)

    def source_digests(self, implementation: Path) -> dict[str, str]:
        """sha256 of each file a verdict on ``implementation`` depends on: the file itself,
        golden.py (the boundary tensors), op.py (inputs, the API) and the case file."""
        files = [implementation, self.directory / "golden.py", self.directory / "op.py", Path(self.spec.cases_path)]
        return {path.name: hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "missing"
                for path in dict.fromkeys(files)}


def resolve(op: str) -> OpPackage:
    """A registered operator name, or the directory of an operator package (``ptogym.ops.locate``)."""
    try:
        location = ops.locate(op)
    except KeyError as error:
        raise WorkflowError(f"OP: {error.args[0]}") from None
    return OpPackage(location.name, location.directory, location.package)


def compare_boundaries(outputs, boundaries: dict, case: Case) -> dict:
    """Each output leaf against the golden boundary tensor of its name, held to the
    case's boundary bounds: {name: CompareResult}.  WorkflowError when there is no
    leaf, or a leaf has no boundary tensor: nothing may go unverified."""
    from ptogym.verify.compare import detailed_tensor_compare

    produced = leaves(outputs, "")
    unknown = [name for name in produced if name not in boundaries]
    if unknown:
        raise WorkflowError(f"output(s) {', '.join(unknown)} have no golden boundary tensor; "
                            f"probe them in golden.py (known: {', '.join(boundaries)})")
    if not produced:
        raise WorkflowError("the module returned no outputs to compare")
    bounds = case.boundary_tolerance().bounds()
    return {name: detailed_tensor_compare(actual, boundaries[name], name, **bounds)
            for name, actual in produced.items()}


def clone_inputs(inputs: dict) -> dict:
    return {name: tensor.clone() for name, tensor in inputs.items()}


def leaves(value, prefix: str = "") -> dict[str, torch.Tensor]:
    """Flatten nested dict/tuple/list outputs into {path: tensor}: {"a": {"b": t}} -> {"a.b": t}."""
    if isinstance(value, dict):
        children = ((f"{prefix}.{key}" if prefix else str(key), item) for key, item in value.items())
    elif isinstance(value, (tuple, list)):
        children = ((f"{prefix}[{i}]", item) for i, item in enumerate(value))
    else:
        return {prefix: value}
    flat = {}
    for path, item in children:
        flat.update(leaves(item, path))
    return flat
