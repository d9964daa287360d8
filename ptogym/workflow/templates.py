"""Text of the files ``ptogym new`` writes (``string.Template``: ``$name`` placeholders).

The placeholder operator: every module doubles its input (module k's boundary
tensor ``module<k>_out`` = x * 2^k in fp32), so the package passes its own cases
from the first minute and each file shows where the real maths goes.
"""
from string import Template

INIT = Template('''"""$op: see README.md, DESIGN.md, kernel.py (PyPTO), golden.py (torch), op.py (API)."""
''')

GOLDEN = Template('''"""Independent reference for $op: plain torch in fp32.

Golden function inventory:
$inventory

Each line is one mathematical operation the kernel must implement, with the module
(DESIGN.md's module table) that implements it; the kernel marks the implementing
line with ``# golden: <name>``.  ``ptogym.probe`` marks each module's boundary
tensor for ``ptogym stage`` and ``ptogym bisect``.
"""
import torch

from ptogym import probe


def ${op}_golden(x):
    """Return y in x's dtype (placeholder maths: each module doubles its input)."""
    h = x.to(torch.float32)
$golden_steps
    return h.to(x.dtype)
''')

# The kernel body both kernel.py and the staged files use: a loop over blocks of
# rows, a tail block marked with valid_shape, the module steps in fp32.
KERNEL_BUILD = Template('''ROWS_PER_TILE = 8


def build(pypto, *, hidden: int, dtype: str, out_dtype: str = ""):
    """The jit kernel for rows of ``hidden`` elements of ``dtype`` ("DT_FP32", ...);
    ``out_dtype`` (default: ``dtype``) is the dtype of the output."""
    dt = getattr(pypto, dtype)
    out_dt = getattr(pypto, out_dtype or dtype)

    @pypto.frontend.jit()
    def ${name}_kernel(
        x: pypto.Tensor([pypto.DYNAMIC, hidden], dt),
        out: pypto.Tensor([pypto.DYNAMIC, hidden], out_dt),
    ):
        pypto.set_vec_tile_shapes(ROWS_PER_TILE, hidden)
        n_rows = x.shape[0]
        blocks = (n_rows + ROWS_PER_TILE - 1) // ROWS_PER_TILE
        for block in pypto.loop(0, blocks, 1, name="LOOP_ROWS", idx_name="block"):
            row = block * ROWS_PER_TILE
            valid_rows = (n_rows - row).min(ROWS_PER_TILE)
            tile = pypto.view(x, [ROWS_PER_TILE, hidden], [row, 0], valid_shape=[valid_rows, hidden])
            x_fp32 = pypto.cast(tile, pypto.DT_FP32)
$kernel_steps
            pypto.assemble(pypto.cast($result, out_dt), [row, 0], out)

    return ${name}_kernel
''')

KERNEL = Template('''"""$op as a PyPTO kernel (scaffolded by `ptogym new`: placeholder maths, replace it).

Rows of the [rows, hidden] input are processed ROWS_PER_TILE at a time; the last
block's valid rows are marked with valid_shape.  This module never imports torch:
``build`` receives the ``pypto`` namespace (real pypto or ptogym.interp).
"""
$build''')

STAGED = Template('''"""$op modules 1..$k: the cumulative staged implementation $file.

Boundary-tensor hook: ``${op}_module${suffix}_wrapper`` returns module $k's boundary
tensor under the name the golden probes it with (``$boundary``); ``ptogym stage``
compares them leaf by leaf.  Modules after $k are not implemented here.
"""
import torch

DTYPES = {torch.bfloat16: "DT_BF16", torch.float16: "DT_FP16", torch.float32: "DT_FP32"}

$build

def ${op}_module${suffix}_wrapper(inputs, attrs, backend):
    """Layer K: lay out, allocate the boundary output with torch, call the kernel once."""
    x = inputs["x"]
    rows = x.reshape(-1, x.shape[-1])
    boundary = torch.empty(rows.shape, dtype=torch.float32, device=x.device)
    backend.launch(build, {"hidden": x.shape[-1], "dtype": DTYPES[x.dtype], "out_dtype": "DT_FP32"}, [rows, boundary])
    return {"$boundary": boundary.reshape(x.shape)}
''')

OP = Template('''"""Public API of $op and its ``SPEC`` (scaffolded by `ptogym new`; replace the placeholder maths).

``$op(x)`` returns y = x * $factor for x of shape [..., hidden], hidden * element size a
multiple of 32 bytes (vector tiles are 32-byte aligned).
"""
from __future__ import annotations

import math
from pathlib import Path

import torch

from ptogym.backends import get_backend
from ptogym.ops import OpSpec

from . import kernel
from .golden import ${op}_golden

SUPPORTED_DTYPES = {torch.bfloat16: "DT_BF16", torch.float16: "DT_FP16", torch.float32: "DT_FP32"}
ALIGN_BYTES = 32


def rule_violations(x) -> list[str]:
    """dtype and shape rules for anything with .shape and .dtype (a tensor or a case input)."""
    if x.dtype not in SUPPORTED_DTYPES:
        return [f"x: dtype {x.dtype} unsupported; use one of {list(SUPPORTED_DTYPES)}"]
    if len(x.shape) < 2:
        return [f"x: needs at least 2 dims [..., hidden], got shape {list(x.shape)}"]
    element = torch.empty((), dtype=x.dtype).element_size()
    if x.shape[-1] * element % ALIGN_BYTES:
        return [f"x: a row of {x.shape[-1]} x {element} B must be a multiple of {ALIGN_BYTES} B"]
    return []


def launch(x, backend=None):
    """Validate, run the kernel; return (y, launch report)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x: expected a torch.Tensor, got {type(x).__name__}")
    for problem in rule_violations(x):
        raise ValueError(problem)
    backend = get_backend(backend) if backend is None or isinstance(backend, str) else backend
    rows = x.contiguous().reshape(-1, x.shape[-1])
    y = torch.empty_like(rows)
    report = backend.launch(kernel.build, {"hidden": x.shape[-1], "dtype": SUPPORTED_DTYPES[x.dtype]}, [rows, y])
    return y.reshape(x.shape), report


def $op(x, *, backend=None):
    """y = x * $factor (placeholder)."""
    return launch(x, backend)[0]


# --- what the runner, tests and workflow tools need -------------------------------------
def _make_inputs(case, generator, device="cpu"):
    return {name: torch.randn(spec.shape, generator=generator).to(dtype=spec.dtype, device=device)
            for name, spec in case.inputs.items()}


def _golden(inputs, attrs):
    return {"y": ${op}_golden(inputs["x"])}


def _run(inputs, attrs, backend):
    y, report = launch(inputs["x"], backend)
    return {"y": y}, report


def _check_case(case) -> list[str]:
    if set(case.inputs) != {"x"}:
        return [f"inputs must be exactly x; got {sorted(case.inputs)}"]
    return rule_violations(case.inputs["x"])


def _hbm_bytes(case) -> int:
    x = case.inputs["x"]
    return 2 * math.prod(x.shape) * torch.empty((), dtype=x.dtype).element_size()


SPEC = OpSpec(
    name="$op",
    description="$op (scaffold: placeholder y = x * $factor)",
    make_inputs=_make_inputs,
    golden=_golden,
    run=_run,
    check_case=_check_case,
    hbm_bytes=_hbm_bytes,
    input_names=("x",),
    output_names=("y",),
    required_levels=("level0", "level1"),
    cases_file=Path(__file__).with_name("cases.json"),
)
''')

TEST = Template('''"""$op's quick cases against its golden on the interpreter (scaffolded by `ptogym new`)."""
from pathlib import Path

import pytest

from ptogym.verify.runner import open_backend, run_case
from ptogym.workflow.package import resolve

PACKAGE = resolve(str(Path(__file__).parent))


@pytest.mark.parametrize("level", ["level0", "level1"])
def test_case_matches_golden(level):
    result = run_case(PACKAGE.spec, PACKAGE.case(level), open_backend("interp"))
    assert result.status == "PASS", result.report()
''')

README = Template('''# $op

Scaffolded by `ptogym new $op$modules_flag`: a working placeholder (y = x * $factor, one
doubling per module) to replace module by module.

| file | what |
|---|---|
| `DESIGN.md` | module table and complexity budget |
| `golden.py` | plain torch reference; its docstring holds the golden function inventory |
| `kernel.py` | the PyPTO kernel (builder receiving `pypto`; no torch) |
$staged_rows| `op.py` | API, input rules and `SPEC` |
| `cases.json` | case levels (`level0`, `level1` quick) |
| `test_$op.py` | the quick cases against the golden |

```bash
python3 -m ptogym run $ref --quick   # cases against the golden
python3 -m ptogym stage $ref     # module files against the golden's boundary tensors
python3 -m ptogym bisect $ref    # first kernel op diverging from a golden probe
python3 -m ptogym lint $dir      # OLxx rules
```
''')

DESIGN = Template('''# $op design

## 0.3 Complexity budget

| item | value |
|---|---|
| module_count | $n |
| total_complexity | $complexity (placeholder: 0.5 per elementwise module) |
| path | $path |

## Module table

| module | maths (golden inventory) | inputs | boundary tensor | staged file |
|---|---|---|---|---|
$module_rows

## Tiling

Vector tiles of (ROWS_PER_TILE = 8, hidden) rows; a `pypto.loop` over row blocks, the
tail block marked with `valid_shape`.  Replace with the operator's real design.
''')

# Each output's tolerance with its reason (cases.json "tolerances"); a level replaces an
# entry where its dtype needs another bound.  `ptogym stage` holds the staged modules'
# boundary tensors (intermediates) to the loosest output bound (Case.boundary_tolerance).
CASES_TOLERANCES = {
    "y": {"rtol": 1e-5, "atol": 1e-5,
          "reason": "fp32 y: a few fp32 ulp (placeholder: state the bound your kernel's numerics justify, and why)"},
}
CASES_LEVELS = (
    {"id": "level0", "description": "smoke: fp32 [2, 8, 64]", "seed": 0,
     "inputs": {"x": {"shape": [2, 8, 64], "dtype": "float32"}}, "tags": ["quick"]},
    {"id": "level1", "description": "bf16 with a tail block: [3, 11, 128]", "seed": 1,
     "inputs": {"x": {"shape": [3, 11, 128], "dtype": "bfloat16"}},
     "tolerances": {"y": {"rtol": 0.01, "atol": 0.01,
                          "reason": "bf16 y: about one bf16 ulp (2^-7 relative) (placeholder: state your bound)"}},
     "tags": ["quick"]},
)
