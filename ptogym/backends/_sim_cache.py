"""Cached cost-model results of ``pypto-sim``: a second identical ``bench`` takes seconds.

A cost-only launch (``backend.cost_only()``: ``bench``, tuning) is determined by the
kernel source, its static parameters and scalars, the call's shapes, dtypes, aliasing
and the values of its DT_INT32 tensors (the cost model reads the values a kernel reads
as scalars - paged_attention's sequence lengths set its trip counts - and pypto reads
scalars from DT_INT32 tensors only: ``Tensor.__getitem__`` asserts it; float outputs
allocated empty would otherwise make every key new), the build kind, the pypto installation and
ptogym's own backend code.  ``Entry`` is keyed by a digest of all of these; its file
``<cache>/sim-results/<digest>.json`` holds the launch report's fields.  pypto 0.2.0
itself recompiles on every SIM call and cannot reload a compiled program, so compiled
kernels are not cached: a result is.

* Sources: the builder's module file and, transitively, every module it refers to that
  is not part of the Python installation (``ptogym.atoms`` for the operators; a test's own
  helpers), so editing any of them makes a new key.
* Writes are atomic (a temporary file in the same directory, then ``os.replace``), so
  concurrent processes see a whole entry or none; a damaged entry reads as a miss.
* Bounded: after each write the oldest entries (by modification time, refreshed on every
  hit: least recently used) are removed until the folder holds at most
  ``$PTOGYM_SIM_CACHE_MB`` (default 64) megabytes.
* ``--no-cache`` (``PTOGYM_NO_CACHE=1``, ``backend.no_cache``) neither reads nor writes.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import sysconfig
import tempfile
import types
from pathlib import Path

ENV_CACHE_MB = "PTOGYM_SIM_CACHE_MB"
DEFAULT_CACHE_MB = 64
_BACKEND_FILES = ("_pypto_runtime.py", "_pypto_worker.py", "_sim_cache.py", "pypto_sim.py", "base.py")
_INSTALLED = tuple(str(Path(sysconfig.get_paths()[key]).resolve()) for key in ("stdlib", "purelib", "platlib"))
_source_digests: dict[str, str] = {}


def _project_files(module: types.ModuleType, found: set[str]) -> None:
    """``module``'s file and those of the modules it refers to (its imports, the modules
    of the functions and classes it imported), outside the Python installation."""
    file = getattr(module, "__file__", None)
    if not file:
        return
    file = str(Path(file).resolve())
    if file in found or file.startswith(_INSTALLED):
        return
    found.add(file)
    for value in list(vars(module).values()):
        target = value if isinstance(value, types.ModuleType) else sys.modules.get(getattr(value, "__module__", "") or "")
        if target is not None:
            _project_files(target, found)


def source_digest(builder) -> str:
    """Digest of the source files that define ``builder``'s kernel (memoised per module)."""
    name = builder.__module__
    if name not in _source_digests:
        files: set[str] = set()
        _project_files(sys.modules[name], files)
        here = Path(__file__).parent
        files |= {str(here / backend_file) for backend_file in _BACKEND_FILES}
        digest = hashlib.sha256()
        for file in sorted(files):
            digest.update(file.encode() + b"\0" + Path(file).read_bytes() + b"\0")
        _source_digests[name] = digest.hexdigest()
    return _source_digests[name]


def _pypto_identity() -> str:
    from importlib.metadata import PackageNotFoundError, version

    from ._pypto_runtime import pypto_package_dir

    try:
        installed = version("pypto")
    except PackageNotFoundError:
        installed = "?"
    return f"{installed}@{pypto_package_dir()}|{os.environ.get('TILEFWK_CONFIG_PATH', '')}"


def cache_limit_bytes() -> int:
    raw = os.environ.get(ENV_CACHE_MB, "").strip()
    try:
        megabytes = float(raw) if raw else DEFAULT_CACHE_MB
    except ValueError:
        raise ValueError(f"${ENV_CACHE_MB}: {raw!r} is not a number of megabytes") from None
    return int(megabytes * 2**20)


def value_digest(tensor) -> str | None:
    """A digest of an int32 tensor's bytes (what a kernel can read as scalars); None for
    other dtypes."""
    import torch

    if tensor.dtype != torch.int32:
        return None
    data = tensor.detach().contiguous().view(-1).view(torch.uint8)
    return hashlib.blake2b(memoryview(data.numpy()), digest_size=16).hexdigest()


class Entry:
    """The cached result of one cost-only launch (``load`` -> fields or None, ``store``)."""

    def __init__(self, folder: Path, backend_name: str, build: str, builder, static: dict, tensors: list,
                 scalars: dict):
        aliases: dict[int, int] = {}
        described = {
            "backend": backend_name, "build": build, "pypto": _pypto_identity(),
            "builder": f"{builder.__module__}.{builder.__qualname__}", "sources": source_digest(builder),
            "static": static, "scalars": scalars,
            "tensors": [(list(t.shape), str(t.dtype), aliases.setdefault(id(t), len(aliases)), value_digest(t))
                        for t in tensors],
        }
        key = hashlib.sha256(json.dumps(described, sort_keys=True, default=repr).encode()).hexdigest()
        self.folder, self.path = folder, folder / f"{key}.json"

    def load(self) -> dict | None:
        try:
            fields = json.loads(self.path.read_text())
            os.utime(self.path)  # least recently used goes first
        except (OSError, ValueError):
            return None
        return fields if isinstance(fields, dict) and "extra" in fields else None

    def store(self, fields: dict) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=self.folder, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(handle, "w") as file:
                json.dump(fields, file)
            os.replace(temporary, self.path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
        prune(self.folder, cache_limit_bytes())


def prune(folder: Path, limit_bytes: int) -> None:
    """Remove the least recently used entries until ``folder`` holds at most ``limit_bytes``."""
    entries = []
    for path in folder.glob("*.json"):
        with contextlib.suppress(FileNotFoundError):  # another process pruned it meanwhile
            stat = path.stat()
            entries.append((stat.st_mtime, stat.st_size, path))
    total = sum(size for _, size, _ in entries)
    for _, size, path in sorted(entries):
        if total <= limit_bytes:
            break
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        total -= size
