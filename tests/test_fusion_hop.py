"""Why the fused RMSNorm + Linear kernel cannot beat the chain of its atom kernels in
pypto 0.2.0's cost model when both do the same cube work (``ptogym/ops/rms_norm_linear/README.md``,
"Why the fused kernel cannot beat this chain here"): the fused kernel's vector -> cube
dependency costs the simulated AICPU several µs of polling and successor resolution
inside the kernel's first-to-last window, while the chain's kernels pay their start-up
before their first task.  At level0 (8 tokens, 256 -> 128) the work is tiny, so the
window is mostly that latency.  If a pypto version makes the dependency cheap, this
fails: the fused kernel's tuning and the README's reasoning must then be revisited.
Cost model only; ~10 s and < 1 GB per simulation."""
import importlib.util

import pytest
import torch

from ptogym.backends import get_backend
from ptogym.backends._pypto_worker import stop_workers
from ptogym.ops import get_op
from ptogym.verify.cases import load_cases
from ptogym.verify.runner import make_case_inputs

pytestmark = [pytest.mark.pypto, pytest.mark.slow,
              pytest.mark.skipif(importlib.util.find_spec("pypto") is None,
                                 reason="the real pypto package is not installed")]
#: the smallest vector -> cube latency measured in the traces (level0: 2.8 µs), less a margin
MIN_HOP_US = 2.0


def _simulate(op_name, inputs, attrs):
    sim = get_backend("pypto-sim")
    sim.max_compute_elements = 0
    try:
        with sim.cost_only():
            _, report = get_op(op_name).run(inputs, attrs, sim)
    finally:
        stop_workers()
    return report


def test_the_vector_to_cube_dependency_costs_more_than_a_kernel_boundary():
    spec = get_op("rms_norm_linear")
    case = next(c for c in load_cases(spec.cases_path, spec) if c.id == "level0")
    inputs = make_case_inputs(spec, case)
    eps = case.attrs.get("eps", 1e-6)
    fused = _simulate("rms_norm_linear", inputs, case.attrs)
    norm = _simulate("rms_norm", {"x": inputs["x"], "gamma": inputs["gamma"]}, {"eps": eps})
    normed = torch.empty_like(inputs["x"])
    linear = _simulate("linear", {"x": normed, "weight": inputs["weight"]}, {})
    # the same cube work in both (one cube stage on the same tiles), so the fused window
    # exceeds the chain's summed windows by the dependency latency
    assert fused.simulated_us >= norm.simulated_us + linear.simulated_us + MIN_HOP_US, (
        fused.simulated_us, norm.simulated_us, linear.simulated_us)
    # timed as whole kernels the chain pays one more start-up, about what the latency costs
    whole_chain = norm.extra["kernel_us"] + linear.extra["kernel_us"]
    assert abs(fused.extra["kernel_us"] - whole_chain) < MIN_HOP_US, (fused.extra["kernel_us"], whole_chain)
