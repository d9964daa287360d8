"""The rest of pypto's kernel-side control surface: ``cond``, ``set_matrix_size``,
the ``options`` scope, print options, global and pass configuration, the pass-verify
debug helpers and the scalar conversions (``to_sym``, ``convert_to_element``).

Configuration is recorded (``get_*`` reads it back) and has no effect on the
interpreter's numbers, as on the device it steers compilation, not results.
"""
from __future__ import annotations

import contextlib
import enum
import os
from pathlib import Path
from typing import Union

import torch

from . import runtime
from .config import set_cube_tile_shapes, set_options, set_vec_tile_shapes
from .checks import violation
from .dtypes import DT_FP32, DT_INT32, DT_INT64
from .ops._common import Element
from .symbolic import IfBranch, SymbolicScalar, value_of
from .tensor import Tensor

SymInt = Union[int, SymbolicScalar]


def cond(scalar, file: str | None = None, lineno: int | None = None) -> IfBranch:
    """``if pypto.cond(x):`` - eagerly, whether the runtime value of ``x`` is non-zero."""
    if (file is None) ^ (lineno is None):
        violation("C-FRONT-01", f"pypto.cond(..., file={file!r}, lineno={lineno!r}): file and lineno must be "
                                f"given together or not at all (pypto: ValueError)")
    return IfBranch(value_of(scalar) != 0)


def set_matrix_size(size: list) -> None:
    runtime.current().options.setdefault("scope", {})["matrix_size"] = list(size)


def _scoped_state() -> tuple:
    run = runtime.current()
    return run.vec_tile, run.cube_tile, {k: dict(v) if isinstance(v, dict) else v for k, v in run.options.items()}


class options(contextlib.ContextDecorator):
    """``with pypto.options(...)`` / ``@pypto.options(...)``: settings for a scope,
    restored on exit (tile shapes included)."""

    def __init__(self, name="", codegen_options=None, host_options=None, pass_options=None, runtime_options=None,
                 verify_options=None, operation_options=None, debug_options=None, vec_tile_shapes=None,
                 cube_tile_shapes=None, conv_tile_shapes=None, matrix_size=None):
        self.groups = {"codegen_options": codegen_options, "host_options": host_options,
                       "pass_options": pass_options, "runtime_options": runtime_options,
                       "verify_options": verify_options, "operation_options": operation_options,
                       "debug_options": debug_options}
        self.name, self.vec, self.cube, self.matrix_size = name, vec_tile_shapes, cube_tile_shapes, matrix_size
        if conv_tile_shapes is not None:
            raise NotImplementedError("pypto.options(conv_tile_shapes=...): pypto.conv is not emulated by "
                                      "ptogym.interp")
        self._saved = []

    def __enter__(self):
        self._saved.append(_scoped_state())
        set_options(**self.groups)
        if self.vec is not None:
            set_vec_tile_shapes(*self.vec)
        if self.cube is not None:
            cube = self.cube
            set_cube_tile_shapes(cube.m, cube.k, cube.n, cube.enable_split_k) if isinstance(cube, CubeTile) \
                else set_cube_tile_shapes(*cube)
        if self.matrix_size is not None:
            set_matrix_size(self.matrix_size)
        return self

    def __exit__(self, *exc):
        run = runtime.current()
        run.vec_tile, run.cube_tile, run.options = self._saved.pop()
        return False


def reset_options() -> None:
    run = runtime.current()
    run.vec_tile, run.cube_tile, run.options = None, None, {}


_print_options = {"edgeitems": 3, "precision": 4, "threshold": 10, "linewidth": 10}


def set_print_options(*, edgeitems=3, precision=4, threshold=10, linewidth=10) -> None:
    """How ``pass_verify_print`` shows tensors (torch's print options)."""
    _print_options.update(edgeitems=edgeitems, precision=precision, threshold=threshold, linewidth=linewidth)


def get_global_config(key: str):
    return runtime.GLOBAL_RUN.options.get("global", {}).get(key)


def set_global_config(key, value) -> None:
    runtime.GLOBAL_RUN.options.setdefault("global", {})[key] = value


class CubeTile:
    """Cube tile shapes as one value (``pypto.options(cube_tile_shapes=CubeTile(...))``)."""

    def __init__(self, m, k, n, enable_split_k: bool = False):
        self.m, self.k, self.n, self.enable_split_k = list(m), list(k), list(n), enable_split_k

    def __repr__(self) -> str:
        return f"CubeTile(m={self.m}, k={self.k}, n={self.n}, enable_split_k={self.enable_split_k})"


class CompStage(enum.IntEnum):
    """How far pypto's compiler runs (``host_options``); recorded only."""
    ALL_COMPLETE = 0
    TENSOR_GRAPH = 1
    TILE_GRAPH = 2
    EXECUTE_GRAPH = 3
    CODEGEN_INSTRUCTION = 4
    CODEGEN_BINARY = 5


# --- pass configuration (per strategy/identifier switches of pypto's passes) ----------
class PassConfigKey(enum.Enum):
    KEY_DUMP_GRAPH = "dump_graph"


class PassConfigs:
    def __init__(self):
        self.dump_graph = False


_pass_configs: dict = {}
_pass_defaults: dict = {}


def set_pass_default_config(key: PassConfigKey, value: bool) -> None:
    _pass_defaults[key] = bool(value)


def get_pass_default_config(key: PassConfigKey, default_value: bool) -> bool:
    return _pass_defaults.get(key, default_value)


def set_pass_config(strategy: str, identifier: str, key: PassConfigKey, value: bool) -> None:
    _pass_configs[(strategy, identifier, key)] = bool(value)


def get_pass_config(strategy: str, identifier: str, key: PassConfigKey, default_value: bool) -> bool:
    return _pass_configs.get((strategy, identifier, key), get_pass_default_config(key, default_value))


def get_pass_configs(strategy: str, identifier: str) -> PassConfigs:
    configs = PassConfigs()
    configs.dump_graph = get_pass_config(strategy, identifier, PassConfigKey.KEY_DUMP_GRAPH, False)
    return configs


# --- pass-verify debug helpers: eager equivalents -----------------------------------
def pass_verify_print(*values, cond=1) -> None:
    """Print tensors, scalars and text now (pypto prints them while verifying passes)."""
    if value_of(cond) == 0:
        return
    options = {k: _print_options[k] for k in ("edgeitems", "precision", "threshold")}
    with _torch_print_options(**options):
        print("".join(str(v.data) if isinstance(v, Tensor) else
                      str(value_of(v)) if isinstance(v, SymbolicScalar) else str(v) for v in values))


@contextlib.contextmanager
def _torch_print_options(**options):
    saved = torch._tensor_str.PRINT_OPTS
    previous = {k: getattr(saved, k) for k in options}
    torch.set_printoptions(**options)
    try:
        yield
    finally:
        torch.set_printoptions(**previous)


def pass_verify_save(tensor: Tensor, fname, cond=1, **kwargs) -> None:
    """Save ``tensor`` to ``$PTOGYM_VERIFY_DIR/<fname>.pt`` (default ./pass_verify), ``$name``
    placeholders filled from ``kwargs``, when ``cond`` is non-zero."""
    if value_of(cond) == 0:
        return
    name = str(value_of(fname)) if isinstance(fname, (int, SymbolicScalar)) else fname
    for key, value in sorted(kwargs.items(), key=lambda kv: -len(kv[0])):
        name = name.replace(f"${key}", str(value_of(value)))
    if "$" in name:
        raise KeyError(f"Placeholder in {fname!r} not found in keyword arguments")
    directory = Path(os.environ.get("PTOGYM_VERIFY_DIR", "pass_verify"))
    directory.mkdir(parents=True, exist_ok=True)
    torch.save(tensor.data.detach().cpu().clone(), directory / f"{name}.pt")


# --- scalar conversions ---------------------------------------------------------------
def to_sym(value) -> SymbolicScalar:
    return value if isinstance(value, SymbolicScalar) else SymbolicScalar(value)


def to_syms(values) -> list:
    return [to_sym(v) for v in values]


def convert_to_element(value) -> Element:
    """An int becomes a DT_INT32 Element (DT_INT64 beyond int32's range), anything else DT_FP32."""
    if isinstance(value, int):
        return Element(DT_INT32 if -2 ** 31 <= value <= 2 ** 31 - 1 else DT_INT64, value)
    return Element(DT_FP32, value)
