"""Named constraint checks, and the one rule that decides what each of them is.

**The rule.**  Real pypto 0.2.0 is the specification.  A check is an *error*
(``C-*`` id, raises ``ConstraintViolation``) only when

* real pypto rejects the kernel (its parser, an op's argument validation, a pass) or
  never finishes compiling it, or
* a recorded pypto result shows garbage although pypto lets the kernel through: an
  argument whose dtype does not match its annotation (pypto checks that only in its
  CHECKATTR debug mode, and otherwise reads the memory as the annotated dtype, past
  the end of a narrower one: probe ``arg_dtype``).

Anything else, however likely to go wrong on a device, is advice.

An output written only in part is advice, not an error: pypto writes into the caller's
tensors, so the rest keeps the caller's values on a device as here.

Documented guidance that pypto accepts and computes correctly (e.g. "reduce in
FP32") is *advice* (``A-*`` id): a ``ConstraintWarning`` shown once per kernel site
(file:line), silenced per id with ``silence("A-...")`` or ``PTOGYM_SILENCE=A-...,A-...``.
``ptogym interp --checks`` lists every id with its class.  Every check's verdict is
backed by the same kernel run through real pypto (``tests/check_probes.py``,
``tests/fixtures/checks_pypto.json``).

``lenient()`` turns errors into warnings too (for exploring foreign code); the
interpreter then carries on like pypto would.  A verdict earned that way is not a
plain pass: the tools judge under ``watching_leniency()`` and say so.

*Resource limits* (``L-*`` ids, ``LIMITS``) are neither: they bound what the
interpreter itself will do (a loop's trip count: pypto's ``loop`` builds one loop node
whatever the count, so pypto compiles a loop of 2**40 iterations, which the
interpreter would run for days).  Exceeding one raises ``ResourceLimitExceeded``,
strict or lenient; each bound is set by its environment variable or ``set_limit()``.

Threads: ``lenient()`` applies to the thread that enters it (``PTOGYM_LENIENT`` to
every thread); ``silence`` is process-wide, and each advice site is shown once per
process whichever thread reaches it first.
"""
from __future__ import annotations

import contextlib
import os
import sys
import threading
import warnings
from dataclasses import dataclass

CHECKS = {
    "C-ARG-01": "kernel argument must match its pypto.Tensor annotation (type, dtype, static dims)",
    "C-ARG-02": "kernel tensor arguments must be contiguous and on one device",
    "C-LOOP-01": "an op on a tensor with a dynamic dim must run inside a pypto.loop (operate on its views)",
    "C-LOOP-02": "a symbolic loop bound needs pypto.loop, not Python range()",
    "C-LOOP-03": "a symbolic scalar cannot be a Python int, bool or container index",
    "C-LOOP-07": "is_loop_begin/is_loop_end take a loop index of an enclosing pypto.loop",
    "C-LOOP-09": "a loop's step must be non-zero (and not negative below its stop: pypto never finishes either) "
                 "and loop_unroll factors non-zero ints",
    "C-TILE-03": "a vector op's tiles must fit the platform's unified buffer (UB)",
    "C-TILE-04": "pypto.sum's input tile, its result rows and its reduction buffer must fit UB",
    "C-TILE-05": "cube tiles need 0 < L0 <= L1 and L1 % L0 == 0 on m, k and n, nL0 and kL0 * dtype bytes 32-byte "
                 "aligned, within L0/L1 capacity",
    "C-TILE-06": "tile/view shapes must be Python ints, and a tile shape must be set before the op",
    "C-TILE-08": "the vector tile rank must be at least the rank of the op's tensors (its leading entries apply)",
    "C-TILE-09": "a reduction along the last axis needs the vector tile's last dim x dtype bytes 32-byte aligned "
                 "(pypto: FC1001 \"the tileShape of last axis need to 32Byte align\")",
    "C-TILE-10": "pypto.one_hot needs the vector tile's last dim equal to num_classes (pypto: FC1000 \"The "
                 "numClasses and last axis of tileshape should be equal\")",
    "C-VIEW-02": "shape, offsets and valid_shape must have the source's rank",
    "C-VIEW-03": "view offsets and valid_shape entries must be >= 0",
    "C-ASSEMBLE-01": "an assembled tile must lie inside its destination",
    "C-ASSEMBLE-02": "assemble offsets must have the destination's rank and the tile its rank",
    "C-GRAPH-01": "one formal parameter cannot be both viewed and assembled into, nor assembled into after it is "
                  "read (graph cycle, pypto: F21007 \"Operation already in a group\")",
    "C-GRAPH-02": "a parameter or workspace is not assembled into (pypto.assemble, out[a:b] = v) after a move "
                  "into it (out[:] = v, out.move(v)) in the same loop body (pypto: F21005 \"mix assemble and "
                  "common operation for same output\")",
    "C-MEM-01": "a pypto.tensor must be written before it is read",
    "C-API-01": "elementwise operands must share one dtype",
    "C-API-02": "matmul input dtypes must pair (fp16/bf16/fp32 alike, int8 -> int32/fp32/fp16/bf16, fp8 via "
                "scaled_mm)",
    "C-API-03": "broadcast operands need dims that are equal or 1 (a lower-rank operand is aligned right), "
                "each operand expanding on one axis at most",
    "C-API-06": "invalid argument value for a PyPTO op",
    "C-API-07": "the op does not accept this operand dtype (pypto 0.2.0 rejects the kernel)",
    "C-SYNTAX-01": "a jit kernel (and a @pypto.frontend.function body) uses only what pypto's parser accepts: no "
                   "nested def/lambda/class, while, break, continue, with, try, return, for-else, import, "
                   "keyword-only parameters, no built-in min/max, conditional expression (`a if c else b`), "
                   "and/or/not or assert on runtime values, `if` tests that are a bool or a symbolic scalar (not an "
                   "int, None or tensor), and no `from __future__ import annotations` in its module",
    "C-FRONT-01": "pypto.frontend.jit, pypto.frontend.function and pypto.cond take only pypto 0.2.0's parameters "
                  "(jit: host/codegen/pass/runtime/verify/debug_options, infer_controlflow_shape, use_cache; "
                  "function: none; cond: file and lineno together)",
    "C-FRONT-02": "a kernel's and a function's tensor parameters come first, without defaults; a "
                  "@pypto.frontend.function is called with every parameter, positionally, a Tensor for each "
                  "pypto.Tensor annotation",
}

#: Documented guidance real pypto accepts: warnings, once per site, silenceable per id.
ADVICE = {
    "A-DIV-01": "an integer ceil_div / fmod / remainder by zero has no defined value: pypto's CPU run gives "
                "the dtype's minimum for ceil_div (and cannot run fmod/remainder: its cost model has no MOD/REM "
                "pipe), a device what its vector unit gives; the interpreter gives the dtype's minimum",
    "A-OUT-01": "an output parameter the kernel writes only partly (or never) keeps the caller's values "
                "elsewhere; write every element unless that is meant",
    "A-LOOP-01": "loop_unroll factors should be positive and divide each other, and the step the range: "
                 "pypto ignores negative factors, and its sub-loops (left = (stop - start) % (step * factor)) "
                 "otherwise skip or repeat iterations",
    "A-TILE-02": "a vector tile's last dim should be 32-byte aligned (tile_last * dtype_bytes % 32 == 0); "
                 "pypto pads an unaligned one",
    "A-LOOP-02": "a view at a loop_unroll index should span the unrolled factor (factor * step) on that axis",
    "A-MEM-01": "read only the written part of a pypto.tensor: the rest is uninitialised on a device (fine "
                "only when it feeds data outside every valid_shape)",
    "A-LOOP-03": "a pypto.loop with a negative step runs zero times in pypto 0.2.0, whatever its bounds; count "
                 "upwards and compute the index",
    "A-FRONT-01": "pypto.loop / loop_unroll read only name, idx_name, unroll_list and submit_before_loop; pypto "
                  "ignores any other keyword (a misspelt one, say) without a word",
    "A-FRONT-02": "a kernel called with host_options compile_stage other than ALL_COMPLETE only compiles (up to "
                  "that stage) in pypto and runs nothing: its arguments keep their values",
    "A-ALIAS-01": "two kernel arguments over one memory: an element written through one should not be read "
                  "through the other, nor read in one loop iteration and written through the other in another: "
                  "pypto's CPU run gives each parameter its own buffer (reads see the caller's values), a device "
                  "does not order the two (a race)",
    "A-ARG-03": "a named dynamic dim should bind the same value in every argument: pypto does not compare the "
                "bindings, so a kernel sized by one argument reads another past its end or only in part",
    "A-ARG-04": "a tensor argument's rank should match its annotation: pypto compares them only in its CHECKATTR "
                "debug mode, else the kernel sees the tensor's own rank (the annotation's dynamic axes by "
                "position) and fails only where it uses an axis the tensor lacks",
    "A-VIEW-01": "a view or slice should lie inside its source: pypto clips the part past the source's end (a "
                 "view's valid shape is min(source valid extent - offset, view shape), on the device too), so "
                 "the view holds less data than its shape says",
    "A-VIEW-03": "a view's valid_shape should lie within its shape: pypto computes on the valid shape (its CPU "
                 "run reads the source there), but on a device the tile buffer holds only shape elements",
    "A-VALID-01": "a binary op's result is valid over its first operand's extent: where the second operand's "
                  "valid data is smaller, the result there is undefined on a device (floats carry NaN here, "
                  "integers their type's minimum, bools False)",
    "A-SUM-01": "reduce in DT_FP32 (pypto's documented guidance): pypto.sum on a 16-bit type gives a "
                "16-bit result",
}

#: The sanitizer's findings (``ptogym interp --sanitize``, ``sanitize()``, ``PTOGYM_SANITIZE``; docs/sanitizer.md):
#: what a device would turn into garbage, differently each run, although pypto compiles the kernel.  Checked only
#: in sanitize mode, where they are errors (``--sanitize=warn``: warnings, and the verdict is no plain pass).
SANITIZER = {
    "S-RACE-01": "two iterations that may run at once (nothing pypto tracks orders them) write one element, "
                 "different values",
    "S-RACE-02": "an element written through one parameter is read through another over the same memory, or read "
                 "through one and written through another in another iteration: pypto orders neither pair",
    "S-UNINIT-01": "a read of a pypto.tensor element, or of an output's, that nothing has written yet (device "
                   "memory holds garbage there)",
}

#: Resource limits of the interpreter itself, not rules of pypto (which compiles such
#: kernels): each is an error with its own id, never turned into a warning by lenient()
#: (the kernel would not end), its bound set by an environment variable or set_limit().
LIMITS = {
    "L-LOOP-01": "iterations of one pypto.loop / loop_unroll on the interpreter (checked before the first)",
    "L-LOOP-02": "loop iterations of one kernel call on the interpreter, all loops together (nested loops multiply)",
}
LIMIT_SETTINGS = {"L-LOOP-01": ("PTOGYM_MAX_LOOP_TRIPS", 1 << 20), "L-LOOP-02": ("PTOGYM_MAX_KERNEL_TRIPS", 1 << 24)}
_limit_overrides: dict = {}


class ResourceLimitExceeded(RuntimeError):
    """A kernel exceeds a resource limit of the interpreter (``LIMITS``): ``.check_id``,
    ``.location``, ``.details``."""

    def __init__(self, check_id: str, details: str, location: str):
        self.check_id, self.details, self.location = check_id, details, location
        super().__init__(f"[{check_id}] {location}: {details} (limit: {rule_of(check_id)})")


def limit(check_id: str) -> int:
    """The bound of resource limit *check_id*: set_limit(), else its variable, else the default."""
    if check_id in _limit_overrides:
        return _limit_overrides[check_id]
    variable, default = LIMIT_SETTINGS[check_id]
    text = os.environ.get(variable, "").strip()
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"{variable}={text!r}: use a positive integer ({check_id}: {LIMITS[check_id]})")
    return value


def set_limit(check_id: str, value: int | None) -> None:
    """Set resource limit *check_id* to *value* for this process (None: back to its variable / default)."""
    if check_id not in LIMITS:
        raise ValueError(f"set_limit({check_id!r}): not a limit id; limit ids: {sorted(LIMITS)}")
    if value is None:
        _limit_overrides.pop(check_id, None)
    elif not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"set_limit({check_id!r}, {value!r}): use a positive int")
    else:
        _limit_overrides[check_id] = value


def exceeded(check_id: str, details: str, location: str | None = None) -> None:
    """Raise ResourceLimitExceeded (strict or lenient alike)."""
    raise ResourceLimitExceeded(check_id, details, location or user_location())


_INTERP_DIR = os.path.dirname(os.path.abspath(__file__))
_SKIP_PREFIXES = (_INTERP_DIR, os.path.dirname(contextlib.__file__))


class _ThreadMode(threading.local):
    lenient = os.environ.get("PTOGYM_LENIENT", "") not in ("", "0")  # each thread starts from the variable
    downgraded = 0  # constraint violations lenient mode turned into warnings in this thread, ever


_mode = _ThreadMode()


class ConstraintViolation(ValueError):
    """A PyPTO constraint broken by a kernel: ``.check_id``, ``.location``, ``.details``."""

    def __init__(self, check_id: str, details: str, location: str):
        self.check_id, self.details, self.location = check_id, details, location
        super().__init__(f"[{check_id}] {location}: {details} (rule: {CHECKS.get(check_id) or SANITIZER[check_id]})")


class ConstraintWarning(UserWarning):
    """Advice (``A-*``), or a constraint violation reported in lenient mode."""


def check_class(check_id: str) -> str:
    return ("advice" if check_id in ADVICE else "limit" if check_id in LIMITS else "sanitizer" if check_id in SANITIZER
            else "error")


def rule_of(check_id: str) -> str:
    if check_id in LIMITS:
        variable, default = LIMIT_SETTINGS[check_id]
        return f"{LIMITS[check_id]}: at most {limit(check_id)} (${variable}, default {default})"
    return ADVICE.get(check_id) or SANITIZER.get(check_id) or CHECKS[check_id]


def silenced_by_env(environ=os.environ) -> set:
    """The advice ids ``PTOGYM_SILENCE`` (comma-separated) silences; ValueError naming
    the variable for an id that is not advice (a typo would silence nothing)."""
    ids = {part.strip() for part in environ.get("PTOGYM_SILENCE", "").split(",") if part.strip()}
    unknown = sorted(ids - set(ADVICE))
    if unknown:
        errors = [i for i in unknown if i in CHECKS or i in LIMITS]
        why = f" ({', '.join(errors)}: not advice; lenient() turns errors into warnings)" if errors else ""
        raise ValueError(f"PTOGYM_SILENCE: {', '.join(unknown)} not an advice id{why}; advice ids: "
                         f"{', '.join(sorted(ADVICE))}")
    return ids


_silenced: set | None = None  # read from PTOGYM_SILENCE on first use
_advised: set = set()  # (id, site) already shown
_advised_lock = threading.Lock()


def _silenced_ids() -> set:
    global _silenced
    if _silenced is None:
        _silenced = silenced_by_env()
    return _silenced


def silence(*check_ids: str) -> None:
    """Stop showing the given advice ids (``PTOGYM_SILENCE=A-X,A-Y`` does the same)."""
    for check_id in check_ids:
        if check_id not in ADVICE:
            raise ValueError(f"silence({check_id!r}): not an advice id; advice ids: {sorted(ADVICE)}")
        _silenced_ids().add(check_id)


def unsilence(*check_ids: str) -> None:
    _silenced_ids().difference_update(check_ids)


def advise(check_id: str, details: str, location: str | None = None) -> None:
    """Show documented advice once per (id, kernel site), unless silenced."""
    if check_id in _silenced_ids():
        return
    site = location or user_location()
    with _advised_lock:  # two threads at one site: one warning
        if (check_id, site) in _advised:
            return
        _advised.add((check_id, site))
    message = f"[{check_id}] {site}: {details} (advice: {ADVICE[check_id]})"
    warnings.warn_explicit(message, ConstraintWarning, *_split_site(site))


def _split_site(site: str):
    path, _, line = site.rpartition(":")
    return (path, int(line)) if line.isdigit() else (site, 0)


def user_location() -> str:
    """file:line of the innermost frame outside the interpreter (the user's kernel)."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_SKIP_PREFIXES):
        frame = frame.f_back
    if frame is None:
        return "<unknown>"
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


def violation(check_id: str, details: str, location: str | None = None) -> None:
    """Raise (strict) or warn (lenient) about a broken constraint."""
    error = ConstraintViolation(check_id, details, location or user_location())
    if not _mode.lenient:
        raise error
    downgrade(error)


def downgrade(error: ConstraintViolation) -> None:
    """Report a violation as a warning, counted as downgraded (no plain verdict follows)."""
    _mode.downgraded += 1
    warnings.warn_explicit(str(error), ConstraintWarning, *_split_site(error.location))


def is_lenient() -> bool:
    return _mode.lenient


@dataclass
class Leniency:
    """Whether checks were downgraded while a verdict was earned (``watching_leniency``)."""

    lenient: bool = False  # lenient mode was on, or let a violation through
    downgraded: int = 0  # constraint violations it turned into warnings

    def describe(self) -> str:
        return (f"lenient mode (PTOGYM_LENIENT or lenient()) or --sanitize=warn: {self.downgraded} constraint "
                "violation(s) or sanitizer finding(s) downgraded to warnings; strict checks did not judge this")


@contextlib.contextmanager
def watching_leniency():
    """Yield a Leniency filled in when the block ends: set when lenient mode is on at
    its start or end, or let a violation through inside it."""
    watch, start = Leniency(lenient=_mode.lenient), _mode.downgraded
    try:
        yield watch
    finally:
        watch.downgraded = _mode.downgraded - start
        watch.lenient = watch.lenient or _mode.lenient or watch.downgraded > 0


@contextlib.contextmanager
def lenient(enabled: bool = True):
    """Within the block, constraint violations in this thread warn instead of raising."""
    previous, _mode.lenient = _mode.lenient, enabled
    try:
        yield
    finally:
        _mode.lenient = previous
