"""The README's "Reliability" rules, enforced for every registered operator and backend.

A new operator gets these tests for free: it only has to declare ``attr_names`` and
``writes`` in its ``SPEC`` and call ``ptogym.ops.inplace.check_inplace_arguments``.
"""
from __future__ import annotations

import pytest
import torch

from ptogym import ops
from ptogym.backends import get_backend
from ptogym.backends.base import BackendBase, LaunchReport, OutputsNotComputed
from ptogym.ops.inplace import TORCH_LEAF_MESSAGE, check_inplace_arguments, overlaps
from ptogym.verify.cases import load_cases
from ptogym.verify.runner import make_case_inputs


def smallest_case(spec):
    cases = load_cases(spec.cases_path, spec)
    return min(cases, key=lambda case: sum(t.dtype.itemsize * max(1, _numel(t.shape)) for t in case.inputs.values()))


def _numel(shape) -> int:
    count = 1
    for size in shape:
        count *= size
    return count


# ------------------------------------------------------------------ declarations
@pytest.mark.parametrize("name", ops.OP_NAMES)
def test_every_operator_declares_its_attributes_and_what_it_writes(name):
    spec = ops.get_op(name)
    assert spec.attr_names is not None, f"{name}: SPEC.attr_names must list the case attributes it takes"
    assert set(spec.writes) <= set(spec.input_names), f"{name}: SPEC.writes must name inputs"
    for case in load_cases(spec.cases_path, spec):
        assert set(case.attrs) <= set(spec.attr_names)


# ------------------------------------------------------------------ in-place rule, every operator
def _in_place_params():
    return [(name, written) for name in ops.OP_NAMES for written in ops.get_op(name).writes]


def _alias_into(target: torch.Tensor, like: torch.Tensor) -> torch.Tensor | None:
    """A tensor shaped and typed like *like* whose memory lies inside *target*'s."""
    needed = like.numel() * like.element_size()
    if needed == 0 or needed > target.numel() * target.element_size():
        return None
    raw = target.view(-1).view(torch.uint8) if target.element_size() > 0 else None
    return raw[:needed].view(like.dtype).view(like.shape)


@pytest.mark.parametrize("name, written", _in_place_params())
def test_in_place_operators_refuse_every_overlap_and_write_nothing(name, written):
    """Any other input placed inside a written one's memory is refused with ValueError
    naming both, and every tensor the caller holds stays bitwise unchanged."""
    spec = ops.get_op(name)
    case = smallest_case(spec)
    backend = get_backend("interp")
    for other in spec.input_names:
        if other == written:
            continue
        inputs = make_case_inputs(spec, case)
        alias = _alias_into(inputs[written], inputs[other])
        if alias is None:
            continue
        inputs[other] = alias
        before = {key: value.clone() for key, value in inputs.items()}
        with pytest.raises(ValueError, match=f"shares memory with|{written}|{other}"):
            spec.run(inputs, case.attrs, backend)
        for key, value in inputs.items():
            assert torch.equal(value, before[key]), f"{name}: {key} changed although the call was refused"


@pytest.mark.parametrize("name, written", _in_place_params())
def test_in_place_operators_refuse_leaves_requiring_grad_with_torch_wording(name, written):
    spec = ops.get_op(name)
    case = smallest_case(spec)
    inputs = make_case_inputs(spec, case)
    if not inputs[written].is_floating_point():
        pytest.skip("only floating tensors can require grad")
    inputs[written].requires_grad_()
    before = {key: value.detach().clone() for key, value in inputs.items()}
    with pytest.raises(ValueError, match=TORCH_LEAF_MESSAGE.replace(".", r"\.")):
        spec.run(inputs, case.attrs, get_backend("interp"))
    for key, value in inputs.items():
        assert torch.equal(value.detach(), before[key])


# ------------------------------------------------------------------ the shared helper itself
def test_overlap_is_exact_for_dense_tensors_and_interleaved_views():
    base = torch.zeros(64)
    assert overlaps(base[:32], base[16:48]) and not overlaps(base[:32], base[32:])
    assert overlaps(base, base[::7]) and overlaps(base.view(8, 8).t(), base[5])
    evens, odds = base[0::2], base[1::2]
    assert not overlaps(base[:8], odds[4:])  # the strided view starts past the dense one
    assert overlaps(base[:10], odds[4:])
    assert overlaps(evens, odds)  # neither is dense: overlapping spans count (conservative, documented)
    assert overlaps(base.view(torch.int32)[3], base[3])  # reinterpreted bytes
    assert not overlaps(torch.zeros(4, device="meta"), torch.zeros(4, device="meta"))
    assert not overlaps(base[:0], base)


def test_helper_refuses_written_overlaps_only_and_names_both():
    x, y = torch.zeros(8), torch.zeros(8)
    check_inplace_arguments("op", written={"x": x}, read={"a": y, "b": y})  # read-read sharing is fine
    with pytest.raises(ValueError, match="^b: shares memory with x, which op writes in place"):
        check_inplace_arguments("op", written={"x": x}, read={"a": y, "b": x[2:4]})
    with pytest.raises(ValueError, match="^y: shares memory with x"):
        check_inplace_arguments("op", written={"x": x, "y": x[4:]}, read={})


# ------------------------------------------------------------------ backends: no silent no-op
class _CostOnlyBackend(BackendBase):
    """Runs nothing and says so, like pypto-sim above its compute threshold."""

    name = "cost-only"
    pypto = None

    def compile(self, builder, **static):
        return lambda *tensors, **scalars: None

    def _report(self, wall_s):
        return LaunchReport(backend=self.name, wall_s=wall_s, outputs_valid=False, simulated_us=1.0)


def test_a_launch_without_outputs_raises_unless_cost_only_was_asked_for():
    backend = _CostOnlyBackend()
    with pytest.raises(OutputsNotComputed, match="cost-only: the kernel ran but its outputs were not computed"):
        backend.launch(None, {}, [torch.zeros(2)])
    with backend.cost_only():
        assert backend.launch(None, {}, [torch.zeros(2)]).simulated_us == 1.0
    assert backend.cost_only_mode is False


def test_pypto_sim_refuses_before_compiling_when_it_would_not_compute(monkeypatch):
    from ptogym.backends.pypto_sim import Backend

    sim = Backend()
    sim.max_compute_elements = 4
    monkeypatch.setattr(sim, "compile", lambda *a, **k: pytest.fail("compiled although it cannot compute"))
    with pytest.raises(OutputsNotComputed, match="8 elements > PTOGYM_SIM_MAX_ELEMENTS=4"):
        sim.launch(None, {}, [torch.zeros(8)])
