"""The MLA prolog's per-group ``cube_nbuffer_setting`` keys name the stages
``kernel.py`` says they do, under real pypto 0.2.0 (its group ids are numbered by the
compiler, so this pins them): at the DeepSeek-V4 shapes with 128-token blocks, merging
group 4 in pairs removes exactly half of q_b's cube tasks and group 5 half of the q
RoPE rotation's.  Cost model only (no numbers computed); ~20 s and ~1.2 GB per simulation."""
import importlib.util

import pytest

from ptogym.atoms.linear import L0C_BYTES
from ptogym.backends import get_backend
from ptogym.backends._pypto_worker import stop_workers
from ptogym.ops import get_op
from ptogym.ops.mla_prolog import kernel
from ptogym.verify.cases import load_cases
from ptogym.verify.runner import make_case_inputs

pytestmark = [pytest.mark.pypto, pytest.mark.slow,
              pytest.mark.skipif(importlib.util.find_spec("pypto") is None,
                                 reason="the real pypto package is not installed")]
TOKENS = 128


def _tasks(spec, inputs, case, nbuffer_pairs) -> int:
    kernel.QUANT_VARIANTS["_groups"] = {"unroll": (TOKENS,), "pass_options": (("cube_nbuffer_setting", nbuffer_pairs),)}
    sim = get_backend("pypto-sim")
    try:
        with sim.cost_only():
            _, report = spec.run(inputs, case.attrs, sim, variant="_groups")
    finally:
        kernel.QUANT_VARIANTS.pop("_groups")
        stop_workers()
    return report.tasks


def test_group_ids_at_128_tokens_are_q_b_and_the_q_rope_rotation():
    spec = get_op("mla_prolog_quant")
    case = next(c for c in load_cases(spec.cases_path, spec) if c.id == "level5")
    assert case.inputs["x"].shape[0] == TOKENS
    inputs = make_case_inputs(spec, case)
    heads_width = case.inputs["wq_b"].shape[1]
    heads = heads_width // case.inputs["wkv"].shape[1]        # wkv is [H, head_dim]
    q_b_tiles = heads_width // (L0C_BYTES // (4 * TOKENS))    # int8 q_b: n0 capped by L0C at m 128
    rotation_tiles = TOKENS * heads // 128                    # [tokens * heads, R] @ [R, R], m 128
    unmerged = _tasks(spec, inputs, case, ((-1, 1),))
    assert _tasks(spec, inputs, case, ((kernel.Q_B_CUBE_GROUP_128, 2), (-1, 1))) == unmerged - q_b_tiles // 2
    assert _tasks(spec, inputs, case, ((kernel.Q_ROPE_CUBE_GROUP_128, 2), (-1, 1))) == unmerged - rotation_tiles // 2
