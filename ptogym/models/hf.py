"""Hugging Face reference models built from a configuration with seeded random
weights (nothing is downloaded), and the named configurations ``ptogym model`` takes.

Weights: every norm gamma ~ 1 + N(0, 0.1), the token embedding ~ N(0, 1), every
projection (attention, MLP, router, experts, LM head) ~ N(0, 1 / fan_in), so that
activations stay O(1) through the layers and the logits are spread enough for a
greedy choice to mean something (HF's default N(0, 0.02) makes near-uniform logits).
"""
from __future__ import annotations

import json
from pathlib import Path

FAMILIES = ("qwen3", "qwen3-moe")
_SHARED = {"vocab_size": 512, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
           "head_dim": 64, "hidden_size": 128, "max_position_embeddings": 4096, "rms_norm_eps": 1e-6,
           "eos_token_id": None, "bos_token_id": None, "pad_token_id": None}
# one decoder layer at the real models' dimensions (the vocabulary cut to 4096: the LM head stays in
# torch and the per-layer estimate does not depend on it; a whole 8B model would need 16 GB)
PRESETS = {
    "qwen3": {
        "tiny": {**_SHARED, "intermediate_size": 256},
        "8b": {**_SHARED, "vocab_size": 4096, "num_hidden_layers": 1, "hidden_size": 4096, "intermediate_size": 12288,
               "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
               "rope_parameters": {"rope_type": "default", "rope_theta": 1e6}},
    },
    "qwen3-moe": {
        "tiny": {**_SHARED, "moe_intermediate_size": 64, "num_experts": 8, "num_experts_per_tok": 2,
                 "norm_topk_prob": True, "intermediate_size": 256},
        "30b-a3b": {**_SHARED, "vocab_size": 4096, "num_hidden_layers": 1, "hidden_size": 2048,
                    "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128, "num_experts": 128,
                    "num_experts_per_tok": 8, "moe_intermediate_size": 768, "norm_topk_prob": True,
                    "intermediate_size": 6144, "rope_parameters": {"rope_type": "default", "rope_theta": 1e6}},
    },
}


def config_fields(family: str, config: str) -> dict:
    """The fields of configuration ``config``: a preset name, a JSON object or a JSON
    file; JSON fields go over the ``tiny`` preset.  ValueError naming ``--config``."""
    if config in PRESETS[family]:
        return dict(PRESETS[family][config])
    text = config
    if config.lstrip()[:1] not in ("{", "["):
        path = Path(config)
        if not path.is_file():
            raise ValueError(f"--config: {config!r} is neither a preset ({', '.join(PRESETS[family])}), "
                             "a JSON object nor a JSON file")
        text = path.read_text(encoding="utf-8")
    try:
        fields = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"--config: not valid JSON: {error}") from None
    if not isinstance(fields, dict):
        raise ValueError(f"--config: must be a JSON object of configuration fields, got {type(fields).__name__}")
    return {**PRESETS[family]["tiny"], **fields}


def make_config(family: str, fields: dict):
    """The transformers configuration of ``family`` from ``fields`` (experts and attention eager)."""
    from transformers import Qwen3Config, Qwen3MoeConfig

    config = {"qwen3": Qwen3Config, "qwen3-moe": Qwen3MoeConfig}[family](**fields)
    config._experts_implementation = "eager"  # the module's own loop over experts (no kernel hub)
    config._attn_implementation = "eager"
    return config


def build(family: str, fields_or_config, *, dtype=None, seed: int = 0):
    """``Qwen3ForCausalLM`` / ``Qwen3MoeForCausalLM`` from config fields (or a config made by
    ``make_config``), seeded weights, eval mode."""
    import torch
    from transformers import Qwen3ForCausalLM, Qwen3MoeForCausalLM

    config = make_config(family, fields_or_config) if isinstance(fields_or_config, dict) else fields_or_config
    model = {"qwen3": Qwen3ForCausalLM, "qwen3-moe": Qwen3MoeForCausalLM}[family](config)
    seed_weights(model, seed)
    return model.to(dtype or torch.bfloat16).eval()


def seed_weights(model, seed: int) -> None:
    """Overwrite every parameter as the module docstring states, from ``seed``."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    embedding = model.get_input_embeddings().weight
    with torch.no_grad():
        for parameter in model.parameters():
            noise = torch.randn(parameter.shape, generator=generator)
            if parameter.dim() == 1:
                parameter.copy_(1 + 0.1 * noise)
            elif parameter is embedding:
                parameter.copy_(noise)
            else:
                parameter.copy_(noise * parameter.shape[-1] ** -0.5)


def split_gate_up(experts):
    """(w_gate, w_up, w_down) [E, I, H], [E, I, H], [E, H, I] from an HF experts module
    (``gate_up_proj`` [E, 2I, H]: gate rows first, as its ``chunk(2)`` splits them)."""
    gate, up = experts.gate_up_proj.detach().chunk(2, dim=1)
    return gate.contiguous(), up.contiguous(), experts.down_proj.detach().contiguous()
