"""Tile shapes, labels and the option setters kernels call.  Tile shapes are checked
when set (C-TILE-06 ints, C-TILE-05 cube L0/L1 rules) and used by every later op."""
from __future__ import annotations

import enum
import sys

import torch

from . import runtime
from .checks import violation
from .symbolic import SymbolicScalar


class CachePolicy(enum.Enum):  # values as pypto numbers them
    NONE_CACHEABLE = 1
    MAX_NUM = 2


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def set_vec_tile_shapes(*shapes: int) -> None:
    # pypto takes a concrete symbolic scalar's value (its concrete() raises for a runtime value)
    shapes = tuple(s.value if isinstance(s, SymbolicScalar) and s.is_concrete() else s for s in shapes)
    for i, s in enumerate(shapes):
        if not _is_int(s) or s <= 0:
            violation("C-TILE-06", f"set_vec_tile_shapes{shapes}: entry {i} is {s!r}; tile shapes must be positive "
                                   f"Python ints, not runtime values")
    runtime.current().vec_tile = tuple(shapes)


def get_vec_tile_shapes() -> list:
    tile = runtime.current().vec_tile
    return list(tile) if tile else []


def set_cube_tile_shapes(m, k, n, enable_split_k: bool = False) -> None:
    """m and n are [L0, L1]; k is [L0, L1] or [L0, L1, K2] (pypto's CubeTile pads a
    2-entry k with K2 = L1; K2 does not change what the interpreter computes)."""
    for axis, tiles in (("m", m), ("k", k), ("n", n)):
        lengths = (2, 3) if axis == "k" else (2,)
        if len(tiles) not in lengths or not all(_is_int(v) for v in tiles):
            violation("C-TILE-06", f"set_cube_tile_shapes: {axis}={tiles!r} must be "
                                   f"{'[L0, L1] or [L0, L1, K2]' if axis == 'k' else '[L0, L1]'} Python ints")
            return
        l0, l1 = tiles[:2]
        if not (0 < l0 <= l1 and l1 % l0 == 0):
            violation("C-TILE-05", f"set_cube_tile_shapes: {axis}=[{l0}, {l1}] needs 0 < L0 <= L1 and L1 % L0 == 0")
    runtime.current().cube_tile = (tuple(m), tuple(k), tuple(n), enable_split_k)


def get_cube_tile_shapes():
    cube = runtime.current().cube_tile
    if cube is None:
        return [], [], [], False
    m, k, n, split = cube
    return list(m), list(k), list(n), split


def set_semantic_label(label: str) -> None:
    runtime.current().semantic_label = label


def set_cache_policy(tensor, policy, value=True) -> None:
    tensor.set_cache_policy(policy, value)


def _option_setter(group: str):
    def setter(**options) -> None:
        runtime.current().options.setdefault(group, {}).update(options)
    setter.__name__ = f"set_{group}"
    return setter


def _option_getter(group: str):
    def getter() -> dict:
        return dict(runtime.current().options.get(group, {}))
    getter.__name__ = f"get_{group}"
    return getter


set_pass_options, get_pass_options = _option_setter("pass_options"), _option_getter("pass_options")
set_runtime_options, get_runtime_options = _option_setter("runtime_options"), _option_getter("runtime_options")
set_verify_options, get_verify_options = _option_setter("verify_options"), _option_getter("verify_options")
set_host_options, get_host_options = _option_setter("host_options"), _option_getter("host_options")
set_codegen_options, get_codegen_options = _option_setter("codegen_options"), _option_getter("codegen_options")
set_debug_options, get_debug_options = _option_setter("debug_options"), _option_getter("debug_options")
set_operation_options, get_operation_options = (_option_setter("operation_options"),
                                                _option_getter("operation_options"))


def set_options(**groups) -> None:
    """``pypto.set_options(pass_options={...}, vec_tile_shapes=[...], ...)``."""
    for group, value in groups.items():
        if value is None:
            continue
        if group == "vec_tile_shapes":
            set_vec_tile_shapes(*value)
        elif group == "cube_tile_shapes":
            set_cube_tile_shapes(*value)
        else:
            runtime.current().options.setdefault(group, {}).update(value)


# --- pass verification: pypto compares each compiler pass's tensors with golden data --------
_verify_goldens: list = []  # process-wide, as pypto keeps them


def set_verify_golden_data(in_out_tensors=None, goldens=None) -> None:
    """Golden data for pypto's pass verification (``verify_options={"enable_pass_verify":
    True}``): one entry per kernel tensor argument, None for those not checked.  The
    interpreter has no compiler passes; it compares the final arguments with these
    goldens after the kernel ran and prints what it found (``report_pass_verify``)."""
    del in_out_tensors  # pypto's own input/output data for the verifier; the interpreter has the arguments
    _verify_goldens[:] = list(goldens or [])


def report_pass_verify(kernel: str, options: dict, arguments: list) -> None:
    """After a kernel with pass verification on: each argument against its golden, one
    line each on stderr (pypto logs its verification; it does not fail the call)."""
    verify = {**runtime.GLOBAL_RUN.options.get("verify_options", {}), **(options.get("verify_options") or {})}
    if not verify.get("enable_pass_verify") or not _verify_goldens:
        return
    for index, (argument, golden) in enumerate(zip(arguments, _verify_goldens)):
        if golden is None:
            continue
        got, want = argument.detach().cpu().double(), golden.detach().cpu().double()
        if got.shape != want.shape:
            verdict = f"shape {list(got.shape)} vs golden {list(want.shape)}"
        else:
            close = torch.allclose(got, want, rtol=1e-3, atol=1e-3, equal_nan=True)
            verdict = f"{'matches' if close else 'DIFFERS from'} its golden (max |diff| {(got - want).abs().max():.3g})"
        print(f"ptogym.interp pass verify: {kernel} argument {index} {verdict}; the interpreter has no compiler "
              f"passes, so only the final values are compared", file=sys.stderr)
