"""Random small op-chain kernels for the differential tests.

``random_spec(choose)`` builds a chain spec (``programs.py``) from a *chooser*: the
same function serves the fixed-seed sample recorded against real pypto
(``SeededChoices``) and hypothesis' property tests (``DrawnChoices``, which
shrinks).  A generated kernel has 2-D or 3-D shapes with ragged leading dims, a
random vector tile, a float dtype, runs whole or in a row loop (optionally over a
dynamic axis), and 1-5 steps: unary math, binary ops with broadcasting, tensor-scalar
ops, last-axis reductions (keepdim) and casts between float types.

``random_area_spec(choose)`` aims at the areas where the interpreter once differed from
real pypto: matmul cube tiles against operand sizes (tiles larger or smaller than the
operands, on every axis), vector tiles of another rank than the tensors, comparison and
logical ops (their bool results, cast or selected from), and ``@pypto.frontend.function``
calls with non-tensor parameters (a symbolic row offset, a float).
"""
import random

FLOATS = ("DT_FP32", "DT_FP16", "DT_BF16")
# bitwise-comparable unary ops only: sin/cos/log1p have a bound (corpus), exp2 cannot be simulated
UNARY = ("exp", "abs", "neg", "relu", "sigmoid", "sqrt", "rsqrt", "log", "log2", "reciprocal", "floor", "ceil",
         "round", "trunc", "sign", "expm1")
BINARY = ("add", "sub", "mul", "div", "maximum", "minimum")
REDUCE = ("sum", "amax", "amin")
SCALARS = (0.5, 2.0, -3.0, 1e-3)


class SeededChoices:
    """Choices from a seeded ``random.Random``: a fixed, reproducible sample."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)

    def pick(self, options):
        return self.rng.choice(list(options))

    def integer(self, low: int, high: int) -> int:
        return self.rng.randint(low, high)


class DrawnChoices:
    """Choices drawn by hypothesis (``st.data()``), so failing kernels shrink."""

    def __init__(self, data):
        from hypothesis import strategies as st

        self.data, self.st = data, st

    def pick(self, options):
        return self.data.draw(self.st.sampled_from(list(options)))

    def integer(self, low: int, high: int) -> int:
        return self.data.draw(self.st.integers(low, high))


def _broadcast(a: list, b: list) -> list:
    return [max(x, y) for x, y in zip(a, b)]


def random_spec(choose, seed: int = 0) -> dict:
    """A random chain spec; ``seed`` seeds its input values."""
    dtype = choose.pick(FLOATS)
    rank = choose.pick((2, 2, 3))
    shape = [choose.integer(1, 20)] + [choose.integer(1, 4) for _ in range(rank - 2)] + [choose.pick((32, 64))]
    tile = [choose.pick((1, 2, 4, 8))] + [choose.pick((1, 2, 4)) for _ in range(rank - 2)] + [choose.pick((16, 32, 64))]
    mode = choose.pick(("whole", "loop", "loop_dynamic"))
    # y broadcasts along a random subset of axes; in a loop an input of one row is not tiled
    y_shape = [1 if choose.integer(0, 3) == 0 else d for d in shape]
    inputs = [{"shape": list(shape), "dtype": dtype, "fill": choose.pick(("normal", "normal", "special"))},
              {"shape": y_shape, "dtype": dtype, "fill": "normal"},
              {"shape": list(shape), "dtype": dtype, "fill": "positive"}]
    if mode != "whole":
        for entry in inputs:
            entry["tiled"] = entry["shape"][0] == shape[0]
    values = [(list(e["shape"]), dtype) for e in inputs]
    steps = []
    current = 0
    for _ in range(choose.integer(1, 5)):
        cur_shape, cur_dtype = values[current]
        kind = choose.pick(("unary", "binary", "binary", "scalar", "reduce", "cast"))
        if kind == "binary":
            partners = [i for i, (s, d) in enumerate(values) if d == cur_dtype and
                        all(x == y or x == 1 or y == 1 for x, y in zip(s, cur_shape))]
            other = choose.pick(partners)
            steps.append([choose.pick(BINARY), [f"${current}", f"${other}"], {}])
            values.append((_broadcast(cur_shape, values[other][0]), cur_dtype))
        elif kind == "scalar":
            steps.append([choose.pick(BINARY), [f"${current}", choose.pick(SCALARS)], {}])
            values.append((cur_shape, cur_dtype))
        elif kind == "reduce":
            steps.append([choose.pick(REDUCE), [f"${current}", -1, True], {}])
            values.append((cur_shape[:-1] + [1], cur_dtype))
        elif kind == "cast":
            target = choose.pick([d for d in FLOATS if d != cur_dtype])
            steps.append(["cast", [f"${current}", target], {}])
            values.append((cur_shape, target))
        else:
            steps.append([choose.pick(UNARY), [f"${current}"], {}])
            values.append((cur_shape, cur_dtype))
        current = len(values) - 1
    out_shape, out_dtype = values[-1]
    out_shape = [shape[0]] + out_shape[1:] if mode != "whole" else out_shape
    spec = {"inputs": inputs, "outputs": [{"shape": out_shape, "dtype": out_dtype}], "vec_tile": tile,
            "steps": steps, "seed": seed}
    if mode != "whole":
        spec["loop"] = tile[0]
        spec["dynamic"] = mode == "loop_dynamic"
    return spec


def sample(count: int, first_seed: int = 1) -> dict:
    """The fixed-seed sample recorded against real pypto: ``gen_NNN`` -> spec."""
    return {f"gen_{seed:03d}": random_spec(SeededChoices(seed), seed) for seed in range(first_seed, first_seed + count)}


AREAS = ("matmul", "vec_rank", "compare", "function")
COMPARE = ("eq", "ne", "lt", "le", "gt", "ge")


def random_area_spec(choose, seed: int = 0) -> dict:
    """A random kernel in one of ``AREAS``; ``seed`` seeds its input values."""
    return {"matmul": _matmul_spec, "vec_rank": _vec_rank_spec, "compare": _compare_spec,
            "function": _function_spec}[choose.pick(AREAS)](choose, seed)


def _matmul_spec(choose, seed: int) -> dict:
    """a [m, k] @ b [k, n] under cube tiles chosen without regard to m, k, n; small integer
    values keep the sums exact, whatever order they are added in."""
    dtype = choose.pick(("DT_BF16", "DT_FP16", "DT_FP32", "DT_INT8"))
    m, k, n = choose.pick((8, 16, 24, 32, 48)), choose.pick((16, 32, 48, 64, 128)), choose.pick((16, 32, 48, 64))
    out = "DT_INT32" if dtype == "DT_INT8" else choose.pick(("DT_FP32", dtype))
    cube = []
    for base in ((16, 32), (16, 32, 64), (16, 32, 64)):
        l0 = choose.pick(base)
        cube.append([l0, l0 * choose.pick((1, 2))])
    values = {"fill": "int", "range": [-3, 4]}
    return {"inputs": [{"shape": [m, k], "dtype": dtype, **values}, {"shape": [k, n], "dtype": dtype, **values}],
            "outputs": [{"shape": [m, n], "dtype": out}], "vec_tile": [16, 64], "cube_tile": cube,
            "steps": [["matmul", ["$0", "$1", out], {}]], "seed": seed}


def _vec_rank_spec(choose, seed: int) -> dict:
    """A generated chain whose vector tile has more dims than its tensors (leading ones
    apply to nothing) or one fewer (refused: C-TILE-08)."""
    spec = random_spec(choose, seed)
    if choose.integer(0, 3) == 0:
        spec["vec_tile"] = spec["vec_tile"][1:]
    else:
        spec["vec_tile"] = [choose.pick((1, 2, 4)) for _ in range(choose.integer(1, 2))] + spec["vec_tile"]
    return spec


def _compare_spec(choose, seed: int) -> dict:
    """A comparison (tensor-tensor or tensor-scalar), then its bool result as it is, cast
    to a float type, negated, combined with another comparison, or selecting with where."""
    dtype = choose.pick(FLOATS + ("DT_INT32",))
    shape = [choose.integer(1, 16), choose.pick((32, 64))]
    fill = "int" if dtype == "DT_INT32" else choose.pick(("normal", "special"))
    inputs = [{"shape": list(shape), "dtype": dtype, "fill": fill, "range": [-4, 5]},
              {"shape": list(shape), "dtype": dtype, "fill": fill, "range": [-4, 5]}]
    other = "$1" if choose.integer(0, 1) else choose.pick((0.5, 2.0, -3.0, 0))
    steps = [[choose.pick(COMPARE), ["$0", other], {}]]
    use = choose.pick(("bool", "cast", "not", "and", "where"))
    out = "DT_BOOL"
    if use == "cast":
        out = choose.pick(FLOATS)
        steps.append(["cast", ["$2", out], {}])
    elif use == "not":
        steps.append(["logical_not", ["$2"], {}])
    elif use == "and":
        steps += [[choose.pick(COMPARE), ["$1", 0], {}], ["logical_and", ["$2", "$3"], {}]]
    elif use == "where":
        out = dtype
        steps.append(["where", ["$2", "$0", "$1"], {}])
    return {"inputs": inputs, "outputs": [{"shape": list(shape), "dtype": out}], "vec_tile": [8, shape[1]],
            "steps": steps, "seed": seed}


def _function_spec(choose, seed: int) -> dict:
    """Row blocks of ``scale * op(x)``, each through a @pypto.frontend.function that takes
    the block's (symbolic) row offset and the scale as non-tensor parameters."""
    dtype = choose.pick(FLOATS)
    shape = [choose.integer(1, 20), choose.pick((32, 64))]
    return {"kernel": "function_rows", "inputs": [{"shape": shape, "dtype": dtype, "fill": "normal"}],
            "outputs": [{"shape": shape, "dtype": dtype}], "rows": choose.pick((1, 2, 4, 8)),
            "op": choose.pick(("exp", "neg", "abs", "sigmoid", "relu")), "scale": choose.pick(SCALARS),
            "dynamic": bool(choose.integer(0, 1)), "seed": seed}


def area_sample(count: int, first_seed: int = 1) -> dict:
    """The fixed-seed sample of ``random_area_spec`` recorded against real pypto: ``area_NNN``."""
    return {f"area_{seed:03d}": random_area_spec(SeededChoices(seed), seed)
            for seed in range(first_seed, first_seed + count)}
