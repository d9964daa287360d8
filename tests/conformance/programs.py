"""The kernels of the differential corpus, as builders taking the ``pypto`` namespace.

Most cases are *op chains*: a short straight-line program over up to three input
tensors, described by a JSON-able spec so that the corpus and the random generator
share one builder (``build_chain``).  A step is ``[op, args, kwargs]``; inside args
and kwargs ``"$k"`` names value k (the inputs are values 0..n-1, each step appends
one), ``"DT_*"``/``"CastMode.*"``/``"SaturationMode.*"`` name pypto constants,
``{"element": [dtype, value]}`` is a ``pypto.Element``, and a list is resolved element
by element.  The last value is the output.

Two shapes of kernel run a chain:

* ``loop=None``: the whole tensors in one go, ``out.move(result)``;
* ``loop=rows``: ``pypto.loop`` over blocks of ``rows`` along axis 0 (with
  ``dynamic=True`` axis 0 is ``pypto.DYNAMIC``); inputs marked ``tiled`` are viewed
  per block (the last block of a ragged axis has a ``valid_shape`` tail, or, with
  ``clip=True``, is left for pypto to clip), the block result is assembled into out.

Hand-written kernels (``KERNELS``) cover what a chain cannot say: loop-carried
accumulation with ``is_loop_begin``/``is_loop_end``, views at symbolic offsets on
two axes, ``loop_unroll``.

Kernel bodies are parsed by pypto's own front end: every annotation object must be
distinct (pypto names a parameter after its annotation object) and whatever an
annotation refers to must also be referenced in the body (pypto resolves names from
the closure).  ``Chain.run`` is called as a method, so pypto evaluates it as plain
Python instead of inlining it.
"""
import json


class Chain:
    """A resolved chain spec: input annotations, tiles, steps."""

    def __init__(self, pypto, spec: dict):
        self.pypto = pypto
        self.spec = spec
        dynamic = spec.get("dynamic", False)
        self.annotations = []
        for entry in spec["inputs"] + spec["outputs"]:
            shape = list(entry["shape"])
            if dynamic and entry.get("tiled", True):
                shape[0] = pypto.DYNAMIC
            self.annotations.append(pypto.Tensor(shape, getattr(pypto, entry["dtype"])))
        while len(self.annotations) < 4:  # unused inputs keep one kernel signature
            self.annotations.insert(len(spec["inputs"]), pypto.Tensor([1, 8], pypto.DT_FP32))
        self.rows = spec.get("loop")

    def tiles(self) -> None:
        pypto, spec = self.pypto, self.spec
        pypto.set_vec_tile_shapes(*spec["vec_tile"])
        if spec.get("cube_tile"):
            pypto.set_cube_tile_shapes(*spec["cube_tile"])

    def _resolve(self, item, values):
        pypto = self.pypto
        if isinstance(item, dict):  # {"element": [dtype, value]}: a pypto.Element scalar
            dtype, value = item["element"]
            return pypto.Element(getattr(pypto, dtype), self._resolve(value, values))
        if isinstance(item, list):
            return [self._resolve(x, values) for x in item]
        if isinstance(item, str):
            if item.startswith("$"):
                return values[int(item[1:])]
            if item.startswith("DT_"):
                return getattr(pypto, item)
            if item.startswith(("CastMode.", "SaturationMode.")):
                kind, name = item.split(".")
                return getattr(getattr(pypto, kind), name)
            if item in ("inf", "-inf", "nan"):
                return float(item)
        return item

    def run(self, *inputs):
        values = list(inputs[:len(self.spec["inputs"])])
        for op, args, kwargs in self.spec["steps"]:
            fn = getattr(self.pypto, op)
            values.append(fn(*self._resolve(args, values),
                             **{k: self._resolve(v, values) for k, v in kwargs.items()}))
        return values[-1]

    def block(self, i, x, y, z):
        """The chain over block i of the tiled inputs."""
        pypto, rows = self.pypto, self.rows
        blocks = []
        for entry, t in zip(self.spec["inputs"], (x, y, z)):
            if not entry.get("tiled", True):
                blocks.append(t)
                continue
            shape = [rows] + list(entry["shape"][1:])
            offsets = [i * rows] + [0] * (len(shape) - 1)
            if self.spec.get("clip"):
                blocks.append(pypto.view(t, shape, offsets))
            else:
                valid = [pypto.min(rows, t.shape[0] - i * rows)] + shape[1:]
                blocks.append(pypto.view(t, shape, offsets, valid_shape=valid))
        return self.run(*blocks)

    def out_offsets(self, i):
        return [i * self.rows] + [0] * (len(self.spec["outputs"][0]["shape"]) - 1)


def build_chain(pypto, *, spec):
    """A kernel running ``spec`` (JSON text, see the module docstring): kernel(x, y, z, out)."""
    chain = Chain(pypto, json.loads(spec))

    if chain.rows is None:
        @pypto.frontend.jit
        def chain_whole(x: chain.annotations[0], y: chain.annotations[1], z: chain.annotations[2],
                        out: chain.annotations[3]):
            chain.tiles()
            out.move(chain.run(x, y, z))
        return chain_whole

    @pypto.frontend.jit
    def chain_loop(x: chain.annotations[0], y: chain.annotations[1], z: chain.annotations[2],
                   out: chain.annotations[3]):
        chain.tiles()
        rows = chain.rows
        for i in pypto.loop((x.shape[0] + rows - 1) // rows):
            pypto.assemble(chain.block(i, x, y, z), chain.out_offsets(i), out)
    return chain_loop


class Params:
    """A hand-written kernel's spec: its annotations (one object per parameter) and
    values, as attributes the kernel body can reach through its closure."""

    def __init__(self, pypto, spec: str):
        self.spec = json.loads(spec)
        self.annotations = []
        for entry in self.spec["inputs"] + self.spec["outputs"]:
            shape = list(entry["shape"])
            if self.spec.get("dynamic"):
                shape[0] = pypto.DYNAMIC
            self.annotations.append(pypto.Tensor(shape, getattr(pypto, entry["dtype"])))
        self.dtype = getattr(pypto, self.spec["inputs"][0]["dtype"])
        self.shape = self.spec["inputs"][0]["shape"]


def build_accumulate(pypto, *, spec):
    """Row sums of x [rows, cols] accumulated over column blocks in a local fp32 tensor:
    the first block initialises it (is_loop_begin), the last writes out (is_loop_end)."""
    p = Params(pypto, spec)

    @pypto.frontend.jit
    def accumulate(x: p.annotations[0], out: p.annotations[1]):
        rows, cols = p.shape
        block = p.spec["block"]
        pypto.set_vec_tile_shapes(rows, block)
        acc = pypto.tensor([rows, 1], pypto.DT_FP32, "acc")
        for j in pypto.loop(cols // block):
            part = pypto.sum(pypto.cast(pypto.view(x, [rows, block], [0, j * block]), pypto.DT_FP32), -1, keepdim=True)
            if pypto.is_loop_begin(j):
                acc[:] = part
            else:
                acc[:] = pypto.add(acc, part)
            if pypto.is_loop_end(j):
                pypto.assemble(pypto.cast(acc, p.dtype), [0, 0], out)

    return accumulate


def build_tiles_2d(pypto, *, spec):
    """out = (x + y) * x over a 2-D grid of tiles: views at two symbolic offsets, the
    last row of tiles a valid_shape tail."""
    p = Params(pypto, spec)

    @pypto.frontend.jit
    def tiles_2d(x: p.annotations[0], y: p.annotations[1], out: p.annotations[2]):
        tr, tc = p.spec["tile"]
        pypto.set_vec_tile_shapes(tr, tc)
        for i in pypto.loop((x.shape[0] + tr - 1) // tr):
            for j in pypto.loop(p.shape[1] // tc):
                valid = [pypto.min(tr, x.shape[0] - i * tr), tc]
                a = pypto.view(x, [tr, tc], [i * tr, j * tc], valid_shape=valid)
                b = pypto.view(y, [tr, tc], [i * tr, j * tc], valid_shape=valid)
                pypto.assemble(pypto.mul(pypto.add(a, b), a), [i * tr, j * tc], out)

    return tiles_2d


def build_unroll(pypto, *, spec):
    """out = exp(x) - x, rows walked with loop_unroll (each index a block of ``factor`` rows)."""
    p = Params(pypto, spec)

    @pypto.frontend.jit
    def unroll(x: p.annotations[0], out: p.annotations[1]):
        cols = p.shape[1]
        pypto.set_vec_tile_shapes(4, cols)
        for row, factor in pypto.loop_unroll(0, x.shape[0], 1, unroll_list=p.spec["unroll"]):
            a = pypto.view(x, [factor, cols], [row, 0])
            pypto.assemble(pypto.sub(pypto.exp(a), a), [row, 0], out)

    return unroll


def build_function_rows(pypto, *, spec):
    """out = scale * op(x) in row blocks, each through a ``@pypto.frontend.function`` whose
    non-tensor parameters are the block's row offset (symbolic) and the scale."""
    p = Params(pypto, spec)

    @pypto.frontend.function
    def scaled_block(x, out, row, scale):
        rows, cols = p.spec["rows"], p.shape[1]
        block = pypto.view(x, [rows, cols], [row, 0], valid_shape=[pypto.min(rows, x.shape[0] - row), cols])
        pypto.assemble(pypto.mul(getattr(pypto, p.spec["op"])(block), scale), [row, 0], out)

    @pypto.frontend.jit
    def function_rows(x: p.annotations[0], out: p.annotations[1]):
        rows = p.spec["rows"]
        pypto.set_vec_tile_shapes(rows, p.shape[1])
        for i in pypto.loop((x.shape[0] + rows - 1) // rows):
            scaled_block(x, out, i * rows, p.spec["scale"])

    return function_rows


BUILDERS = {"chain": build_chain, "accumulate": build_accumulate, "tiles_2d": build_tiles_2d, "unroll": build_unroll,
            "function_rows": build_function_rows}
