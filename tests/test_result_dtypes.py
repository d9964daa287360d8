"""Every op form × input dtype combination of ``result_dtype_forms.py`` through ``ptogym.interp``,
against real pypto 0.2.0's recorded verdict (``fixtures/result_dtypes_pypto.json``,
``scripts/record_result_dtypes.py``): where both build the op, the same result dtype and
shape; where pypto refuses it, the interpreter refuses it too; each remaining difference
is named below, exactly.  Combinations pypto's graph builder accepts but the interpreter
refuses are not judged here: pypto may still refuse them when it compiles (the check
probes and fixtures/api_ops.pt record that per kernel).  ``-m pypto`` re-traces a form
through real pypto live."""
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
from interp_helpers import recorder_output
from result_dtype_forms import FORMS, key

FIXTURE = pathlib.Path(__file__).parent / "fixtures" / "result_dtypes_pypto.json"
RECORDED = json.loads(FIXTURE.read_text())


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
    # pypto computes these in fp32 for integer inputs; the interpreter keeps the input dtype
    **{f"{form}|{dt}": "DT_FP32" for form in ("cbrt", "exp2", "expm1", "pow_float_scalar")
       for dt in ("DT_INT16", "DT_INT32")},
    **{f"copysign|{dt},{dt}": "DT_FP32" for dt in ("DT_INT16", "DT_INT32")},
    **{f"pow|{dt},{dt}": "DT_FP32" for dt in ("DT_INT8", "DT_INT16", "DT_INT64", "DT_UINT8")},
    # pypto's graph says DT_INT64; a kernel moving the result into a DT_INT32 out computes int32
    # values (fixtures/api_ops.pt cumsum_int32, one_hot_int32), which is what the interpreter gives
    "cumsum|DT_INT16": "DT_INT64", "cumsum|DT_INT32": "DT_INT64", "one_hot|DT_INT32": "DT_INT64",
    # pypto's logical_not of a non-bool tensor is DT_BOOL; the interpreter keeps the input dtype
    **{f"logical_not|{dt}": "DT_BOOL" for dt in ("DT_FP32", "DT_FP16", "DT_BF16", "DT_INT8", "DT_UINT8")},
}
# ... and refusals of pypto's graph builder the interpreter does not (yet) make, by pypto's error
KNOWN_UNREFUSED = {
    "Errcode: FC0001": "an operand dtype the op's graph builder does not take (bool, 8-bit or 64-bit ints for "
                       "some ops)",
    "Errcode: FFFFFF": "expm1 of a bool, 8-bit or 64-bit integer tensor",
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
    """Every combination pypto's graph builder refuses, the interpreter refuses too, but for
    the named kinds of refusal."""
    unrefused = [f"{k}: {recorded}" for k, recorded, got in _outcomes(FORMS[name])
                 if isinstance(recorded, str) and not isinstance(got, str)
                 and not any(kind in recorded for kind in KNOWN_UNREFUSED)]
    assert not unrefused, "\n".join(unrefused)


def test_every_recorded_entry_is_a_form():
    known = {key(form, dts) for form in FORMS.values() for dts in form.combinations()}
    assert set(RECORDED) == known, sorted(set(RECORDED) ^ known)[:10]


LIVE = ["add"]


@pytest.mark.pypto
@pytest.mark.skipif(importlib.util.find_spec("pypto") is None, reason="the real pypto package is not installed")
@pytest.mark.parametrize("name", LIVE)
def test_recorded_result_dtypes_still_hold_live(name):
    live = recorder_output("record_result_dtypes.py", "--child", name)
    assert live == {k: RECORDED[k] for k in live}
