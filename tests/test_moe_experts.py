"""Routed-expert FFN (SK-07): the kernels against Hugging Face's Qwen3-MoE sparse block
(router + experts) and DeepSeek-V3 MoE (gate, experts, shared expert), an fp64
reference, empty experts, all tokens to one expert, top_k = E, T = 1, token chunks;
torch.library integration and input validation."""
import pytest
import torch

from hf_models import deepseek_v3_moe, qwen3_moe_block
from ptogym.models.hf import split_gate_up
from ptogym.ops.moe_experts import kernel, route
from ptogym.ops.moe_experts.golden import moe_experts_golden
from ptogym.ops.moe_experts.op import moe_experts
from ptogym.ops.moe_gating_topk.op import moe_gating_topk
from ptogym.ops.swiglu_mlp.op import swiglu_mlp
from ptogym.verify import detailed_tensor_compare

# against the golden and fp64: bf16/fp16 y of chained projections (as swiglu_mlp)
BOUNDS = {"rtol": 0.0078125, "atol": 1e-3, "max_error_ratio": 0.005}
# against Hugging Face: its module weights each expert's output in bf16 and adds the k
# of them in bf16 (index_add_, one rounding per add), ours sums in fp32 and rounds
# once; measured up to 1-2 bf16 ulps (0.0156 at |y| ~ 3.7, 4.6% beyond one ulp);
# bound: 4 ulps (rtol 2^-5) + atol 1e-2 on all but 0.5%
HF_BOUNDS = {"rtol": 2**-5, "atol": 1e-2, "max_error_ratio": 0.005}


def assert_close(actual, expected, bounds=BOUNDS):
    result = detailed_tensor_compare(actual, expected, "y", **bounds)
    assert result["all_close"], result.report()


def experts_weights(experts, hidden, inter, dtype=torch.bfloat16, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(shape, generator=g) * shape[-1] ** -0.5).to(dtype)
            for shape in ((experts, inter, hidden), (experts, inter, hidden), (experts, hidden, inter))]


def routing(tokens, experts, top_k, seed=0, skew=0.0):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(tokens, experts, generator=g) + skew * torch.randn(1, experts, generator=g)
    chosen, ids = logits.topk(top_k, dim=-1)
    return chosen.softmax(-1), ids.to(torch.int32)


@pytest.mark.parametrize("hidden, inter, experts, top_k, norm", [(128, 64, 16, 4, True), (32, 12, 8, 2, False),
                                                                 (20, 37, 4, 4, True)])
def test_matches_hf_qwen3_moe_sparse_block(hidden, inter, experts, top_k, norm):
    """Qwen3MoeSparseMoeBlock end to end: its router's logits through moe_gating_topk
    (softmax, norm_topk_prob) and moe_experts against the block's own output; sizes of
    Hugging Face's own test configs too (H 32, I 12, 8 experts; top_k = E = 4), which the
    operator zero-pads to 32-byte extents."""
    block = qwen3_moe_block(hidden, inter, experts, top_k, norm, seed=1)
    with torch.no_grad():
        block.gate.weight.mul_(50 * hidden ** -0.5)
        x = torch.randn(40, hidden, generator=torch.Generator().manual_seed(1)).bfloat16()
        expected = block(x.view(1, 40, hidden)).view(40, hidden)
        logits, _, ref_ids = block.gate(x)
    weights, ids = moe_gating_topk(logits, top_k=top_k, renormalize=norm)
    assert torch.equal(ids, ref_ids.int())
    y = moe_experts(x, weights, ids, *split_gate_up(block.experts))
    assert_close(y, expected, HF_BOUNDS)


@pytest.mark.parametrize("t, hidden, inter, experts, top_k, groups, topk_groups", [
    (1, 128, 64, 32, 6, 4, 2), (23, 128, 64, 32, 6, 4, 2), (9, 32, 12, 8, 2, 2, 1)])
def test_matches_hf_deepseek_v3_moe(t, hidden, inter, experts, top_k, groups, topk_groups):
    """DeepseekV3MoE: its gate (fp32: sigmoid, bias, groups, top groups, x2.5) through
    moe_gating_topk, the routed experts through moe_experts and the shared expert
    through swiglu_mlp, added in bf16 as the module adds them (last row: sizes of Hugging
    Face's own test config)."""
    moe = deepseek_v3_moe(hidden, inter, experts, top_k, groups, topk_groups, 2.5, True, seed=t)
    with torch.no_grad():
        moe.gate.weight.mul_(50 * hidden ** -0.5)
        for linear in (moe.shared_experts.gate_proj, moe.shared_experts.up_proj, moe.shared_experts.down_proj):
            linear.weight.mul_(50 * linear.weight.shape[1] ** -0.5)
        x = torch.randn(t, hidden, generator=torch.Generator().manual_seed(t)).bfloat16()
        expected = moe(x.view(1, t, hidden)).view(t, hidden)
        expected_routed = moe.experts(x, *reversed(moe.gate(x)[1:]))
    gate = moe.gate
    weights, ids = moe_gating_topk((x.float() @ torch.transpose(gate.weight, 0, 1)).detach(), top_k=top_k, scoring="sigmoid",
                                   num_groups=groups, topk_groups=topk_groups,
                                   correction_bias=gate.e_score_correction_bias, renormalize=True,
                                   routed_scaling_factor=2.5)
    routed = moe_experts(x, weights, ids, *split_gate_up(moe.experts))
    assert_close(routed, expected_routed, HF_BOUNDS)
    shared = moe.shared_experts
    y = routed + swiglu_mlp(x, shared.gate_proj.weight.detach(), shared.up_proj.weight.detach(),
                            shared.down_proj.weight.detach())
    assert_close(y, expected, HF_BOUNDS)


@pytest.mark.parametrize("t, experts, top_k, skew, dtype", [
    (1, 8, 2, 0.0, torch.bfloat16), (50, 16, 4, 3.0, torch.bfloat16), (33, 8, 8, 0.0, torch.float16)])
def test_matches_fp64_reference(t, experts, top_k, skew, dtype):
    """fp64 arithmetic with the model's roundings inside each expert; top_k = E on the
    last row of the table (every token to every expert)."""
    w_gate, w_up, w_down = experts_weights(experts, 256, 128, dtype, seed=t)
    x = torch.randn(t, 256, generator=torch.Generator().manual_seed(t)).to(dtype)
    weights, ids = routing(t, experts, top_k, seed=t, skew=skew)
    expected = moe_experts_golden(x, weights, ids, w_gate, w_up, w_down, torch.float64)
    assert_close(moe_experts(x, weights, ids, w_gate, w_up, w_down), expected)


def _count_expert_blocks(monkeypatch):
    """Record the expert index of every gate projection the experts kernel issues."""
    calls = []
    real_linear = kernel.linear

    def linear(pypto, x, weight, out_dtype, **kw):
        calls.append(weight)
        return real_linear(pypto, x, weight, out_dtype, **kw)

    monkeypatch.setattr(kernel, "linear", linear)
    return calls


def test_experts_without_tokens_cost_nothing(monkeypatch):
    """All 9 tokens to expert 5 (top-1) of 64: its run padded to one 16-row block, three
    projections, and nothing for the 63 idle experts; y is expert 5's MLP times the
    weights."""
    calls = _count_expert_blocks(monkeypatch)
    w_gate, w_up, w_down = experts_weights(64, 128, 64, seed=2)
    x = torch.randn(9, 128, generator=torch.Generator().manual_seed(2)).bfloat16()
    weights = torch.rand(9, 1, generator=torch.Generator().manual_seed(3))
    ids = torch.full((9, 1), 5, dtype=torch.int32)
    y = moe_experts(x, weights, ids, w_gate, w_up, w_down)
    assert len(calls) == 3
    expert5 = swiglu_mlp(x, w_gate[5], w_up[5], w_down[5])
    assert_close(y, (expert5.float() * weights).bfloat16())
    assert_close(y, moe_experts_golden(x, weights, ids, w_gate, w_up, w_down, torch.float64))


def test_skewed_routing_leaves_experts_empty_and_matches():
    weights, ids = routing(40, 32, 2, seed=4, skew=4.0)
    assert len(torch.unique(ids)) < 32  # some experts get no token
    w_gate, w_up, w_down = experts_weights(32, 128, 64, seed=4)
    x = torch.randn(40, 128, generator=torch.Generator().manual_seed(4)).bfloat16()
    assert_close(moe_experts(x, weights, ids, w_gate, w_up, w_down),
                 moe_experts_golden(x, weights, ids, w_gate, w_up, w_down, torch.float64))


def test_token_chunks_beyond_one_route_launch(monkeypatch):
    """More assignments than one route launch takes: the call runs in token chunks."""
    monkeypatch.setattr(kernel, "MAX_ASSIGNMENTS", 64)
    weights, ids = routing(37, 8, 4, seed=5)  # 148 assignments: chunks of 16 tokens
    w_gate, w_up, w_down = experts_weights(8, 64, 32, seed=5)
    x = torch.randn(37, 64, generator=torch.Generator().manual_seed(5)).bfloat16()
    assert_close(moe_experts(x, weights, ids, w_gate, w_up, w_down),
                 moe_experts_golden(x, weights, ids, w_gate, w_up, w_down, torch.float64))


def test_route_kernel_groups_assignments_by_expert():
    """The route kernel alone: assignments grouped by expert (in assignment order within
    an expert), each expert's run padded to 16 rows - padding reads token 0 with weight
    0 and writes its own spare row N + i - and the runs' starts."""
    from ptogym.backends import get_backend

    ids = torch.tensor([[3, 1], [1, 0], [3, 2]], dtype=torch.int32)
    n, experts = 64, 4
    flat = torch.full((1, n), experts, dtype=torch.int32)
    flat[0, :6] = ids.reshape(-1)
    flat_weights = torch.zeros(1, n)
    flat_weights[0, :6] = torch.arange(1, 7) / 10
    rows = route.padded_rows(n, experts)
    tokens, order = torch.empty(rows, dtype=torch.int32), torch.empty(rows, dtype=torch.int32)
    sorted_weights, offsets = torch.empty(rows, 1), torch.empty(experts + 1, 1, dtype=torch.int32)
    get_backend("interp").launch(route.build_route, {"assignments": n, "experts": experts, "top_k": 2},
                                 [flat, flat_weights, tokens, order, sorted_weights, offsets], {})
    assert offsets[:, 0].tolist() == [0, 16, 32, 48, 64]
    real = {0: 3, 16: 1, 17: 2, 32: 5, 48: 0, 49: 4}  # row -> assignment
    expected_order = torch.arange(rows, dtype=torch.int32) + n
    expected_tokens = torch.zeros(rows, dtype=torch.int32)
    expected_weights = torch.zeros(rows)
    for row, assignment in real.items():
        expected_order[row], expected_tokens[row] = assignment, assignment // 2
        expected_weights[row] = (assignment + 1) / 10
    assert torch.equal(order[:64], expected_order[:64]) and torch.equal(tokens[:64], expected_tokens[:64])
    torch.testing.assert_close(sorted_weights[:64, 0], expected_weights[:64])
    assert len(set(order.tolist())) == rows  # every row writes its own buffer row


@pytest.mark.parametrize("tokens, top_k, experts, skew", [(1, 8, 128, 0.0), (37, 2, 8, 3.0), (100, 4, 16, 0.0),
                                                          (50, 1, 4, 8.0)])
def test_the_route_computed_on_the_host_equals_the_route_kernel(tokens, top_k, experts, skew):
    """Cost-only launches compute nothing, so the experts kernel's loop bounds come from
    ``route_on_host``: bitwise what the route kernel writes, padding rows included (and
    experts with no token: 1 token over 128 experts, a skewed router over 4)."""
    from ptogym.backends import get_backend
    from ptogym.ops.moe_experts import op

    generator = torch.Generator().manual_seed(tokens)
    logits = torch.randn(tokens, experts, generator=generator) + skew * torch.randn(1, experts, generator=generator)
    chosen, ids = torch.topk(logits, top_k, dim=-1)
    count = tokens * top_k
    n = op.padded_assignments(count)
    flat = torch.full((1, n), experts, dtype=torch.int32)
    flat[0, :count] = ids.reshape(-1)
    flat_weights = torch.zeros(1, n)
    flat_weights[0, :count] = torch.softmax(chosen, -1).reshape(-1)
    rows = route.padded_rows(n, experts)
    outputs = [torch.full((rows,), -7, dtype=torch.int32), torch.full((rows,), -7, dtype=torch.int32),
               torch.full((rows, 1), -7.0), torch.full((experts + 1, 1), -7, dtype=torch.int32)]
    get_backend("interp").launch(route.build_route, {"assignments": n, "experts": experts, "top_k": top_k},
                                 [flat, flat_weights, *outputs], {})
    on_host = op.route_on_host(flat, flat_weights, experts, top_k)
    assert all(torch.equal(got, want) for got, want in zip(on_host, outputs))


def test_empty_and_int64_ids():
    w_gate, w_up, w_down = experts_weights(4, 64, 32)
    x = torch.randn(3, 64).bfloat16()
    weights, ids = routing(3, 4, 2)
    assert moe_experts(x[:0], weights[:0], ids[:0], w_gate, w_up, w_down).shape == (0, 64)
    assert torch.equal(moe_experts(x, weights, ids.long(), w_gate, w_up, w_down),
                       moe_experts(x, weights, ids, w_gate, w_up, w_down))


def test_opcheck_and_compile():
    w_gate, w_up, w_down = experts_weights(4, 64, 32)
    x = torch.randn(5, 64).bfloat16()
    weights, ids = routing(5, 4, 2)
    torch.library.opcheck(torch.ops.ptogym.moe_experts.default, (x, weights, ids, w_gate, w_up, w_down))
    torch._dynamo.reset()
    got = torch.compile(lambda a: moe_experts(a, weights, ids, w_gate, w_up, w_down) * 2, fullgraph=True)(x)
    assert torch.equal(got, moe_experts(x, weights, ids, w_gate, w_up, w_down) * 2)


def _bad(label):
    w_gate, w_up, w_down = experts_weights(4, 64, 32)
    x = torch.randn(3, 64).bfloat16()
    weights, ids = routing(3, 4, 2)
    return {
        "fp32 x": ((x.float(), weights, ids, w_gate, w_up, w_down), TypeError, "x: dtype torch.float32"),
        "w_down dtype": ((x, weights, ids, w_gate, w_up, w_down.half()), TypeError, "w_down: dtype"),
        "weights dtype": ((x, weights.double(), ids, w_gate, w_up, w_down), TypeError, "topk_weights: dtype"),
        "ids dtype": ((x, weights, ids.float(), w_gate, w_up, w_down), TypeError, "topk_ids: dtype"),
        "3-D x": ((x.view(1, 3, 64), weights, ids, w_gate, w_up, w_down), ValueError, r"x: needs shape \[T, H\]"),
        "ids rows": ((x, weights, ids[:2], w_gate, w_up, w_down), ValueError, r"topk_ids: shape \[2, 2\]"),
        "weights shape": ((x, weights[:, :1].contiguous(), ids, w_gate, w_up, w_down), ValueError,
                          "topk_weights: shape"),
        "2-D w_gate": ((x, weights, ids, w_gate[0], w_up, w_down), ValueError, r"w_gate: shape \[32, 64\] must be"),
        "w_up shape": ((x, weights, ids, w_gate, w_up[:3].contiguous(), w_down), ValueError, "w_up: shape"),
        "w_down shape": ((x, weights, ids, w_gate, w_up, w_down.transpose(1, 2).contiguous()), ValueError,
                         r"w_down: shape \[4, 32, 64\] must be \[E, H, I\]"),
        "id too large": ((x, weights, ids + 3, w_gate, w_up, w_down), ValueError,
                         r"topk_ids: values must lie in \[0, E = 4\); found"),
        "negative id": ((x, weights, ids - 5, w_gate, w_up, w_down), ValueError, "topk_ids: values must lie"),
        "strided ids": ((x, weights, ids.t().contiguous().t(), w_gate, w_up, w_down), ValueError,
                        "topk_ids: must be contiguous"),
    }[label]


@pytest.mark.parametrize("label", ["fp32 x", "w_down dtype", "weights dtype", "ids dtype", "3-D x", "ids rows",
                                   "weights shape", "2-D w_gate", "w_up shape", "w_down shape", "id too large",
                                   "negative id", "strided ids"])
def test_bad_input_is_rejected(label):
    args, error, message = _bad(label)
    with pytest.raises(error, match=message):
        moe_experts(*args)
