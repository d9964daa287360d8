"""Every op form × input dtype combination of ``result_dtype_forms.py`` through ``ptogym.interp``,
against real pypto 0.2.0's recorded verdict (``fixtures/result_dtypes_pypto.json``,
``scripts/record_result_dtypes.py``): where pypto builds the op the interpreter gives the
same result dtype and shape; where pypto refuses it the interpreter refuses it too.
``-m pypto`` re-traces a few forms through real pypto live."""
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


def _loop():
    from ptogym.interp.frontend import _loop_body
    return _loop_body()


def _verdict(entry) -> str:
    return "refused" if isinstance(entry, str) else f"{entry[0]} {entry[1]}"


@pytest.mark.parametrize("name", list(FORMS))
def test_result_dtype_and_shape_match_real_pypto(name):
    form = FORMS[name]
    mismatches = []
    for dts in form.combinations():
        recorded = RECORDED.get(key(form, dts))
        assert recorded is not None, f"{key(form, dts)}: not recorded; run scripts/record_result_dtypes.py {name}"
        got = interp_result(form, dts)
        if _verdict(got) != _verdict(recorded):
            mismatches.append(f"{','.join(dts)}: pypto {recorded!s:.90} | interp {got!s:.120}")
    assert not mismatches, f"{len(mismatches)} combination(s) differ:\n" + "\n".join(mismatches)


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
