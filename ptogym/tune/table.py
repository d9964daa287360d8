"""Tuned tables: the build parameters an operator runs with, as data.

``<kernel dir>/tuned.json`` holds ``{"op": NAME, "default": {param: value, ...},
"bands": {band: {param: value, ...}, ...}}``.  A call reads ``default``, then each band
its kernel's ``TUNING.band(**shape)`` names (general to specific), later ones
overriding earlier ones - as far as the result can be built for the call's shape: a
band's entry was measured on one level, and another shape in the same band may not
fit it (a vector tile too tall for a wider row, a cube tile past a smaller K), so the
call reads the longest run of its bands whose merged entry ``TUNING.violations``
accepts, and warns once (``UnbuildableBandWarning``) about the bands it left out.
``ptogym tune --apply`` writes winners into the most specific band of the level they
were measured on.  Inside ``override(module, params)`` (a trial) the module's calls
run ``params`` on top of the table instead.

The file is read again whenever it changed (its modification time), so an applied
table takes effect in a running process too.
"""
from __future__ import annotations

import contextlib
import functools
import json
import os
import warnings
from pathlib import Path
from types import ModuleType
from typing import Iterator

from .space import hashable

TABLE_FILE = "tuned.json"
_overrides: dict[str, dict] = {}
_loaded: dict[str, tuple] = {}  # path -> (mtime_ns, table)
_merged: dict[tuple, dict] = {}  # (path, mtime_ns, bands, shape) -> the parameters table_params gives


class TableError(ValueError):
    """A tuned table that cannot be read or does not have the expected form."""


class UnbuildableBandWarning(UserWarning):
    """A band's tuned entry cannot be built for a call's shape; the call runs without it."""


@functools.lru_cache(maxsize=None)
def _table_path(kernel_file: str) -> Path:
    return Path(kernel_file).with_name(TABLE_FILE)


def table_path(kernel: ModuleType) -> Path:
    return _table_path(kernel.__file__)


def load_table(kernel: ModuleType) -> dict:
    return _load(table_path(kernel))[1]


def _load(path: Path) -> tuple:
    """(modification time, table) of the file, read again when it changed."""
    try:
        stamp = os.stat(path).st_mtime_ns
    except OSError as error:
        raise TableError(f"{path}: cannot read the tuned table: {error.strerror}") from None
    cached = _loaded.get(str(path))
    if cached and cached[0] == stamp:
        return cached
    try:
        table = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise TableError(f"{path}: not a readable JSON tuned table ({error})") from None
    if not (isinstance(table, dict) and isinstance(table.get("default"), dict)
            and isinstance(table.get("bands", {}), dict)):
        raise TableError(f"{path}: a tuned table is {{'op', 'default': {{...}}, 'bands': {{band: {{...}}}}}}")
    entry = _loaded[str(path)] = (stamp, table)
    return entry


def table_params(kernel: ModuleType, shape: dict) -> dict:
    """The table's parameters for a call of ``shape`` (no override): see the module
    docstring for how bands that cannot be built for it are left out."""
    path = table_path(kernel)
    stamp, table = _load(path)
    bands = tuple(kernel.TUNING.band(**shape))
    key = (str(path), stamp, bands, tuple(sorted(hashable(shape).items())))
    params = _merged.get(key)
    if params is None:  # (operators ask on every call)
        params = _merged[key] = _buildable(kernel.TUNING, table, bands, shape, path)
    return dict(params)


def _buildable(tuning, table: dict, bands: tuple, shape: dict, path: Path) -> dict:
    entries = [table.get("bands", {}).get(band, {}) for band in bands]
    first_problems = None
    for used in range(len(bands), -1, -1):
        params = dict(table["default"])
        for entry in entries[:used]:
            params.update(entry)
        params = hashable(params)
        problems = tuning.violations(params, shape)
        first_problems = first_problems or problems
        if not problems or used == 0:  # the default is the builder's own rule, whatever the shape
            break
    left_out = [band for band, entry in zip(bands[used:], entries[used:]) if entry]
    if left_out:
        warnings.warn(f"{path}: band {', '.join(left_out)} cannot be built for this call "
                      f"({'; '.join(first_problems)}); it runs "
                      + (f"band {bands[used - 1]}'s entry" if used else "the default"),
                      UnbuildableBandWarning, stacklevel=3)
    return params


def tuned_params(kernel: ModuleType, **shape) -> dict:
    """What a call of ``kernel``'s builder with ``shape`` runs: the table's values for
    its bands, with a trial's override on top."""
    return {**table_params(kernel, shape), **hashable(_overrides.get(kernel.__name__, {}))}


@contextlib.contextmanager
def override(kernel: ModuleType, params: dict) -> Iterator[None]:
    """Calls of ``kernel``'s operator run ``params`` (on top of the table) inside."""
    previous = _overrides.get(kernel.__name__)
    _overrides[kernel.__name__] = dict(params)
    try:
        yield
    finally:
        if previous is None:
            _overrides.pop(kernel.__name__, None)
        else:
            _overrides[kernel.__name__] = previous


def applied_table(kernel: ModuleType, band: str, params: dict) -> dict:
    """The table with ``params`` written into ``band`` (the file itself unchanged)."""
    table = json.loads(json.dumps(load_table(kernel)))  # a deep copy
    bands = table.setdefault("bands", {})
    entry = dict(bands.get(band, {}))
    entry.update(params)
    bands[band] = entry
    return table


def table_text(table: dict) -> str:
    """A table as the files are written: one line per parameter, values compact."""
    def block(params: dict, indent: str) -> str:
        lines = [f"{indent}  {json.dumps(name)}: {json.dumps(value)}" for name, value in params.items()]
        return "{\n" + ",\n".join(lines) + f"\n{indent}}}" if lines else "{}"

    head = [f"  {json.dumps(key)}: {json.dumps(value)}" for key, value in table.items() if key not in ("default", "bands")]
    bands = [f"    {json.dumps(band)}: {block(params, '    ')}" for band, params in table.get("bands", {}).items()]
    body = head + [f'  "default": {block(table["default"], "  ")}',
                   '  "bands": ' + ("{\n" + ",\n".join(bands) + "\n  }" if bands else "{}")]
    return "{\n" + ",\n".join(body) + "\n}\n"
