"""Level-based case files: ``ptogym/ops/<op>/cases.json``.

One file per operator lists its test levels (shapes, dtypes, seed, attributes) and
the tolerance of each output with the reason for it::

    {"op": "per_token_quant",
     "required_levels": ["level0", "level1"],
     "tolerances": {
         "x_int8": {"int_tolerance": 1, "reason": "a product one fp32 ulp off a .5 tie rounds either way"},
         "scale": {"rtol": 1e-6, "atol": 0, "reason": "amax / 127: one fp32 rounding"}},
     "levels": [{"id": "level0", "description": "small smoke", "seed": 0,
                 "inputs": {"x": {"shape": [2, 4, 256], "dtype": "bfloat16"}},
                 "tags": ["quick"]},
                {"id": "level4", "description": "fp32 input", "seed": 4,
                 "inputs": {"x": {"shape": [1, 4096], "dtype": "float32"}},
                 "tolerances": {"scale": {"rtol": 1e-7, "atol": 0, "reason": "..."}}}]}

Tolerances.  The top-level ``tolerances`` maps an output name (a key of the dicts
``SPEC.golden`` and ``SPEC.run`` return, ``SPEC.output_names``) to its bounds: rtol,
atol, max_error_ratio, int_tolerance (see ``detailed_tensor_compare``; an omitted
bound is 0, i.e. exact) and a mandatory ``reason``.  A level's own ``tolerances``
replaces the entries it names for that level only (an entry is replaced whole, with
its own reason).  A level's ``rtol``/``atol`` (given together, with optional
``max_error_ratio``/``int_tolerance``) are the default for outputs that have no entry;
a level must have them when some output has none.  ``Case.tolerance(name)`` resolves
one output: level entry, file entry, level default - and says which applied.

Every level needs id, description, seed and inputs; attrs, tags, tolerances and the
default bounds are optional.  Validation is strict and collects every problem before
raising, so one edit fixes a file instead of one edit per error; each message names
the file, the case and the field.  Besides the fields' types it refuses attributes
the operator does not declare (``OpSpec.attr_names``), tolerances for outputs it does
not produce (``OpSpec.output_names``) or outputs left without any tolerance, seeds
outside torch's ``[0, 2**64 - 1]``, and cases whose inputs hold more bytes than the
budget: ``$PTOGYM_CASE_MAX_BYTES``, default one eighth of this machine's physical
memory (running a case needs several times its input bytes: golden copies, fp32
intermediates, float64 comparison).
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:  # torch loads only when a dtype is parsed (fast command-line start)
    import torch

_TOP_REQUIRED = ("op", "levels")
_TOP_FIELDS = (*_TOP_REQUIRED, "required_levels", "tolerances")
_LEVEL_REQUIRED = ("id", "description", "seed", "inputs")
_BOUNDS = ("rtol", "atol", "max_error_ratio", "int_tolerance")
_LEVEL_FIELDS = (*_LEVEL_REQUIRED, "attrs", *_BOUNDS, "tolerances", "tags")
_TOLERANCE_FIELDS = (*_BOUNDS, "reason")
LEVEL_DEFAULT = "level default"  # Tolerance.source of an output that has no entry of its own
_TENSOR_FIELDS = ("shape", "dtype")
MAX_SEED = 2**64 - 1  # torch.Generator.manual_seed's range
ENV_MAX_BYTES = "PTOGYM_CASE_MAX_BYTES"


class CaseFileError(ValueError):
    """A case file is unusable; ``errors`` holds one line per problem found."""

    def __init__(self, errors: list[str]):
        self.errors = list(errors)
        super().__init__("\n".join(self.errors))


@dataclass(frozen=True)
class TensorSpec:
    """Shape and dtype of one generated input."""

    shape: tuple[int, ...]
    dtype: torch.dtype

    def __str__(self) -> str:
        return f"{str(self.dtype).removeprefix('torch.')}[{','.join(map(str, self.shape))}]"


@dataclass(frozen=True)
class Tolerance:
    """The bounds one output is compared with, why, and where the case file states them."""

    rtol: float = 0.0
    atol: float = 0.0
    max_error_ratio: float = 0.0
    int_tolerance: int = 0
    reason: str = ""
    source: str = ""  # "tolerances.y" (the file's entry), "level4.tolerances.y" (a level's) or LEVEL_DEFAULT

    def bounds(self) -> dict[str, float | int]:
        """The keyword arguments of ``detailed_tensor_compare``."""
        return {name: getattr(self, name) for name in _BOUNDS}

    def to_dict(self) -> dict[str, Any]:
        return {**self.bounds(), "reason": self.reason, "source": self.source}

    def describe(self) -> str:
        """``rtol=0.0078125 atol=0.001 max_error_ratio=0.005 [tolerances.y]: reason``; the
        bounds that are not 0, or ``exact``."""
        bounds = " ".join(f"{name}={value}" for name, value in self.bounds().items() if value) or "exact"
        return f"{bounds} [{self.source}]" + (f": {self.reason}" if self.reason else "")


@dataclass(frozen=True)
class Case:
    """One level of an operator's case file.

    ``tolerances`` holds the entries that apply to this level (the file's, with the
    level's own in their place); rtol/atol/max_error_ratio/int_tolerance are the
    level's default for outputs without an entry (rtol/atol None: no default).
    """

    op: str
    id: str
    description: str
    seed: int
    inputs: dict[str, TensorSpec]
    rtol: float | None = None
    atol: float | None = None
    attrs: dict[str, Any] = field(default_factory=dict)
    max_error_ratio: float = 0.0
    int_tolerance: int = 0
    tags: tuple[str, ...] = ()
    path: Path | None = None
    tolerances: dict[str, Tolerance] = field(default_factory=dict)

    @property
    def is_quick(self) -> bool:
        return "quick" in self.tags

    @property
    def is_slow(self) -> bool:
        return "slow" in self.tags

    @property
    def shape_summary(self) -> str:
        return " ".join(f"{name}:{spec}" for name, spec in self.inputs.items())

    @property
    def has_default(self) -> bool:
        return self.rtol is not None and self.atol is not None

    def tolerance(self, output: str) -> Tolerance:
        """The tolerance output *output* is judged by; KeyError (naming the file, case
        and field to add) when it has no entry and the level no default."""
        if output in self.tolerances:
            return self.tolerances[output]
        if not self.has_default:
            raise KeyError(f"{self.path or self.op}: case {self.id!r}: field 'tolerances': output {output!r} has "
                           f"no tolerance; add tolerances.{output} with a reason (or the level's rtol and atol)")
        return Tolerance(self.rtol, self.atol, self.max_error_ratio, self.int_tolerance,
                         "the level's default bounds (no entry for this output)", LEVEL_DEFAULT)

    def boundary_tolerance(self) -> Tolerance:
        """The bound ``ptogym stage``/``bisect`` hold boundary and probe tensors to: the
        level default when there is one, else the loosest bounds of the case's outputs.
        Those tensors are often intermediates (an fp32 tile before its final rounding),
        and the tools locate a fault; ``ptogym run`` judges each output by its own."""
        if self.has_default or not self.tolerances:
            return Tolerance(self.rtol or 0.0, self.atol or 0.0, self.max_error_ratio, self.int_tolerance,
                             "the level's default bounds", LEVEL_DEFAULT)
        entries = self.tolerances.values()
        loosest = {bound: max(getattr(t, bound) for t in entries) for bound in _BOUNDS}
        return Tolerance(**loosest, reason=f"the loosest bounds of the outputs {', '.join(self.tolerances)}",
                         source="loosest output tolerance")


def parse_dtype(name: str) -> torch.dtype:
    """The torch dtype called *name* (``"bfloat16"``, ``"int8"``, ``"bool"``...)."""
    import torch

    dtype = getattr(torch, name, None) if isinstance(name, str) else None
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"unknown dtype {name!r}; use a torch dtype name such as 'bfloat16' or 'int8'")
    return dtype


def load_cases(path_or_op_name: str | Path, spec=None) -> list[Case]:
    """Load and validate a case file, given its path or an operator name.

    With an operator name the spec comes from ``ptogym.ops.get_op`` and the file
    from ``spec.cases_path``.  With a *spec*, the file must belong to it, contain its
    ``required_levels`` and input names, and every case must pass
    ``spec.check_case(case)``.  Raises CaseFileError listing every problem.
    """
    path, spec = _resolve(path_or_op_name, spec)
    problems = _Problems(path)
    document = _read_json(path)
    if not isinstance(document, dict):
        raise CaseFileError([f"{path}: the file must hold a JSON object"])
    _check_top_level(document, spec, problems)
    shared = _parse_tolerances(document.get("tolerances", {}), None, "tolerances", spec, problems)
    cases = []
    levels = document.get("levels")
    for index, level in enumerate(levels if isinstance(levels, list) else []):
        case = _parse_level(level, index, document.get("op"), path, spec, shared, problems)
        if case is not None:
            cases.append(case)
    _check_ids(levels if isinstance(levels, list) else [], document, spec, problems)
    problems.raise_if_any()
    return cases


# ------------------------------------------------------------------ file handling
def _resolve(path_or_op_name: str | Path, spec) -> tuple[Path, Any]:
    if isinstance(path_or_op_name, Path) or str(path_or_op_name).endswith(".json"):
        return Path(path_or_op_name), spec
    if spec is None:
        from ptogym import ops  # resolved at call time so tests can substitute operators

        spec = ops.get_op(path_or_op_name)
    return spec.cases_path, spec


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CaseFileError([f"{path}: case file not found"]) from None
    except OSError as error:
        raise CaseFileError([f"{path}: cannot read: {error.strerror or error}"]) from None
    except UnicodeDecodeError as error:
        raise CaseFileError([f"{path}: byte {error.start}: not UTF-8 ({error.reason})"]) from None
    except json.JSONDecodeError as error:
        raise CaseFileError([f"{path}: line {error.lineno}: invalid JSON: {error.msg}"]) from None
    except RecursionError:
        raise CaseFileError([f"{path}: JSON nested too deeply to read"]) from None


def max_case_bytes() -> int:
    """The input-bytes budget of one case: ``$PTOGYM_CASE_MAX_BYTES`` or 1/8 of physical memory."""
    raw = os.environ.get(ENV_MAX_BYTES, "").strip()
    if raw:
        if not raw.isdigit():
            raise CaseFileError([f"{ENV_MAX_BYTES}: must be a whole number of bytes, got {raw!r}"])
        return int(raw)
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 8
    except (ValueError, OSError, AttributeError):  # no sysconf (Windows): assume a 16 GB machine
        return 2 * 1024**3


class _Problems:
    """Collects ``file: case: field: problem`` lines so all of them are reported."""

    def __init__(self, path: Path):
        self.path = path
        self.lines: list[str] = []

    def add(self, case: str | None, field_name: str, message: str) -> None:
        where = f"case {case!r}: " if case is not None else ""
        self.lines.append(f"{self.path}: {where}field {field_name!r}: {message}")

    def raise_if_any(self) -> None:
        if self.lines:
            raise CaseFileError(self.lines)


# ----------------------------------------------------------------- field checkers
# Each returns a problem description, or None when the value is acceptable.
def _integer(value: Any, maximum: int | None = None) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return f"must be an integer, got {value!r}"
    if maximum is not None and value > maximum:
        return f"must be in [0, {maximum}], got {value}"
    return None if value >= 0 else f"must be >= 0, got {value}"


def _number(value: Any, maximum: float = math.inf) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return f"must be a finite number, got {value!r}"
    return None if 0 <= value <= maximum else f"must be in [0, {maximum}], got {value}"


def _text(value: Any) -> str | None:
    return None if isinstance(value, str) and value else f"must be a non-empty string, got {value!r}"


def _object(value: Any) -> str | None:
    return None if isinstance(value, dict) else f"must be a JSON object, got {type(value).__name__}"


def _string_list(value: Any) -> str | None:
    ok = isinstance(value, list) and all(isinstance(item, str) for item in value)
    return None if ok else f"must be a list of strings, got {value!r}"


_TOLERANCE_CHECKS: dict[str, Callable[[Any], str | None]] = {
    "rtol": _number,
    "atol": _number,
    "max_error_ratio": lambda value: _number(value, maximum=1.0),
    "int_tolerance": _integer,
    "reason": _text,
}
_LEVEL_CHECKS: dict[str, Callable[[Any], str | None]] = {
    "id": _text,
    "description": _text,
    "seed": lambda value: _integer(value, maximum=MAX_SEED),
    **{name: _TOLERANCE_CHECKS[name] for name in _BOUNDS},
    "attrs": _object,
    "tags": _string_list,
}


# --------------------------------------------------------------------- validation
def _check_top_level(document: dict, spec, problems: _Problems) -> None:
    for name in _TOP_REQUIRED:
        if name not in document:
            problems.add(None, name, "missing")
    for name in document.keys() - set(_TOP_FIELDS):
        problems.add(None, name, f"unknown field; allowed: {', '.join(_TOP_FIELDS)}")
    if "op" in document and spec is not None and document["op"] != spec.name:
        problems.add(None, "op", f"file is for {document['op']!r}, expected {spec.name!r}")
    elif "op" in document and (problem := _text(document["op"])):
        problems.add(None, "op", problem)
    if "levels" in document and not isinstance(document["levels"], list):
        problems.add(None, "levels", f"must be a list, got {type(document['levels']).__name__}")
    if "required_levels" in document and (problem := _string_list(document["required_levels"])):
        problems.add(None, "required_levels", problem)


def _parse_level(level: Any, index: int, op: Any, path: Path, spec, shared: dict[str, Tolerance | None],
                 problems: _Problems) -> Case | None:
    """Validate one level; return its Case when it is well formed (and allowed by *spec*)."""
    if not isinstance(level, dict):
        problems.add(f"levels[{index}]", "levels", f"each level must be a JSON object, got {level!r}")
        return None
    case_name = level["id"] if isinstance(level.get("id"), str) and level["id"] else f"levels[{index}]"
    before = len(problems.lines)
    for name in _LEVEL_REQUIRED:
        if name not in level:
            problems.add(case_name, name, "missing")
    for name in level.keys() - set(_LEVEL_FIELDS):
        problems.add(case_name, name, f"unknown field; allowed: {', '.join(_LEVEL_FIELDS)}")
    for name, check in _LEVEL_CHECKS.items():
        if name in level and (problem := check(level[name])):
            problems.add(case_name, name, problem)
    declared = getattr(spec, "attr_names", None)
    if declared is not None and isinstance(level.get("attrs"), dict):
        for name in level["attrs"].keys() - set(declared):
            problems.add(case_name, f"attrs.{name}", f"unknown attribute of {spec.name}; "
                                                     f"allowed: {', '.join(declared) or 'none'}")
    inputs = _parse_inputs(level.get("inputs"), case_name, spec, problems) if "inputs" in level else None
    own = _parse_tolerances(level.get("tolerances", {}), case_name, "tolerances", spec, problems)
    own = {name: t and replace(t, source=f"{case_name}.{t.source}") for name, t in own.items()}
    tolerances = {**shared, **own}
    _check_default_bounds(level, case_name, tolerances, spec, problems)
    if len(problems.lines) > before or not isinstance(op, str):
        return None
    case = Case(
        op=op, id=level["id"], description=level["description"], seed=level["seed"], inputs=inputs,
        rtol=_optional_float(level, "rtol"), atol=_optional_float(level, "atol"),
        attrs=dict(level.get("attrs", {})), max_error_ratio=float(level.get("max_error_ratio", 0.0)),
        int_tolerance=level.get("int_tolerance", 0), tags=tuple(level.get("tags", ())), path=path,
        tolerances={name: t for name, t in tolerances.items() if t is not None},
    )
    _check_budget(case, problems)
    try:
        violations = spec.check_case(case) if spec is not None else ()
    except Exception as error:  # the operator's own check must not crash validation
        violations = [f"check_case raised {type(error).__name__}: {error}"]
    for violation in violations:
        problems.add(case_name, "inputs", f"violates the operator's constraints: {violation}")
    return case


def _optional_float(level: dict, name: str) -> float | None:
    return float(level[name]) if name in level else None


def _parse_tolerances(value: Any, case_name: str | None, field_name: str, spec,
                      problems: _Problems) -> dict[str, Tolerance | None]:
    """A ``tolerances`` object: output name -> Tolerance, or None for an entry with problems
    (recorded; the name still counts as covered, so one bad entry is one error)."""
    if problem := _object(value):
        problems.add(case_name, field_name, problem)
        return {}
    outputs = getattr(spec, "output_names", None)
    parsed = {}
    for output, entry in value.items():
        where = f"{field_name}.{output}"
        if outputs is not None and output not in outputs:
            problems.add(case_name, where, f"{spec.name} has no output {output!r}; its outputs: {', '.join(outputs)}")
            continue
        parsed[output] = None
        if problem := _object(entry):
            problems.add(case_name, where, problem)
            continue
        before = len(problems.lines)
        if "reason" not in entry:
            problems.add(case_name, f"{where}.reason", "missing (say why these bounds hold for this output)")
        for name in entry.keys() - set(_TOLERANCE_FIELDS):
            problems.add(case_name, f"{where}.{name}", f"unknown field; allowed: {', '.join(_TOLERANCE_FIELDS)}")
        for name in _TOLERANCE_FIELDS:
            if name in entry and (problem := _TOLERANCE_CHECKS[name](entry[name])):
                problems.add(case_name, f"{where}.{name}", problem)
        if len(problems.lines) == before:
            bounds = {name: entry[name] if name == "int_tolerance" else float(entry[name])
                      for name in _BOUNDS if name in entry}
            parsed[output] = Tolerance(**bounds, reason=entry["reason"], source=where)
    return parsed


def _check_default_bounds(level: dict, case_name: str, tolerances: dict, spec, problems: _Problems) -> None:
    """rtol and atol come together; the other default bounds only with them; and outputs
    without an entry of their own need them."""
    given = [name for name in ("rtol", "atol") if name in level]
    if len(given) == 1:
        missing = "atol" if given == ["rtol"] else "rtol"
        problems.add(case_name, missing, f"missing ({given[0]} and {missing} give the level's default bounds together)")
    elif not given:
        for name in ("max_error_ratio", "int_tolerance"):
            if name in level:
                problems.add(case_name, name, "only with the level's rtol and atol (a default for outputs without "
                                              "an entry); put it in tolerances.<output> instead")
        uncovered = [name for name in getattr(spec, "output_names", None) or () if name not in tolerances]
        if uncovered:
            problems.add(case_name, "tolerances", f"output(s) {', '.join(uncovered)} have no tolerance: add "
                                                  "tolerances.<output> with a reason, or the level's rtol and atol")


def _check_budget(case: Case, problems: _Problems) -> None:
    total = sum(math.prod(t.shape) * t.dtype.itemsize for t in case.inputs.values())
    budget = max_case_bytes()
    if total > budget:
        problems.add(case.id, "inputs", f"{total / 1e9:.2f} GB of inputs exceed the {budget / 1e9:.2f} GB budget "
                                         f"(set {ENV_MAX_BYTES} to raise it; a run needs several times this)")


def _parse_inputs(inputs: Any, case_name: str, spec, problems: _Problems) -> dict[str, TensorSpec] | None:
    if not isinstance(inputs, dict) or not inputs:
        problems.add(case_name, "inputs", f"must be a non-empty JSON object, got {inputs!r}")
        return None
    if spec is not None and spec.input_names and set(inputs) != set(spec.input_names):
        problems.add(case_name, "inputs", f"names {sorted(inputs)} differ from the operator's "
                                          f"{sorted(spec.input_names)}")
    parsed = {}
    for name, tensor in inputs.items():
        tensor_spec = _parse_tensor(tensor, case_name, f"inputs.{name}", problems)
        if tensor_spec is not None:
            parsed[name] = tensor_spec
    return parsed


def _parse_tensor(tensor: Any, case_name: str, field_name: str, problems: _Problems) -> TensorSpec | None:
    if not isinstance(tensor, dict):
        problems.add(case_name, field_name, f'must be {{"shape": [...], "dtype": "..."}}, got {tensor!r}')
        return None
    before = len(problems.lines)
    for name in _TENSOR_FIELDS:
        if name not in tensor:
            problems.add(case_name, f"{field_name}.{name}", "missing")
    for name in tensor.keys() - set(_TENSOR_FIELDS):
        problems.add(case_name, f"{field_name}.{name}", "unknown field; allowed: shape, dtype")
    shape = tensor.get("shape")
    if "shape" in tensor and (not isinstance(shape, list) or any(_integer(size) for size in shape)):
        problems.add(case_name, f"{field_name}.shape", f"must be a list of non-negative integers, got {shape!r}")
    dtype = None
    if "dtype" in tensor:
        try:
            dtype = parse_dtype(tensor["dtype"])
        except ValueError as error:
            problems.add(case_name, f"{field_name}.dtype", str(error))
    return TensorSpec(tuple(shape), dtype) if len(problems.lines) == before else None


def _check_ids(levels: list, document: dict, spec, problems: _Problems) -> None:
    """Duplicate ids, and required levels (the file's and the operator's) that are absent."""
    seen: dict[str, int] = {}
    for index, level in enumerate(levels):
        level_id = level.get("id") if isinstance(level, dict) else None
        if not isinstance(level_id, str):
            continue
        if level_id in seen:
            problems.add(level_id, "id", f"duplicate id (levels[{seen[level_id]}] and levels[{index}])")
        seen.setdefault(level_id, index)
    declared = document.get("required_levels")
    required = list(declared) if isinstance(declared, list) else []
    required += [level for level in (spec.required_levels if spec is not None else ()) if level not in required]
    for level_id in required:
        if isinstance(level_id, str) and level_id not in seen:
            problems.add(level_id, "levels", "required level is missing")
