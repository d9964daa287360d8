"""Every op form x input dtype combination of ``result_dtype_forms.py`` through ``ptogym.interp``,
against real pypto 0.2.0's recorded verdicts (``scripts/record_result_dtypes.py``):

* graph level (``fixtures/result_dtypes_pypto.json``): where both build the op, the same result
  dtype and shape; where pypto's graph builder refuses it, the interpreter refuses it too;
* compiled (``fixtures/result_dtypes_compiled_pypto.json``): each combination the graph builder
  accepts, compiled and run by pypto: refused where its compiler refuses it, run where it
  compiles, bitwise equal where its CPU run computed the output.

Each remaining difference is named below, exactly.  ``-m pypto`` re-traces a form through real
pypto live."""
import contextlib
import importlib.util
import json
import pathlib
import warnings

import pytest
import torch

import ptogym.interp as pypto
from ptogym.interp import runtime
from ptogym.interp.tensor import Tensor
from interp_helpers import assert_same, decode_entry, recorder_output
from ptogym.interp.checks import ConstraintViolation
from result_dtype_forms import FORMS, TORCH_DTYPES, input_values, kernel_source, key, load_kernel_module

FIXTURE = pathlib.Path(__file__).parent / "fixtures" / "result_dtypes_pypto.json"
RECORDED = json.loads(FIXTURE.read_text())
COMPILED = json.loads((FIXTURE.parent / "result_dtypes_compiled_pypto.json").read_text())


def _input(shape, dtype_name: str, seed: int) -> Tensor:
    """A parameter holding small non-negative values (valid indices, no domain errors)."""
    dtype = getattr(pypto, dtype_name)
    g = torch.Generator().manual_seed(seed)
    data = torch.randint(0, 4, shape, generator=g).to(dtype.torch)
    record = runtime.StorageRecord(f"t{seed}", "param", tuple(shape))
    param = Tensor(list(shape), dtype, f"t{seed}", _data=data, _record=record,
                   _region=tuple(slice(0, n) for n in shape))
    param.owns_storage = True
    return param


def interp_result(form, dts):
    """What the interpreter makes of the form: ``[dtype, shape]`` or ``"error: ..."``."""
    run = runtime.KernelRun("result_dtype")
    runtime.push(run)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # advice is not a verdict here
            pypto.set_vec_tile_shapes(16, 64)
            pypto.set_cube_tile_shapes([16, 16], [32, 32], [16, 16])
            inputs = {f"t{i}": _input(shape, dt, i) for i, (shape, dt) in enumerate(zip(form.shapes, dts))}
            with _loop():
                value = eval(form.expression, {"pypto": pypto}, inputs)  # noqa: S307 - the form's own text
        return [value.dtype.name, [int(d) for d in value.shape]]
    except Exception as exc:  # noqa: BLE001 - a refusal is the datum
        return f"error: {type(exc).__name__}: {exc}"
    finally:
        runtime.pop()


@contextlib.contextmanager
def _loop():
    """Inside one loop body, where ops on dynamic shapes may run."""
    run = runtime.current()
    run.loop_depth += 1
    try:
        yield
    finally:
        run.loop_depth -= 1


# Where the interpreter still differs from pypto's graph builder, each difference named
# exactly (a change on either side fails the test): result dtypes pypto gives that the
# interpreter does not (yet) ...
KNOWN_DTYPE_DIFFERENCES = {
    # pypto's graph says DT_INT64; a kernel moving the result into a DT_INT32 out computes int32
    # values (fixtures/api_ops.pt cumsum_int32, one_hot_int32), which is what the interpreter gives
    "cumsum|DT_INT16": "DT_INT64", "cumsum|DT_INT32": "DT_INT64",
}


def _outcomes(form):
    """(key, pypto's entry, the interpreter's) for each combination of the form."""
    for dts in form.combinations():
        recorded = RECORDED.get(key(form, dts))
        assert recorded is not None, f"{key(form, dts)}: not recorded; run scripts/record_result_dtypes.py"
        yield key(form, dts), recorded, interp_result(form, dts)


@pytest.mark.parametrize("name", list(FORMS))
def test_result_dtype_and_shape_match_real_pypto(name):
    """Where both build the op, the same dtype and shape, but for the named differences."""
    differing = {}
    for k, recorded, got in _outcomes(FORMS[name]):
        if not isinstance(recorded, str) and not isinstance(got, str) and recorded != got:
            assert recorded[1] == got[1], f"{k}: shape {got[1]}, pypto {recorded[1]}"
            differing[k] = recorded[0]
    assert differing == {k: v for k, v in KNOWN_DTYPE_DIFFERENCES.items() if k.split("|")[0] == name}


@pytest.mark.parametrize("name", list(FORMS))
def test_what_pypto_refuses_the_interpreter_refuses(name):
    """Every combination pypto's graph builder refuses, the interpreter refuses too."""
    unrefused = [f"{k}: {recorded}" for k, recorded, got in _outcomes(FORMS[name])
                 if isinstance(recorded, str) and not isinstance(got, str)]
    assert not unrefused, "\n".join(unrefused)


def test_every_recorded_entry_is_a_form():
    known = {key(form, dts) for form in FORMS.values() for dts in form.combinations()}
    assert set(RECORDED) == known, sorted(set(RECORDED) ^ known)[:10]


# --- the same combinations compiled and run: real pypto's compiler and CPU run against the interpreter ---
# Values within a stated bound of pypto's ...
WITHIN_BOUND = {
    **{f"{op}|DT_FP32": "pypto's fp32 sin/cos are a range reduction + polynomial (pypto/operator.py); torch's "
                        "agree within 2 ulp (tests/conformance: sin_*, cos_*)" for op in ("sin", "cos")},
    "var|DT_FP32": "pypto sums (x - mean)^2 in another order: 4 of 8 results 1 ulp off",
}
ULPS = 2
# ... and the remaining differences, each named (one that goes away, or a new one, fails the test).
KNOWN_COMPILED_DIFFERENCES = {
    **{f"cast_to_{dt}|{dt}": "a same-dtype cast: pypto's CPU run leaves the output unwritten (zeros; as for "
                             "`cast_fp32_fp32_rint` in tests/conformance); the interpreter returns the input"
       for dt in ("DT_FP32", "DT_FP16", "DT_BF16", "DT_INT8", "DT_INT16", "DT_INT32", "DT_INT64", "DT_UINT8",
                  "DT_BOOL")},
}


def interp_compiled(form, dts, directory):
    """The recorded kernel of the combination on the interpreter: ``("accepted", out)`` or
    ``("rejected", message)`` for a named check; any other error propagates (a test failure)."""
    result = RECORDED[key(form, dts)]
    module = load_kernel_module(kernel_source(form, dts, result), directory / f"k_{abs(hash(key(form, dts)))}.py")
    out = torch.zeros(result[1], dtype=getattr(torch, TORCH_DTYPES[result[0]]))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # advice is not a verdict here
            module.build(pypto)(*input_values(form, dts), out)
    except ConstraintViolation as exc:
        return "rejected", str(exc)
    return "accepted", out


def _compiled_disagreement(k, entry, verdict, got):
    """Why the interpreter's outcome differs from real pypto's compiled run, or None."""
    if entry["verdict"] == "rejected" and entry["stage"] == "compile":
        return None if verdict == "rejected" else f"pypto refuses it ({entry['error'][:120]}); the interpreter runs it"
    if verdict == "rejected":  # pypto compiled it (its cost model may lack the op: no numbers then)
        return f"pypto compiles it; the interpreter refuses: {got[:160]}"
    if "output" not in entry:
        return None  # compiled, but pypto's CPU run gave no numbers (F92001: no pipe for the opcode) or died
    ref = decode_entry(entry["output"])
    if k in WITHIN_BOUND:
        ulp = torch.finfo(ref.dtype).eps * ref.abs().clamp_min(1)
        return None if bool(((got - ref).abs() <= ULPS * ulp).all()) else f"beyond {ULPS} ulp"
    try:
        assert_same(got, ref)
    except AssertionError as exc:
        return f"values differ: {str(exc)[:160]}"
    return None


COMPILED_FORMS = sorted({k.split("|")[0] for k in COMPILED})


@pytest.mark.parametrize("name", COMPILED_FORMS)
def test_compiled_kernel_agrees_with_real_pypto(name, tmp_path):
    """Each combination pypto's graph builder accepts, compiled and run by real pypto 0.2.0
    (fixtures/result_dtypes_compiled_pypto.json): where its compiler refuses it, the interpreter
    refuses it with a named check; where it compiles, the interpreter runs it; where pypto's CPU
    run computed the output, the interpreter's is bitwise equal (but for the named bounds)."""
    form = FORMS[name]
    disagreements = {}
    for dts in form.combinations():
        k = key(form, dts)
        if k in COMPILED:
            why = _compiled_disagreement(k, COMPILED[k], *interp_compiled(form, dts, tmp_path))
            if why:
                disagreements[k] = why
    known = {k for k in KNOWN_COMPILED_DIFFERENCES if k.split("|")[0] == name}
    unexpected = {k: why for k, why in disagreements.items() if k not in known}
    assert not unexpected, "\n".join(f"{k}: {why}" for k, why in unexpected.items())
    assert set(disagreements) == known, f"named differences gone: {sorted(known - set(disagreements))}"


def test_every_graph_accepted_combination_was_compiled():
    accepted = {k for k, v in RECORDED.items() if not isinstance(v, str)}
    assert accepted == set(COMPILED), sorted(accepted ^ set(COMPILED))[:10]


LIVE = ["add"]


@pytest.mark.pypto
@pytest.mark.skipif(importlib.util.find_spec("pypto") is None, reason="the real pypto package is not installed")
@pytest.mark.parametrize("name", LIVE)
def test_recorded_result_dtypes_still_hold_live(name):
    live = recorder_output("record_result_dtypes.py", "--child", name)
    assert live == {k: RECORDED[k] for k in live}
