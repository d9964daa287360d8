"""The operator registry: one sub-package per operator, one ``OpSpec`` each.

An operator package ``ptogym/ops/<name>/`` holds ``kernel.py`` (PyPTO source, a
builder taking the ``pypto`` namespace), ``golden.py`` (plain torch, fp32),
``op.py`` (public API, torch.library registration and the ``SPEC``), ``cases.json``
and ``README.md``.  The verification runner, pytest collection and the benchmark
all go through ``REGISTRY``.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

OPS_DIR = Path(__file__).parent
OP_NAMES = ("inplace_add_rms_norm", "rms_norm", "per_token_quant", "dequant", "linear", "rms_norm_linear",
            "rms_norm_linear_quant", "rope", "cache_scatter", "qwen3_pre_attn", "mla_prolog",
            "mla_prolog_quant")


@dataclass(frozen=True)
class OpSpec:
    """Everything the runner, tests and benches need to know about one operator.

    make_inputs(case, generator, device) -> dict[str, Tensor]   deterministic from the case seed
    golden(inputs, attrs) -> dict[str, Tensor]          independent torch reference (gets copies)
    run(inputs, attrs, backend) -> (dict[str, Tensor], LaunchReport)   the kernel via a backend
    check_case(case) -> list[str]                       violated shape/dtype rules
    hbm_bytes(case) -> int                              bytes the kernel must move
    """

    name: str
    description: str
    make_inputs: Callable[..., dict]
    golden: Callable[..., dict]
    run: Callable[..., dict]
    check_case: Callable[..., list]
    hbm_bytes: Callable[..., int]
    input_names: tuple = ()
    required_levels: tuple = ()
    extra: Mapping[str, Any] = field(default_factory=dict)
    cases_file: Path | None = None  # default: ptogym/ops/<name>/cases.json

    @property
    def cases_path(self) -> Path:
        return self.cases_file or OPS_DIR / self.name / "cases.json"


def get_op(name: str) -> OpSpec:
    if name not in OP_NAMES:
        raise KeyError(f"unknown operator {name!r}; known: {', '.join(OP_NAMES)}")
    return importlib.import_module(f"{__name__}.{name}.op").SPEC


def all_ops() -> list[OpSpec]:
    return [get_op(n) for n in OP_NAMES]


# Public operator functions.  Importing an operator's package binds its name here to
# the sub-package; re-binding it to the function keeps ``ptogym.ops.<name>(...)`` callable.
from .inplace_add_rms_norm.op import inplace_add_rms_norm  # noqa: E402
from .rms_norm.op import rms_norm  # noqa: E402
from .per_token_quant.op import per_token_quant  # noqa: E402
from .dequant.op import dequant  # noqa: E402
from .linear.op import linear  # noqa: E402
from .rms_norm_linear.op import rms_norm_linear  # noqa: E402
from .rms_norm_linear_quant.op import rms_norm_linear_quant  # noqa: E402
from .rope.op import rope  # noqa: E402
from .cache_scatter.op import cache_scatter  # noqa: E402
from .qwen3_pre_attn.op import qwen3_pre_attn  # noqa: E402
from .mla_prolog.op import mla_prolog  # noqa: E402
from .mla_prolog_quant.op import mla_prolog_quant  # noqa: E402
