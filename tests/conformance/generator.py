"""Random small op-chain kernels for the differential tests.

``random_spec(choose)`` builds a chain spec (``programs.py``) from a *chooser*: the
same function serves the fixed-seed sample recorded against real pypto
(``SeededChoices``) and hypothesis' property tests (``DrawnChoices``, which
shrinks).  A generated kernel has 2-D or 3-D shapes with ragged leading dims, a
random vector tile, a float dtype, runs whole or in a row loop (optionally over a
dynamic axis), and 1-5 steps: unary math, binary ops with broadcasting, tensor-scalar
ops, last-axis reductions (keepdim) and casts between float types.
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
