"""Kernel execution state: the running kernel, its tile settings, parameters,
workspace tensors and loops.  One ``KernelRun`` lives for one jit call; outside any
kernel a module-level run holds the global settings (as pypto's config does).

Each thread has its own stack of running kernels (kernels may run concurrently from
several threads); every stack starts from the one process-wide ``GLOBAL_RUN``, whose
settings a kernel copies when it starts."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

import torch

from .checks import advise


@dataclass
class StorageRecord:
    """Bookkeeping for a kernel parameter or a ``pypto.tensor`` workspace.

    ``written`` is a coverage mask over the storage (allocated on first write);
    it proves reads of workspaces are initialised and outputs fully written.
    """

    name: str
    kind: str  # "param" | "local"
    shape: tuple
    viewed: bool = False
    assembled: bool = False
    moved_in: object = None  # the loop body (KernelRun.loop_body) of its last move (C-GRAPH-02)
    read: bool = False
    written: torch.Tensor | None = None
    fully_written: bool = False
    alias: object = None  # aliasing.Alias: a parameter whose memory the caller passed for another too
    shadow: object = None  # sanitizer.Place: where the sanitizer follows its accesses (sanitize mode only)

    def __post_init__(self):
        self.whole = tuple(slice(0, n) for n in self.shape)  # the region of the whole storage

    def mark_written(self, region, device) -> None:
        if self.fully_written:
            return
        if region == self.whole:  # no mask needed from here on
            self.fully_written = True
            return
        if self.written is None:
            self.written = torch.zeros(self.shape, dtype=torch.bool, device=device)
        self.written[region] = True

    def unwritten_count(self, region=None) -> int:
        if self.fully_written:
            return 0
        if self.written is None:
            return _numel(self.shape) if region is None else -1
        mask = self.written if region is None else self.written[region]
        # min over the bytes: ~25x faster than bool.all() on CPU (hot: every output, every workspace read)
        return 0 if mask.numel() == 0 or bool(mask.view(torch.uint8).min()) else int((~mask).sum())

    def first_unwritten(self, region=None) -> list[int]:
        mask = self.written if region is None else self.written[region]
        return [int(i) for i in (~mask).nonzero()[0]]


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


@dataclass
class LoopInfo:
    name: str
    first: int | None
    last: int | None
    rows_per_index: int | None = None  # loop_unroll: factor * step elements per index (A-LOOP-02)


@dataclass
class KernelRun:
    name: str
    loop_depth: int = 0  # pypto.loop / loop_unroll bodies currently executing
    loop_iterations: int = 0  # loop iterations begun so far: the L-LOOP-02 budget, and the stamp of accesses to aliased parameters
    loop_body: object = "kernel body"  # the body executing now: a token per pypto.loop run, or the kernel's own
    vec_tile: tuple | None = None
    cube_tile: tuple | None = None  # ((m0, m1), (k0, k1), (n0, n1), split_k)
    options: dict = field(default_factory=dict)
    records: list = field(default_factory=list)
    semantic_label: str | None = None
    dims: dict = field(default_factory=dict)  # named dynamic dim -> bound value
    device: torch.device | None = None  # where the kernel's tensor arguments live
    sanitizer: object = None  # sanitizer.Sanitizer of this call, in sanitize mode

    def check_outputs(self, location: str) -> None:
        """A-OUT-01: a parameter the kernel writes without reading it is an output; one
        it neither reads nor writes is an output left alone or a dead input.  On a device
        the elements not written keep the caller's values (pypto writes into the
        caller's tensors), so this is advice, not an error."""
        for record in self.records:
            if record.kind != "param" or record.read:
                continue
            if not record.assembled and record.written is None and not record.fully_written:
                advise("A-OUT-01", f"parameter {record.name} {list(record.shape)} is never read or written",
                       location)
                continue
            missing = record.unwritten_count()
            if missing:
                advise("A-OUT-01", f"output {record.name} {list(record.shape)}: {missing} element(s) never "
                                   f"written, first at index {record.first_unwritten()}", location)


GLOBAL_RUN = KernelRun(name="<global>")


_thread = threading.local()  # .runs: this thread's kernels, innermost last (GLOBAL_RUN first)
_thread.runs = [GLOBAL_RUN]  # the importing thread's; another thread's begins at its first kernel


def current() -> KernelRun:
    try:
        return _thread.runs[-1]
    except AttributeError:  # a thread that never ran a kernel (a plain local: the fastest lookup)
        return GLOBAL_RUN


def in_kernel() -> bool:
    return len(getattr(_thread, "runs", ())) > 1


def push(run: KernelRun) -> None:
    try:
        _thread.runs.append(run)
    except AttributeError:
        _thread.runs = [GLOBAL_RUN, run]


def pop() -> None:
    _thread.runs.pop()
