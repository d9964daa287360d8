"""Whole models on the gym's operators: Qwen3 and Qwen3-MoE from a Hugging Face module.

    model = ptogym.models.from_hf(hf_model)          # transformers Qwen3(Moe)ForCausalLM, in memory
    logits = model.prefill(input_ids)                 # [B, S] or a list of ragged prompts
    next_logits = model.decode(next_tokens)           # [B] -> [B, vocab]
    tokens = model.generate(input_ids, max_new_tokens=16)

``ptogym model`` runs one against its HF module (``ptogym/models/cli.py``);
``docs/models.md`` maps a layer to the operators.  Nothing here imports torch until a
model is built.
"""
from __future__ import annotations


def from_hf(hf_model, *, backend=None, block_size: int = 128, max_tokens: int | None = None, dtype=None):
    """A ``PagedModel`` whose decoder layers run on ``ptogym.ops`` through ``backend``
    (a name or backend instance; None: ``$PTOGYM_BACKEND``, else the interpreter), with
    a paged KV cache of ``block_size``-token blocks holding at most ``max_tokens``
    tokens (None: grown on demand).  Weights are taken from ``hf_model`` (not copied
    where already in the compute dtype); ``dtype`` is the compute dtype (default the
    model's when bf16 or fp16; fp16 for an fp32 model: the kernels take no fp32, and
    fp16's 10-bit mantissa keeps its logits ~10x closer than bf16 - pass
    ``dtype=torch.bfloat16`` where activations exceed fp16's range)."""
    from .qwen3 import PagedModel

    return PagedModel(hf_model, backend=backend, block_size=block_size, max_tokens=max_tokens, dtype=dtype)
