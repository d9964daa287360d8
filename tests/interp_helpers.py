"""Shared helpers for the ptogym.interp conformance tests.

``kernel_for`` builds a ``@pypto.frontend.jit`` kernel around a tile function without
writing one ``def`` per arity; ``run_op`` runs a tile function on torch tensors and
returns the output; ``assert_same`` compares bit patterns (NaN-aware, -0 != +0);
``round_float_ref``/``round_int_ref`` are independent references for pypto.cast.
"""
import base64
import math
from fractions import Fraction

import torch

import ptogym.interp as pypto
from ptogym.interp.dtypes import from_torch

VEC_TILE = (8, 64)


def spec_of(t: torch.Tensor) -> pypto.Tensor:
    """The static ``pypto.Tensor`` annotation matching a torch tensor."""
    return pypto.Tensor(list(t.shape), from_torch(t.dtype))


def kernel_for(body, specs, **jit_options):
    """A jit kernel with one tensor parameter per spec, calling ``body(*params)`` (a kernel
    in pypto's language: fixed parameters, no return)."""
    names = [f"t{i}" for i in range(len(specs))]
    namespace = {"body": body}
    exec(f"def kernel({', '.join(names)}):\n    body({', '.join(names)})\n", namespace)  # noqa: S102
    kernel = namespace["kernel"]
    kernel.__annotations__ = dict(zip(names, specs))
    kernel.__name__ = getattr(body, "__name__", "kernel")
    return pypto.frontend.jit(kernel, **jit_options)


def run_op(fn, inputs, like, *, tile=VEC_TILE, cube=None):
    """Run ``fn(*input_tiles) -> tile`` in a kernel; write it to an output shaped like
    ``like`` (a torch tensor or (shape, torch dtype)); return that output."""
    if isinstance(like, torch.Tensor):
        out = torch.empty(like.shape, dtype=like.dtype, device=like.device)
    else:
        shape, dtype = like
        out = torch.empty(shape, dtype=dtype)
    out.fill_(0) if not out.dtype.is_floating_point else out.fill_(float("nan"))

    def body(*params):
        *tiles, dst = params
        if tile is not None:
            pypto.set_vec_tile_shapes(*tile)
        if cube is not None:
            pypto.set_cube_tile_shapes(*cube)
        dst[:] = fn(*tiles)

    kernel_for(body, [spec_of(t) for t in inputs] + [spec_of(out)])(*inputs, out)
    return out


_INT_VIEW = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def decode_entry(entry: dict) -> torch.Tensor:
    """A tensor as the recorders encode it (``scripts/record_check_fixtures.encode``)."""
    raw = torch.frombuffer(bytearray(base64.b64decode(entry["base64"])), dtype=torch.uint8)
    return raw.view(getattr(torch, entry["dtype"])).reshape(entry["shape"])


def assert_same(got: torch.Tensor, ref: torch.Tensor) -> None:
    """Same dtype, shape and bits (NaNs only need to be NaN on both sides)."""
    assert got.dtype == ref.dtype, (got.dtype, ref.dtype)
    assert got.shape == ref.shape, (got.shape, ref.shape)
    if got.dtype.is_floating_point:
        nan_g, nan_r = torch.isnan(got.float()), torch.isnan(ref.float())
        assert torch.equal(nan_g, nan_r), f"NaN positions differ: {nan_g.nonzero()[:5]} vs {nan_r.nonzero()[:5]}"
        view = _INT_VIEW[got.element_size()]
        bits_g, bits_r = got.view(view)[~nan_g], ref.view(view)[~nan_r]
        bad = (bits_g != bits_r).nonzero()
        assert bad.numel() == 0, (f"{bad.numel()} element(s) differ; first: got {got[~nan_g][bad[0]].item()!r} "
                                  f"ref {ref[~nan_r][bad[0]].item()!r}")
    else:
        assert torch.equal(got, ref), f"got {got}\nref {ref}"


def ulp_distance(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """|a - b| in units of b's representation (same float dtype, finite values)."""
    assert a.dtype == b.dtype
    view = _INT_VIEW[a.element_size()]

    def ordered(x):
        bits = x.view(view).to(torch.int64)
        return torch.where(bits < 0, -(bits & ((1 << (8 * x.element_size() - 1)) - 1)), bits)
    return (ordered(a) - ordered(b)).abs()


# --- independent rounding references for pypto.cast -----------------------------------
_FORMATS = {  # precision bits p (with the implicit one), emin, emax
    torch.bfloat16: (8, -126, 127),
    torch.float16: (11, -14, 15),
}


def round_float_ref(x: torch.Tensor, target: torch.dtype, mode: str) -> torch.Tensor:
    """Round every element of x (any float dtype) into ``target`` by ``mode`` (a CastMode
    name) using exact fp64 arithmetic on the target's grid - independent of torch's
    own conversions (only exactly representable values are converted at the end)."""
    p, emin, emax = _FORMATS[target]
    w = x.to(torch.float64)
    finite = torch.isfinite(w) & (w != 0)
    safe = torch.where(finite, w, torch.ones_like(w))
    _, exp = torch.frexp(safe)  # |safe| = m * 2**exp, m in [0.5, 1)
    e = torch.clamp(exp - 1, min=emin)
    ulp = torch.pow(torch.full_like(w, 2.0), (e - (p - 1)).to(torch.float64))
    scaled = safe / ulp  # exact: a power-of-two scaling
    k_down, k_up = torch.floor(scaled), torch.ceil(scaled)
    down, up = k_down * ulp, k_up * ulp
    exact = k_down == k_up
    dist_down, dist_up = safe - down, up - safe
    tie = dist_down == dist_up
    nearest_even = torch.where(dist_down < dist_up, down, torch.where(dist_up < dist_down, up,
                                                                        torch.where(k_down % 2 == 0, down, up)))
    if mode in ("CAST_NONE", "CAST_RINT"):
        v = nearest_even
    elif mode == "CAST_ROUND":
        away = torch.where(safe > 0, up, down)
        v = torch.where(tie, away, nearest_even)
    elif mode == "CAST_FLOOR":
        v = down
    elif mode == "CAST_CEIL":
        v = up
    elif mode == "CAST_TRUNC":
        v = torch.where(safe > 0, down, up)
    elif mode == "CAST_ODD":
        v = torch.where(exact, down, torch.where(k_down % 2 == 1, down, up))
    else:
        raise ValueError(mode)
    largest = (2.0 - 2.0 ** (1 - p)) * 2.0 ** emax
    toward_zero = {"CAST_TRUNC": torch.ones_like(w, dtype=torch.bool),
                   "CAST_ODD": torch.ones_like(w, dtype=torch.bool),
                   "CAST_FLOOR": safe > 0, "CAST_CEIL": safe < 0}.get(mode, torch.zeros_like(w, dtype=torch.bool))
    overflow = v.abs() > largest
    v = torch.where(overflow, torch.where(toward_zero, torch.copysign(torch.full_like(w, largest), safe),
                                          torch.copysign(torch.full_like(w, math.inf), safe)), v)
    v = torch.where(v == 0, torch.copysign(torch.zeros_like(w), safe), v)  # a zero keeps x's sign
    v = torch.where(finite, v, w)  # NaN, +-inf and +-0 pass through
    return v.to(target)


def round_int_ref(values, mode: str, lo: int, hi: int) -> list[int]:
    """Float -> integer with a CastMode, saturating to [lo, hi] and NaN -> 0 (exact
    rational arithmetic, one Python int per input value)."""
    result = []
    for v in values:
        if math.isnan(v):
            result.append(0)
            continue
        if math.isinf(v):
            result.append(hi if v > 0 else lo)
            continue
        q = Fraction(v)
        floor = math.floor(q)
        frac = q - floor
        if mode in ("CAST_NONE", "CAST_RINT", "CAST_ODD"):
            n = floor + (1 if frac > Fraction(1, 2) or (frac == Fraction(1, 2) and floor % 2) else 0)
        elif mode == "CAST_ROUND":
            n = math.floor(abs(q) + Fraction(1, 2)) * (1 if q >= 0 else -1)
        elif mode == "CAST_FLOOR":
            n = floor
        elif mode == "CAST_CEIL":
            n = math.ceil(q)
        elif mode == "CAST_TRUNC":
            n = math.trunc(q)
        else:
            raise ValueError(mode)
        result.append(max(lo, min(hi, n)))
    return result


def recorder_output(script: str, *args: str, timeout: int = 300):
    """Run ``scripts/<script>`` with ``args`` (a recorder's live mode, real pypto) and return
    the JSON its last stdout line holds."""
    import json
    import pathlib
    import subprocess
    import sys
    path = pathlib.Path(__file__).parents[1] / "scripts" / script
    done = subprocess.run([sys.executable, str(path), *args], capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])
