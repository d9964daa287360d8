"""Public API of MoE expert gating (AT-15 / SK-12), torch.library and ``SPEC``.

``moe_gating_topk(router_logits, *, top_k, scoring="softmax", num_groups=1,
topk_groups=1, correction_bias=None, renormalize=True, routed_scaling_factor=1.0)``
returns ``(topk_weights fp32 [T, top_k], topk_ids int32 [T, top_k])`` for
router_logits [T, E] (fp32, bf16 or fp16; computed in fp32):

* scores = softmax(logits) (``scoring="softmax"``) or sigmoid(logits) (``"sigmoid"``);
* choice = scores + correction_bias ([E], any float dtype, used in fp32) - the bias
  only steers the selection;
* with num_groups > 1 the E experts form num_groups groups of E / num_groups
  consecutive experts, each scored by the sum of its two largest choice scores; only
  the topk_groups best groups' experts can be chosen;
* topk_ids = the top_k experts by choice score, in descending order; ties are broken
  as ``torch.topk`` breaks them: the interpreter's topk is torch.topk on the same
  fp32 values (on CPU that order is the implementation's, not by expert index: eight
  tied experts of 64 come out as 44, 41, 42, ...); tied scores therefore select what
  Hugging Face's torch.topk selects whenever the scores are bit-identical
  (tests/test_moe_gating_topk.py); what a device's topk does with ties is not measured;
* topk_weights = the unbiased scores of those experts, divided by their sum (+1e-20)
  when renormalize, times routed_scaling_factor.

Qwen3-MoE's router is ``scoring="softmax", renormalize=norm_topk_prob``; DeepSeek-V3's
is ``scoring="sigmoid", correction_bias=e_score_correction_bias, num_groups=n_group,
topk_groups=topk_group, renormalize=norm_topk_prob, routed_scaling_factor=...``.

torch.library: ``ptogym::moe_gating_topk(Tensor router_logits, int top_k, str scoring,
int num_groups, int topk_groups, Tensor? correction_bias, bool renormalize, float
routed_scaling_factor) -> (Tensor, Tensor)``.
"""
from __future__ import annotations

import math

import torch

from ptogym.atoms import host, measure
from ptogym.atoms.gating import SORT_GROUP, topk_ub_bytes
from ptogym.backends.base import LaunchReport
from ptogym.ops import OpSpec
from ptogym.ops.inplace_add_rms_norm.kernel import UB_BYTES
from ptogym.tune.table import tuned_params

from . import kernel
from .golden import moe_gating_topk_golden

PATTERNS = ("AT-15", "SK-12")
LOGIT_DTYPES = host.FLOAT_DTYPES
MAX_EXPERTS = 4096  # a row of fp32 scores and its working copies within one vector tile


def rule_violations(router_logits, top_k, scoring, num_groups, topk_groups, correction_bias, renormalize,
                    routed_scaling_factor) -> list:
    """Every dtype, shape and attribute rule, as (exception type, message) pairs."""
    problems = host.dtype_rule("router_logits", router_logits, tuple(LOGIT_DTYPES))
    if problems:
        return problems
    if len(router_logits.shape) != 2:
        return [(ValueError, f"router_logits: needs shape [T, E], got {list(router_logits.shape)}")]
    experts = router_logits.shape[1]
    if experts == 0 or experts > MAX_EXPERTS:
        problems.append((ValueError, f"router_logits: E = {experts} experts must be in [1, {MAX_EXPERTS}]"))
    problems += host.choice_rule("scoring", scoring, kernel.SCORINGS)
    for name, value in (("top_k", top_k), ("num_groups", num_groups), ("topk_groups", topk_groups)):
        if not host.is_int(value):
            problems.append((TypeError, f"{name}: must be an int, got {host.type_name(value)} {value!r}"))
    if problems:
        return problems
    if num_groups < 1 or (experts and experts % num_groups):
        problems.append((ValueError, f"num_groups: {num_groups!r} must be an int >= 1 dividing E = {experts}"))
        return problems
    group_size = experts // num_groups
    if num_groups > 1 and group_size < 2:
        problems.append((ValueError, f"num_groups: {num_groups} groups of {group_size} expert(s); a group is "
                                     "scored by its two largest, so it needs at least 2"))
    elif 0 < experts <= MAX_EXPERTS and not kernel.widest_tile_rows(experts, num_groups, 2):
        problems.append((ValueError, f"num_groups: {num_groups} groups of {group_size} experts: pypto's topk pads "
                                     f"each group to {SORT_GROUP} (value, index) pairs, so one token's "
                                     f"[1, {num_groups}, {group_size}] group sort needs "
                                     f"{topk_ub_bytes(num_groups, group_size, 2)} B > {UB_BYTES} B of UB (rule: the "
                                     "tiles of one token fit UB; fewer, larger groups do)"))
    if not 1 <= topk_groups <= num_groups:
        problems.append((ValueError, f"topk_groups: {topk_groups!r} must be an int in [1, num_groups = {num_groups}]"))
        return problems
    reachable = topk_groups * group_size
    if not 1 <= top_k <= reachable:
        problems.append((ValueError, f"top_k: {top_k!r} must be an int in [1, {reachable}] (the experts of "
                                     f"topk_groups = {topk_groups} group(s) of {group_size})"))
    if correction_bias is not None:
        problems += host.dtype_rule("correction_bias", correction_bias, tuple(host.FLOAT_DTYPES))
        problems += host.shape_rule("correction_bias", correction_bias, (experts,), "[E]")
    problems += host.flag_rule("renormalize", renormalize)
    problems += host.positive_number_rule("routed_scaling_factor", routed_scaling_factor)
    if math.prod(router_logits.shape) > host.INT32_MAX:
        problems.append((ValueError, f"router_logits: {math.prod(router_logits.shape)} elements > {host.INT32_MAX}"))
    return problems


def validate(router_logits, top_k, scoring, num_groups, topk_groups, correction_bias, renormalize,
             routed_scaling_factor) -> None:
    """Raise TypeError/ValueError naming the argument and the rule."""
    host.check_tensors("moe_gating_topk", "router_logits", router_logits=router_logits, correction_bias=correction_bias)
    host.raise_first(rule_violations(router_logits, top_k, scoring, num_groups, topk_groups, correction_bias,
                                     renormalize, routed_scaling_factor))


def launch(router_logits, top_k, scoring="softmax", num_groups=1, topk_groups=1, correction_bias=None,
           renormalize=True, routed_scaling_factor=1.0, backend=None,
           variant=None) -> tuple[tuple[torch.Tensor, torch.Tensor], LaunchReport]:
    validate(router_logits, top_k, scoring, num_groups, topk_groups, correction_bias, renormalize,
             routed_scaling_factor)
    tokens, experts = router_logits.shape
    device = router_logits.device
    weights = torch.empty(tokens, top_k, dtype=torch.float32, device=device)
    ids = torch.empty(tokens, top_k, dtype=torch.int32, device=device)
    static = {"experts": experts, "top_k": top_k, "dtype": LOGIT_DTYPES[router_logits.dtype], "scoring": scoring,
              "num_groups": num_groups, "topk_groups": topk_groups, "has_bias": correction_bias is not None,
              "renormalize": renormalize, "scaling": float(routed_scaling_factor),
              **tuned_params(kernel, tokens=tokens, experts=experts, num_groups=num_groups, top_k=top_k),
              **kernel.VARIANTS.get(variant, {})}
    tensors, scalars = [router_logits, weights, ids], {}
    if correction_bias is not None:  # the only case that reads it: the kernel takes None otherwise
        tensors.append(correction_bias.to(torch.float32).view(1, experts))
    else:
        scalars["bias"] = None
    report = host.launch(kernel.build, static, tensors, scalars, backend, tokens)
    return (weights, ids), report


@torch.library.custom_op("ptogym::moe_gating_topk", mutates_args=())
def _moe_gating_topk_op(router_logits: torch.Tensor, top_k: int, scoring: str, num_groups: int, topk_groups: int,
                        correction_bias: torch.Tensor | None, renormalize: bool,
                        routed_scaling_factor: float) -> tuple[torch.Tensor, torch.Tensor]:
    return launch(router_logits, top_k, scoring, num_groups, topk_groups, correction_bias, renormalize,
                  routed_scaling_factor)[0]


@_moe_gating_topk_op.register_fake
def _(router_logits, top_k, scoring, num_groups, topk_groups, correction_bias, renormalize, routed_scaling_factor):
    tokens = router_logits.shape[0]
    return (router_logits.new_empty(tokens, top_k, dtype=torch.float32),
            router_logits.new_empty(tokens, top_k, dtype=torch.int32))


def moe_gating_topk(router_logits, *, top_k, scoring="softmax", num_groups=1, topk_groups=1, correction_bias=None,
                    renormalize=True, routed_scaling_factor=1.0, backend=None):
    """(topk_weights fp32 [T, top_k], topk_ids int32 [T, top_k]); see the module docstring."""
    if not torch.compiler.is_compiling():
        validate(router_logits, top_k, scoring, num_groups, topk_groups, correction_bias, renormalize,
                 routed_scaling_factor)
    # numpy ints and bools accepted: as the Python values the custom op's schema takes
    top_k, num_groups, topk_groups, renormalize = int(top_k), int(num_groups), int(topk_groups), bool(renormalize)
    args = (router_logits, top_k, scoring, num_groups, topk_groups, correction_bias, renormalize,
            routed_scaling_factor)
    if backend is None:
        return torch.ops.ptogym.moe_gating_topk(router_logits, top_k, scoring, num_groups, topk_groups,
                                                correction_bias, renormalize, float(routed_scaling_factor))
    return launch(*args, backend=backend)[0]


# --- what the runner, tests and benchmarks need -------------------------------------------
ATTR_DEFAULTS = {"top_k": None, "scoring": "softmax", "num_groups": 1, "topk_groups": 1, "renormalize": True,
                 "routed_scaling_factor": 1.0}


def _attrs(attrs) -> dict:
    return {name: attrs.get(name, default) for name, default in ATTR_DEFAULTS.items()}


def tuning_shape(case) -> dict:
    """The shape a level's call passes to the tuned table (``launch``)."""
    tokens, experts = case.inputs["router_logits"].shape
    attrs = _attrs(case.attrs)
    return {"tokens": tokens, "experts": experts, "num_groups": attrs["num_groups"], "top_k": attrs["top_k"]}


def make_inputs(case, generator, device="cpu"):
    """Logits ~ N(0, 1) (a trained router's spread); correction bias ~ N(0, 0.1)
    (DeepSeek-V3's are of that size relative to sigmoid scores)."""
    tensors = host.make_inputs(case, generator, device)
    if "correction_bias" in tensors:
        tensors["correction_bias"] = (tensors["correction_bias"].float() * 0.1).to(tensors["correction_bias"].dtype)
    return tensors


def _golden(inputs, attrs):
    weights, ids = moe_gating_topk_golden(inputs["router_logits"], correction_bias=inputs.get("correction_bias"),
                                          **_attrs(attrs))
    return {"topk_weights": weights, "topk_ids": ids}


def _run(inputs, attrs, backend, variant=None):
    a = _attrs(attrs)
    (weights, ids), report = launch(inputs["router_logits"], a["top_k"], a["scoring"], a["num_groups"],
                                    a["topk_groups"], inputs.get("correction_bias"), a["renormalize"],
                                    a["routed_scaling_factor"], backend, variant)
    return {"topk_weights": weights, "topk_ids": ids}, report


def _check_case(case) -> list[str]:
    names = set(case.inputs)
    if not {"router_logits"} <= names <= {"router_logits", "correction_bias"}:
        return [f"inputs must be router_logits and optionally correction_bias; got {sorted(names)}"]
    a = _attrs(case.attrs)
    return [m for _, m in rule_violations(case.inputs["router_logits"], a["top_k"], a["scoring"], a["num_groups"],
                                          a["topk_groups"], case.inputs.get("correction_bias"), a["renormalize"],
                                          a["routed_scaling_factor"])]


def hbm_bytes(case) -> int:
    tokens = case.inputs["router_logits"].shape[0]
    k = case.attrs["top_k"]
    return host.moved_bytes(case, {"topk_weights": ((tokens, k), torch.float32), "topk_ids": ((tokens, k), torch.int32)})


SPEC = OpSpec(
    name="moe_gating_topk",
    description="MoE expert gating (AT-15, SK-12): softmax or sigmoid+bias+groups scores, top-k experts, weights",
    make_inputs=make_inputs,
    golden=_golden,
    run=_run,
    check_case=_check_case,
    hbm_bytes=hbm_bytes,
    output_names=("topk_weights", "topk_ids"),
    attr_names=tuple(ATTR_DEFAULTS),
    required_levels=("level0", "level1", "level2", "level3"),
    extra={"patterns": PATTERNS, "variants": ("upstream",), "sim_summary": measure.summarizer(hbm_bytes),
           "tuning_shape": tuning_shape},
)
