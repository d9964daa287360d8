"""The models' own modules as references: Hugging Face ``transformers`` (a test
dependency) built from small configurations with seeded random weights - nothing is
downloaded.  Qwen3's MLP, Qwen3-MoE's sparse block (router + experts) and
DeepSeek-V3's MoE gate and experts.  Whole causal LMs: ``ptogym.models.hf``."""
from __future__ import annotations

import torch


def _seeded(module: torch.nn.Module, seed: int, dtype: torch.dtype, std: float = 0.02) -> torch.nn.Module:
    """Every parameter and buffer ~ N(0, std) from ``seed``, in ``dtype``; eval mode."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for tensor in [*module.parameters(), *module.buffers()]:
            tensor.copy_(torch.randn(tensor.shape, generator=generator) * std)
    return module.to(dtype).eval()


def qwen3_mlp(hidden: int, inter: int, dtype=torch.bfloat16, seed: int = 0):
    """``Qwen3MLP`` (silu) with weights ~ N(0, 1/fan_in); returns (module, w_gate, w_up, w_down)."""
    from transformers import Qwen3Config
    from transformers.models.qwen3.modeling_qwen3 import Qwen3MLP

    mlp = _seeded(Qwen3MLP(Qwen3Config(hidden_size=hidden, intermediate_size=inter, hidden_act="silu")), seed, dtype)
    with torch.no_grad():
        for linear in (mlp.gate_proj, mlp.up_proj, mlp.down_proj):
            linear.weight.mul_(50 * linear.weight.shape[1] ** -0.5)  # N(0, 0.02) -> N(0, 1/fan_in)
    return mlp, mlp.gate_proj.weight.detach(), mlp.up_proj.weight.detach(), mlp.down_proj.weight.detach()


def qwen3_moe_block(hidden: int, inter: int, experts: int, top_k: int, norm_topk_prob=True, dtype=torch.bfloat16,
                    seed: int = 0):
    """``Qwen3MoeSparseMoeBlock``: router (softmax, top-k, norm_topk_prob) + experts."""
    from transformers import Qwen3MoeConfig
    from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeSparseMoeBlock

    config = Qwen3MoeConfig(hidden_size=hidden, moe_intermediate_size=inter, num_experts=experts,
                            num_experts_per_tok=top_k, norm_topk_prob=norm_topk_prob, hidden_act="silu")
    config._experts_implementation = "eager"  # the module's own loop over experts (no kernel hub)
    block = _seeded(Qwen3MoeSparseMoeBlock(config), seed, dtype)
    _expert_scale(block.experts)
    return block


def deepseek_v3_moe(hidden: int, inter: int, experts: int, top_k: int, groups: int, topk_groups: int,
                    routed_scaling_factor=2.5, norm_topk_prob=True, dtype=torch.bfloat16, seed: int = 0):
    """``DeepseekV3MoE`` (gate: sigmoid, correction bias, groups; experts; shared expert)."""
    from transformers import DeepseekV3Config
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3MoE

    config = DeepseekV3Config(hidden_size=hidden, moe_intermediate_size=inter, n_routed_experts=experts,
                              num_experts_per_tok=top_k, n_group=groups, topk_group=topk_groups,
                              routed_scaling_factor=routed_scaling_factor, norm_topk_prob=norm_topk_prob,
                              n_shared_experts=1, hidden_act="silu")
    config._experts_implementation = "eager"
    moe = _seeded(DeepseekV3MoE(config), seed, dtype)
    with torch.no_grad():  # the router stays fp32, as DeepSeek-V3 keeps it; a visible bias
        moe.gate.float()
        moe.gate.e_score_correction_bias.copy_(torch.randn(experts, generator=torch.Generator().manual_seed(seed + 1))
                                               * 0.1)
    _expert_scale(moe.experts)
    return moe


def _expert_scale(experts) -> None:
    """Expert weights ~ N(0, 1/fan_in), so every projection keeps O(1) outputs."""
    with torch.no_grad():
        for weight in (experts.gate_up_proj, experts.down_proj):
            weight.mul_(50 * weight.shape[-1] ** -0.5)
