"""``pypto.Tensor`` for the interpreter, and the data-movement ops that define
where tiles come from and go to: ``view``, slicing, ``assemble``, ``out[...] =``,
``move``, ``reshape``.

A Tensor has a *static* ``shape`` (what the compiled graph sees: ints, or symbols
for a parameter's dynamic dims) and ``data``, a torch tensor holding its *valid*
region (a tail tile declared [64, H] with 10 valid rows holds 10 rows), so every
op computes on exactly the data a device would treat as valid.
Views of parameters are torch views: no copies, and in-place aliasing between
formal parameters behaves as memory does.
"""
from __future__ import annotations

import math
import weakref

import torch

from . import dtypes, runtime, sanitizer, trace
from .checks import advise, violation
from .symbolic import SymbolicScalar, concrete_difference, value_of


class Tensor:
    """Annotation (``pypto.Tensor([DYNAMIC, 128], DT_FP32)`` outside a kernel), kernel
    parameter, workspace (``pypto.tensor(...)`` inside a kernel) or op result."""

    __slots__ = ("data", "_shape", "dtype", "name", "record", "region", "cache_policy", "spec_shape", "owns_storage",
                 "segment",
                 "__weakref__")

    def __init__(self, shape=None, dtype=None, name: str = "", format=None, data_ptr=None,
                 device=None, ori_shape=None, *, _data=None, _record=None, _region=None):
        if dtype is not None and not isinstance(dtype, dtypes.DataType):
            # real pypto's Tensor constructor (pybind) takes only a DataType and raises TypeError too
            try:
                hint = f"; pypto's name for it is pypto.{dtypes.from_torch(dtype).name}"
            except TypeError:  # not a torch dtype with a pypto twin
                hint = ""
            raise TypeError(f"pypto.Tensor(dtype={dtype!r}): expected a pypto DataType such as pypto.DT_FP32, "
                            f"got {type(dtype).__module__}.{type(dtype).__name__}{hint}")
        self.spec_shape = shape  # as written: an annotation's rank rule depends on it (frontend)
        self._shape = list(shape) if shape is not None else (list(_data.shape) if _data is not None else [])
        self.dtype = dtype if dtype is not None else (dtypes.from_torch(_data.dtype) if _data is not None else None)
        self.name = name
        self.data = _data
        self.record = _record
        self.region = _region
        self.cache_policy = None
        self.owns_storage = False  # a parameter or pypto.tensor itself, not a view or result
        self.segment = None  # sanitize mode: the sanitizer's segment that computed this value (op results)
        if _data is None and runtime.in_kernel():
            self._allocate_workspace(device)

    def _allocate_workspace(self, device) -> None:
        """``pypto.tensor`` inside a kernel: uninitialised on a device, so poisoned here
        and tracked until written (C-MEM-01)."""
        for i, dim in enumerate(self._shape):  # pypto takes ints and symbols (its Tensor converts them to_syms)
            if not isinstance(dim, (int, SymbolicScalar)) or isinstance(dim, bool):
                violation("C-TILE-06", f"pypto.tensor {self.name!r} dim {i} is {dim!r}; workspace shapes must be "
                                       "ints or symbolic scalars")
        shape = [value_of(d) for d in self._shape]
        torch_dtype = self.dtype.torch
        self.data = torch.empty(shape, dtype=torch_dtype, device=device or _default_device())
        run = runtime.current()
        if run.sanitizer is not None:  # integers get a sentinel too, so a missed read shows in results
            sanitizer.poison(self.data)
        elif torch_dtype.is_floating_point:
            self.data.fill_(float("nan"))
        self.record = runtime.StorageRecord(self.name or "pypto.tensor", "local", tuple(shape))
        self.region = tuple(slice(0, n) for n in shape)
        self.owns_storage = True
        run.records.append(self.record)
        if run.sanitizer is not None:
            run.sanitizer.bind_workspace(self.record, self.data)

    @classmethod
    def __class_getitem__(cls, params):
        """``pypto.Tensor[[DYNAMIC, 128], DT_FP32]`` annotations: shape list, dtype, name."""
        shape = dtype = None
        name = ""
        for param in params if isinstance(params, tuple) else (params,):
            if isinstance(param, (list, tuple)):
                shape = list(param)
            elif isinstance(param, dtypes.DataType):
                dtype = param
            elif isinstance(param, str):
                name = param
            elif isinstance(param, dict):
                shape, dtype, name = param.get("shape", shape), param.get("dtype", dtype), param.get("name", name)
        return cls(shape, dtype, name)

    # --- attributes pypto exposes --------------------------------------------------
    @property
    def shape(self) -> list:
        return list(self._shape)

    @property
    def valid_shape(self) -> list:
        return [d if isinstance(d, SymbolicScalar) or v == d else SymbolicScalar(v, f"valid({self.name})")
                for d, v in zip(self._shape, self.data.shape)]

    def dim(self) -> int:
        return len(self._shape)

    @property
    def format(self):
        """Memory layout; the interpreter's tensors are all ND (row-major).  The
        ``pypto.TileOpFormat`` member when the namespace has that enum, else its name."""
        import ptogym.interp as namespace
        enum = getattr(namespace, "TileOpFormat", None)
        return "TILEOP_ND" if enum is None else enum.TILEOP_ND

    def set_cache_policy(self, policy, value=True) -> None:
        self.cache_policy = (policy, value)

    def get_cache_policy(self, policy=None):
        return self.cache_policy

    def __repr__(self) -> str:
        return f"Tensor({self.name or '?'}, shape={self._shape}, dtype={self.dtype})"

    # --- reading and writing by index ----------------------------------------------
    def __getitem__(self, key):
        if _is_whole(key):  # pypto: t[:] is t itself
            return self
        key = _normalize_key(self, key)
        if all(not isinstance(k, slice) for k in key):
            return _read_element(self, key)
        offsets, shape, dropped = _slice_view(self, key)
        tile = view(self, shape, offsets)
        if dropped:
            keep = [d for i, d in enumerate(tile._shape) if i not in dropped]
            tile = _derived(tile, tile.data.reshape([n for i, n in enumerate(tile.data.shape) if i not in dropped]), keep)
        return tile

    def __setitem__(self, key, value) -> None:
        if _is_whole(key) and isinstance(value, Tensor):  # pypto: t[:] = v is t.move(v)
            self.move(value)
            return
        key = _normalize_key(self, key)
        offsets = [(0 if k.start is None else k.start) if isinstance(k, slice) else k for k in key]
        dropped = {axis for axis, k in enumerate(key) if not isinstance(k, slice)}
        if len(dropped) == len(key):  # one element (pypto: SetTensorData)
            value = Tensor(_data=torch.full([1] * len(key), value_of(value) if isinstance(value, SymbolicScalar)
                                            else value, dtype=self.dtype.torch, device=self.data.device))
            _write(value, offsets, self, op="element")
            return
        elif not isinstance(value, Tensor):
            fill = torch.full(_extent_after(self, offsets), value, dtype=self.dtype.torch, device=self.data.device)
            value = Tensor(_data=fill)
        elif dropped:
            data = value.data
            for i in sorted(dropped):
                data = data.unsqueeze(i)
            value = Tensor(_data=data)
        _write(value, offsets, self, op="__setitem__")

    def __matmul__(self, other: "Tensor") -> "Tensor":
        """``a @ b``: pypto.matmul into b's float dtype, or DT_INT32 for int8."""
        from .ops import matmul
        out_dtype = dtypes.DT_INT32 if other.dtype is dtypes.DT_INT8 else other.dtype
        if out_dtype not in (dtypes.DT_FP16, dtypes.DT_BF16, dtypes.DT_FP32, dtypes.DT_INT32):
            raise RuntimeError(f"a @ b: unsupported dtype {other.dtype}")  # pypto's own wording: "unsupported dtype"
        return matmul(self, other, out_dtype)

    def move(self, other: "Tensor") -> None:
        """``out.move(x)``: x becomes the content of out."""
        if not isinstance(other, Tensor):
            raise TypeError(f"'{type(other).__name__}' type cannot be moved to Tensor")
        if self.owns_storage:  # a parameter or workspace: the data lands in its memory
            if isinstance(other, ScatteredRows) and other.write_rows_into(self):
                return
            _write(other, [0] * self.dim(), self, op="move")
            return
        # a view or result is a value of the graph, not memory: it now *is* other (loop-carried
        # state: ``state = params[i]; ... state[:] = new_state`` leaves params untouched)
        note_operand(other)
        self.data, self._shape, self.dtype = other.data, list(other._shape), other.dtype
        self.record, self.region, self.segment = other.record, other.region, other.segment


def _default_device():
    """Kernel-created tensors live with the kernel's arguments (CPU outside a kernel)."""
    return runtime.current().device or torch.device("cpu")


def _derived(src: Tensor, data: torch.Tensor, shape) -> Tensor:
    """A tensor sharing src's storage bookkeeping (views, reshapes)."""
    derived = Tensor(shape, src.dtype, src.name, _data=data, _record=src.record, _region=src.region)
    derived.segment = src.segment
    return derived


def wrap(data: torch.Tensor, dtype=None, shape=None) -> Tensor:
    """An op result: fresh data, no storage bookkeeping."""
    if dtype is None or shape is None:
        result = Tensor(shape, dtype, _data=data)
    else:  # (hot: every op's result) what Tensor(shape, dtype, _data=data) sets, without its argument handling
        result = object.__new__(Tensor)
        result.spec_shape, result._shape, result.dtype, result.name, result.data = shape, list(shape), dtype, "", data
        result.record = result.region = result.cache_policy = result.segment = None
        result.owns_storage = False
    if sanitizer.active:  # the sanitizer follows values carried from one segment to another
        result.segment = sanitizer.produced()
    if trace.recorders:  # ptogym bisect is recording op results
        trace.record(result)
    return result


def _is_whole(key) -> bool:
    keys = key if isinstance(key, tuple) else (key,)
    return all(isinstance(k, slice) and k == slice(None) for k in keys)


def _normalize_key(t: Tensor, key) -> tuple:
    """``t[key]`` as one entry per axis (pypto's rules: ``...`` expands, missing axes are
    whole, negative Python ints count from the end)."""
    key = key if isinstance(key, tuple) else (key,)
    if any(k is Ellipsis for k in key):
        i = key.index(Ellipsis)
        key = key[:i] + (slice(None),) * (t.dim() - len(key) + 1) + key[i + 1:]
    key = key + (slice(None),) * (t.dim() - len(key))
    if len(key) != t.dim():
        violation("C-VIEW-02", f"index with {len(key)} entries on rank-{t.dim()} tensor {t.name!r}")
    normalized = []
    for k, dim in zip(key, t._shape):
        if isinstance(k, slice):
            if k.step not in (None, 1):
                violation("C-API-06", f"slice step {k.step} on axis {len(normalized)}; only contiguous slices exist")
            k = slice(_from_end(k.start, dim), _from_end(k.stop, dim))
        else:
            k = _from_end(k, dim)
        normalized.append(k)
    return tuple(normalized)


def _from_end(index, dim):
    return dim + index if _is_int(index) and index < 0 and _is_int(dim) else index


def _slice_view(t: Tensor, key):
    """View offsets and shape of a slicing key, and the int-indexed axes to drop.  A
    slice may start and stop at runtime values when its length is still a constant."""
    offsets, shape, dropped = [], [], set()
    for axis, (k, dim) in enumerate(zip(key, t._shape)):
        if isinstance(k, slice):
            start = 0 if k.start is None else k.start
            stop = dim if k.stop is None else k.stop
        else:
            start, stop = k, k + 1
            dropped.add(axis)
        length = concrete_difference(stop, start)
        if length is None:
            violation("C-TILE-06", f"slice on axis {axis} of {t.name!r}: length {_fmt1(stop)} - {_fmt1(start)} "
                                   f"depends on runtime values; a view shape must be a constant (use pypto.view "
                                   f"with valid_shape)")
            length = value_of(stop) - value_of(start)
        offsets.append(start)
        shape.append(length)
    return offsets, shape, dropped


def _read_element(t: Tensor, key) -> SymbolicScalar:
    """``t[i, j]`` with only indices: one element of a DT_INT32 tensor, a runtime scalar
    usable as an offset or loop bound (pypto: GetTensorData)."""
    if t.dtype is not dtypes.DT_INT32:
        violation("C-API-06", f"{t.name or 'tensor'}[{', '.join(_fmt1(k) for k in key)}]: reading one element "
                              f"needs a DT_INT32 tensor, got {t.dtype}")
    region = tuple(slice(value_of(k), value_of(k) + 1) for k in key)
    _note_read(t, region, "element")
    value = int(t.data[tuple(value_of(k) for k in key)])
    return SymbolicScalar(value, f"{t.name or 'tensor'}[{', '.join(str(_fmt_index(k)) for k in key)}]")


def _fmt_index(k) -> str:
    return k.expr if isinstance(k, SymbolicScalar) else str(k)


def _extent_after(t: Tensor, offsets) -> list[int]:
    return [n - value_of(o) for n, o in zip(t.data.shape, offsets)]


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def view(input: Tensor, shape=None, offsets=None, *, valid_shape=None, dtype=None) -> Tensor:
    """``pypto.view``: a [shape] tile of input at offsets; valid_shape marks how much of
    it holds data (a tail tile).  shape must be Python ints (C-TILE-06); offsets and
    valid_shape may be symbolic."""
    rank = input.dim()
    shape = list(input._shape) if shape is None else list(shape)
    offsets = [0] * rank if offsets is None else list(offsets)
    for i, d in enumerate(shape):
        if not _is_int(d):
            violation("C-TILE-06", f"view shape[{i}] of {input.name!r} is {d!r}; view shapes must be Python ints "
                                   f"(dynamic extents go in valid_shape)")
    if len(shape) != rank or len(offsets) != rank or (valid_shape is not None and len(valid_shape) != rank):
        violation("C-VIEW-02", f"view of rank-{rank} {input.name!r}: shape {shape}, offsets {_fmt(offsets)}, "
                               f"valid_shape {_fmt(valid_shape)}")
    shape = [value_of(d) for d in shape]
    _check_unrolled_extent(input, shape, offsets)
    valid = shape if valid_shape is None else [value_of(v) for v in valid_shape]
    region = []  # the data a view holds: what is valid in the source (and, in lenient mode, in bounds)
    for axis, (offset, size, extent, declared, n) in enumerate(zip(offsets, shape, valid, input._shape,
                                                                     input.data.shape)):
        start = value_of(offset)
        if start < 0 or extent < 0:
            violation("C-VIEW-03", f"view of {input.name!r} axis {axis}: offset {_fmt1(offset)}, "
                                   f"valid {_fmt1(extent)}, shape {size}")
        elif extent > size:
            advise("A-VIEW-03", f"view of {input.name!r} axis {axis}: valid {_fmt1(extent)} > shape {size} "
                                f"(offset {_fmt1(offset)}): pypto computes on the valid shape")
        # bounds: the source's static shape (a tail tile's buffer is whole; only its data is partial);
        # past them pypto clips the view's valid shape (GetViewValidShapeDim), and so does the region below
        if start + extent > max(value_of(declared), n):
            source = [max(value_of(d), m) for d, m in zip(input._shape, input.data.shape)]
            advise("A-VIEW-01", f"view of {input.name!r} axis {axis}: offset {_fmt1(offset)} + extent "
                                f"{extent} > {source[axis]} (source {source}, view shape {shape}, "
                                f"valid_shape {_fmt(valid_shape)}): clipped to the source")
        region.append(slice(start, max(start, min(start + extent, n))))
    region = tuple(region)
    _note_read(input, region, "view")
    data = input.data[region]
    if dtype is not None and dtype is not input.dtype:
        data = data.contiguous().view(dtype.torch)
        shape[-1] = shape[-1] * int(input.dtype.nbytes) // int(dtype.nbytes)
    result = Tensor(shape, dtype or input.dtype, input.name, _data=data, _record=input.record,
                    _region=_compose(input.region, region))
    result.segment = input.segment
    return result


def _check_unrolled_extent(input: Tensor, shape, offsets) -> None:
    """A-LOOP-02: at a loop_unroll index a view usually covers what one index stands for
    (pypto computes exactly the view given, so rows may be skipped: advice)."""
    for axis, offset in enumerate(offsets):
        loop = offset.loop if isinstance(offset, SymbolicScalar) else None
        if loop is not None and loop.rows_per_index is not None and shape[axis] != loop.rows_per_index:
            advise("A-LOOP-02", f"view of {input.name!r} at {offset.expr}={offset.value} ({loop.name}) spans "
                                f"{shape[axis]} on axis {axis}, but each index of that loop covers "
                                f"{loop.rows_per_index}; size the view with the unroll factor")


def _note_read(t: Tensor, region, how: str) -> None:
    record = t.record
    if record is None:
        return
    record.read = True
    if record.shadow is not None:  # sanitize mode: S-RACE-02 and S-UNINIT-01 stand for A-ALIAS-01 and C-MEM-01
        absolute = _compose(t.region, region)
        if absolute is not None:
            runtime.current().sanitizer.read(record, absolute)
    elif record.alias is not None:
        _note_aliased(record, _compose(t.region, region), "read", f"{how} of {record.name!r}")
    if how == "view" and record.kind == "param":
        record.viewed = True
        if record.assembled:
            violation("C-GRAPH-01", f"parameter {record.name!r} is viewed after being assembled into")
    if record.kind == "local" and not record.fully_written and record.shadow is None:
        absolute = _compose(t.region, region)
        missing = record.unwritten_count(absolute)
        if missing < 0:  # the workspace was never written at all: garbage, and pypto refuses it (measured)
            violation("C-MEM-01", f"read of {record.name!r} region {_fmt_region(absolute)}: nothing written to "
                                  f"{record.name!r} yet")
        elif missing:  # tail-tile code reads the unwritten rest; harmless only if it feeds invalid data
            advise("A-MEM-01", f"read of {record.name!r} region {_fmt_region(absolute)}: {missing} element(s) "
                               f"never written, first at {record.first_unwritten(absolute)}")


def note_operand(t: Tensor) -> None:
    """Ops call this on every tensor operand (workspace reads are checked; in sanitize mode a
    value another segment computed makes this segment depend on that one)."""
    if t.record is not None:
        _note_read(t, tuple(slice(0, n) for n in t.data.shape), "operand")
    elif t.segment is not None and runtime.current().sanitizer is not None:
        runtime.current().sanitizer.depend(t.segment)


def _compose(outer, inner):
    if outer is None:
        return None
    return tuple(slice(o.start + i.start, o.start + i.stop) for o, i in zip(outer, inner))


def assemble(*args, parallel: bool = False) -> None:
    """``pypto.assemble(src, offsets, dst)`` or ``pypto.assemble([(src, offsets), ...], dst)``."""
    if isinstance(args[0], (list, tuple)):
        pieces, dst = args
        for src, offsets in pieces:
            _write(src, offsets, dst, op="assemble")
    else:
        src, offsets, dst = args
        _write(src, offsets, dst, op="assemble")


def _write(src: Tensor, offsets, dst: Tensor, op: str) -> None:
    rank = dst.dim()
    if len(offsets) != rank or src.data.dim() != rank:
        violation("C-ASSEMBLE-02", f"{op} rank-{src.data.dim()} tile at offsets {_fmt(offsets)} into rank-{rank} "
                                   f"{dst.name!r}")
    if src.dtype is not dst.dtype and op != "move":  # a move converts, as C converts (probes move_*_into_*)
        violation("C-API-01", f"{op} of a {src.dtype} tile into {dst.dtype} {dst.name!r}; cast first")
    extent = list(src.data.shape)
    limit = list(dst.data.shape)
    region, clipped = [], False
    for axis, (offset, e, n) in enumerate(zip(offsets, extent, limit)):
        start = value_of(offset)
        if start < 0 or start + e > n:
            violation("C-ASSEMBLE-01", f"{op} into {dst.name!r} axis {axis}: offset {_fmt1(offset)} + tile "
                                       f"{e} > {n} (tile {extent}, destination {limit})")
            clipped = True  # only lenient() gets here: the part inside the destination is written
        region.append(slice(start, min(start + e, n)))
    region = tuple(region)
    data = src.data[tuple(slice(0, max(0, r.stop - r.start)) for r in region)] if clipped else src.data
    ScatteredRows.settle_all_on(dst.data)
    if dst.record is not None and dst.record.shadow is not None:  # before the copy: is it the same value?
        absolute = _compose(dst.region, region)
        if absolute is not None:
            runtime.current().sanitizer.write(dst.record, absolute, same=lambda: dst.data[region] == data)
    dst.data[region].copy_(data)
    _note_write(dst, region, op, sanitized=True)
    if trace.recorders:  # ptogym bisect follows values into memory
        trace.note_write(src, dst, op)


def _note_write(dst: Tensor, region, op: str, rows: torch.Tensor | None = None, sanitized: bool = False) -> None:
    """Storage bookkeeping of a write into dst's region (assemble, move, element); ``rows``:
    the rows of dst's [-1, last dim] view a scatter wrote, all its region stands for;
    ``sanitized``: the sanitizer has seen the write already."""
    record = dst.record
    if record is None:
        return
    if op != "element":  # SetTensorData is no assemble
        if record.kind == "param":
            record.assembled = True
            if record.viewed:
                violation("C-GRAPH-01", f"parameter {record.name!r} is both viewed and assembled into")
            elif op != "move" and record.read:  # a move after a read is fine (x[:] = f(x), measured)
                violation("C-GRAPH-01", f"parameter {record.name!r} is assembled into after being read")
        _note_move_or_assemble(record, op)
    if record.shadow is not None:
        absolute = _compose(dst.region, region)
        if absolute is not None and not sanitized:
            runtime.current().sanitizer.write(record, absolute, rows)
    elif record.alias is not None:
        _note_aliased(record, _compose(dst.region, region), "write", f"{op} into {record.name!r}")
    record.mark_written(_compose(dst.region, region), dst.data.device)


def _note_move_or_assemble(record, op: str) -> None:
    """C-GRAPH-02: pypto refuses an assemble (``pypto.assemble``, ``t[a:b] = v``) into a
    parameter or workspace after a move (``t[:] = v``) into it in the same function - the
    kernel's body or one loop's - and accepts an assemble then a move, or a move and an
    assemble in different loops' bodies (probes ``graph_*``)."""
    body = runtime.current().loop_body
    if op == "move":
        record.moved_in = body
    elif record.moved_in is body:
        what = "parameter" if record.kind == "param" else "workspace"
        violation("C-GRAPH-02", f"{what} {record.name!r}: {op} after a move into it in the same loop body "
                                f"(pypto F21005: \"mix assemble and common operation for same output\")")


def _note_aliased(record, region, access: str, what: str) -> None:
    """A-ALIAS-01 bookkeeping of an access to a parameter that shares the caller's memory."""
    alias = record.alias
    box = alias.box(region)
    if box is not None:
        getattr(alias.memory, access)(alias.slot, box, runtime.current().loop_iterations, what)


class ScatteredRows(Tensor):
    """``pypto.scatter_update``'s value - ``base`` with ``rows`` in place of its rows
    ``index`` (rows along the last axis, leading axes flattened) - computed on first read.

    The KV-cache pattern (AT-16, ``cache.move(pypto.scatter_update(cache, -2, slots,
    rows))``) moves it straight back into the tensor it updates: ``Tensor.move`` then
    writes only those rows, where computing the value would copy the whole cache twice
    per block.  Any other write into the memory of the base, the index or the rows
    computes the pending values on it first (``settle_all_on``, called by every write),
    so a value read later is what it was at the scatter.
    """

    __slots__ = ("_base", "_index", "_rows", "_value")
    _pending: weakref.WeakSet = weakref.WeakSet()

    def __init__(self, base: torch.Tensor, index: torch.Tensor, rows: torch.Tensor, dtype, shape):
        super().__init__(shape, dtype, _data=base)  # Tensor.__init__ stores base through the setter below
        self._base, self._index, self._rows, self._value = base, index, rows, None
        ScatteredRows._pending.add(self)

    @property
    def data(self) -> torch.Tensor:
        if self._value is None:
            value = self._base.reshape(-1, self._rows.shape[-1]).clone()
            value[self._index] = self._rows
            self._value = value.reshape(self._base.shape)
            ScatteredRows._pending.discard(self)
        return self._value

    @data.setter
    def data(self, value: torch.Tensor) -> None:
        self._value = value

    @classmethod
    def settle_all_on(cls, storage: torch.Tensor, *, but: "ScatteredRows | None" = None) -> None:
        """Compute every pending value (but *but*) whose base, index or rows share
        *storage*'s memory: called before that memory is written."""
        if not cls._pending:  # (hot: every write asks)
            return
        memory = storage.untyped_storage().data_ptr()
        for pending in list(cls._pending):
            if pending is not but and pending._value is None and memory in pending._memory():
                pending.data  # noqa: B018 - computing it is the point

    def _memory(self) -> set:
        """Where the pending value's inputs live: a write there must compute it first."""
        return {t.untyped_storage().data_ptr() for t in (self._base, self._index, self._rows)}

    def write_rows_into(self, dst: Tensor) -> bool:
        """``dst.move(self)`` while self is pending on dst's own (contiguous) data: write
        the rows alone and return True; False leaves the move to ``_write``.  Afterwards
        the value is dst's data as it now is, still pending: a later write into dst
        computes it first, if it is still referenced."""
        base = dst.data
        if self._value is not None or self._base is not base or not base.is_contiguous():
            return False
        ScatteredRows.settle_all_on(base, but=self)
        base.view(-1, self._rows.shape[-1])[self._index] = self._rows
        written = self._index
        self._index, self._rows = self._index[:0], self._rows[:0]
        _note_write(dst, tuple(slice(0, n) for n in base.shape), "move", rows=written)
        if trace.recorders:  # ptogym bisect follows values into memory
            trace.note_write(self, dst, "move")
        return True


def reshape(input: Tensor, shape, *, valid_shape=None, inplace: bool = False) -> Tensor:
    """``pypto.reshape``; inplace=True shares storage (and its bookkeeping) with input.
    A tail tile (data smaller than its shape) reshapes its valid data to valid_shape."""
    if inplace:  # pypto passes an in-place reshape the shape alone: valid_shape is ignored (operation.py)
        valid_shape = None
    dims = [value_of(d) for d in (shape if valid_shape is None else valid_shape)]
    data = input.data
    if not inplace and data.numel() != math.prod(dims):
        # a tail tile reshaped to a full shape takes its whole buffer along: the part past
        # the valid data is undefined (NaN, as for any op reading a tile's padding)
        from .ops._common import pad_undefined

        data = pad_undefined("reshape", data, [value_of(d) for d in input.shape])
    data = data.reshape(dims)
    if inplace:
        result = Tensor(list(shape), input.dtype, input.name, _data=data, _record=input.record,
                        _region=None if input.record is None else input.region and _reshape_region(input, dims))
        result.owns_storage = input.owns_storage
        return result
    note_operand(input)
    return wrap(data.clone(), input.dtype, list(shape))


def _reshape_region(input: Tensor, dims):
    """Bookkeeping for an in-place reshape: only whole-storage reshapes keep tracking."""
    full = tuple(slice(0, n) for n in input.record.shape)
    if input.region == full:
        input.record.shape = tuple(dims)
        if input.record.written is not None:
            input.record.written = input.record.written.reshape(dims)
        return tuple(slice(0, n) for n in dims)
    return None


def _fmt1(x) -> str:
    return f"{x.expr}={x.value}" if isinstance(x, SymbolicScalar) else repr(x)


def _fmt(xs) -> str:
    return "None" if xs is None else "[" + ", ".join(_fmt1(x) for x in xs) + "]"


def _fmt_region(region) -> str:
    return "[" + ", ".join(f"{r.start}:{r.stop}" for r in region) + "]"
