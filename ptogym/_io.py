"""Atomic writes for every report, log and scaffold the tools produce.

A file is written to a temporary file beside it, flushed to disk and renamed over
the target, so a full disk, an error or Ctrl-C midway leaves the previous file as
it was (or no file), never a truncated one.  A directory (``ptogym new``'s package)
is filled under a temporary name and renamed as a whole: it appears complete or
not at all.
"""
from __future__ import annotations

import contextlib
import io
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator


def write_text(path: str | os.PathLike, text: str) -> None:
    """Replace *path* by *text* atomically."""
    write_files({path: text})


def save_figure(figure, path: str | os.PathLike, dpi: int = 120) -> None:
    """A matplotlib figure as a PNG at *path*, atomically (rendered in memory first)."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi)
    write_files({path: buffer.getvalue()})


def write_files(contents: dict) -> None:
    """Replace each path of *contents* by its text (or bytes): every file is written
    and flushed to disk before any is renamed, so a failure leaves the whole set as it
    was (a log and its JSON twin)."""
    staged = []
    try:
        for path, content in contents.items():
            target = Path(path).resolve() if Path(path).is_symlink() else Path(path)  # a link keeps pointing there
            staged.append((_staged(target, content), target))
        for temporary, path in staged:
            os.replace(temporary, path)
    except BaseException:
        for temporary, _ in staged:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
        raise


def _staged(target: Path, content: str | bytes) -> str:
    """*content* in a temporary file beside *target*, on disk; its path (removed on failure)."""
    descriptor, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        binary = isinstance(content, bytes)
        with open(descriptor, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8"})) as handle:
            handle.write(content)
            handle.flush()
            os.fsync(handle.fileno())
        _keep_mode(target, temporary)
        return temporary
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def _keep_mode(target: Path, temporary: str, new_mode: int = 0o666) -> None:
    """The replaced file keeps its permissions; a new one gets *new_mode* less the umask
    (mkstemp and mkdtemp make 0600 / 0700)."""
    try:
        mode = target.stat().st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = new_mode & ~umask
    os.chmod(temporary, mode)


@contextlib.contextmanager
def atomic_directory(target: str | os.PathLike) -> Iterator[Path]:
    """``with atomic_directory(target) as folder: ...`` fills *folder*, a temporary
    directory beside *target*, renamed to *target* when the block succeeds and
    removed with everything in it when it fails.  *target*'s parent must exist;
    FileExistsError if *target* does (also when it appears meanwhile)."""
    target = Path(target)
    if target.exists():
        raise FileExistsError(f"{target} already exists")
    folder = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    try:
        yield folder
        _keep_mode(target, str(folder), new_mode=0o777)
        try:
            os.rename(folder, target)  # refuses a non-empty target on POSIX
        except OSError as error:
            if target.exists():
                raise FileExistsError(f"{target} already exists") from error
            raise
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise



def write_failure(path: str | os.PathLike, error: OSError) -> str:
    """How every tool words a failed write: what, why, and that nothing was replaced."""
    reason = error.strerror or str(error)
    return f"cannot write {path}: {reason}; nothing written (a previous {Path(path).name} is left as it was)"
