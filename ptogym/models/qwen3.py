"""Qwen3 and Qwen3-MoE decoder stacks on the gym's operators, with a paged KV cache.

One decoder layer, over the T tokens of a step (all sequences flattened), is five
operator calls (``docs/models.md`` has the diagram)::

    qwen3_pre_attn      residual += hidden; RMSNorm; QKV; q/k RMSNorm; RoPE; k, v -> cache
    flash_attention     prefill: per sequence, causal, k/v of its cache slots
    | paged_attention   decode: one token per sequence over its block table
    linear              o_proj
    inplace_add_rms_norm  residual += o; o <- RMSNorm(residual) (post_attention_layernorm)
    swiglu_mlp          dense MLP
    | linear + moe_gating_topk + moe_experts   sparse MoE block (router, softmax top-k, experts)

The residual add of a layer's MLP output is fused into the next layer's
``qwen3_pre_attn`` (vLLM's fused-residual form: layer 0 adds a zero residual, exact)
and the last layer's into the final norm, run by ``inplace_add_rms_norm`` too.  The
embedding and the LM head stay in torch.  Numbers: every operator computes in fp32
and rounds to the compute dtype where the model's bf16 modules round (each operator's
README states where it differs by an ulp: e.g. RMSNorm rounds once, HF's twice).
"""
from __future__ import annotations

import torch

from ptogym import ops
from ptogym.backends import get_backend

from .clock import KernelClock
from .hf import split_gate_up
from .kv_cache import PagedKVCache

HEAD_DIMS = (64, 128, 256)  # flash_attention's and paged_attention's D
COMPUTE_DTYPES = (torch.bfloat16, torch.float16)  # the attention kernels' dtypes


def _family(hf_model) -> str:
    from transformers import Qwen3ForCausalLM, Qwen3MoeForCausalLM

    if isinstance(hf_model, Qwen3MoeForCausalLM):
        return "qwen3-moe"
    if isinstance(hf_model, Qwen3ForCausalLM):
        return "qwen3"
    raise TypeError(f"hf_model: expected a transformers Qwen3ForCausalLM or Qwen3MoeForCausalLM, "
                    f"got {type(hf_model).__name__}")


def config_violations(config) -> list[str]:
    """What of a Qwen3(-MoE) configuration the operators cannot run, naming the field."""
    problems = []
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    if head_dim not in HEAD_DIMS:
        problems.append(f"head_dim: {head_dim} must be one of {list(HEAD_DIMS)} (flash_attention, paged_attention)")
    if config.hidden_size % 16:
        problems.append(f"hidden_size: {config.hidden_size} must be a multiple of 16 (32-byte vector tiles)")
    if getattr(config, "attention_bias", False):
        problems.append("attention_bias: True is not supported (qwen3_pre_attn's QKV projection has no bias)")
    if config.hidden_act != "silu":
        problems.append(f"hidden_act: {config.hidden_act!r} must be 'silu' (swiglu_mlp, moe_experts)")
    layer_types = getattr(config, "layer_types", None) or []
    if any(kind != "full_attention" for kind in layer_types) or getattr(config, "use_sliding_window", False):
        problems.append("layer_types / use_sliding_window: sliding-window layers are not supported "
                        "(the attention operators have no window)")
    return problems


class PagedModel:
    """A Qwen3 / Qwen3-MoE causal LM whose decoder layers run on ``ptogym.ops``.

    ``prefill(input_ids)`` starts new sequences: a [B, S] tensor or a list of ragged
    prompts; returns the logits of every position ([B, S, vocab], or a list of [S_b,
    vocab]) and fills the KV cache.  ``decode(token_ids)`` appends one token to each
    sequence and returns the next-token logits [B, vocab].  ``generate`` is greedy.
    Logits are fp32 (the LM head in torch, fp32 accumulation, no rounding to bf16).
    """

    def __init__(self, hf_model, *, backend=None, block_size: int = 128, max_tokens: int | None = None,
                 dtype: torch.dtype | None = None, timing=None):
        self.family = _family(hf_model)
        config = hf_model.config
        if problems := config_violations(config):
            raise ValueError("hf_model.config: " + "; ".join(problems))
        if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 16 or block_size % 16:
            raise ValueError(f"block_size: must be a positive multiple of 16 (paged_attention), got {block_size!r}")
        if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int)
                                       or max_tokens < 1):
            raise ValueError(f"max_tokens: must be a positive int or None, got {max_tokens!r}")
        model_dtype = next(hf_model.parameters()).dtype
        # an fp32 model computes in fp16: 3 more mantissa bits than bf16 (logits 10x closer to the fp32 model's)
        self.dtype = dtype or (model_dtype if model_dtype in COMPUTE_DTYPES else torch.float16)
        if self.dtype not in COMPUTE_DTYPES:
            raise ValueError(f"dtype: must be one of {list(COMPUTE_DTYPES)}, got {self.dtype}")
        self.model_dtype = model_dtype
        self.config = config
        self.eps = config.rms_norm_eps
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        self.heads, self.kv_heads = config.num_attention_heads, config.num_key_value_heads
        numeric = get_backend(backend) if isinstance(backend, (str, type(None))) else backend
        self.clock = KernelClock(numeric, timing)
        inner = hf_model.model
        self._embedding = inner.embed_tokens.weight.detach()
        self._rotary = inner.rotary_emb
        self._final_gamma = self._cast(inner.norm.weight)
        self._lm_head = hf_model.lm_head.weight.detach()
        self.layers = [self._layer_weights(layer) for layer in inner.layers]
        self.cache = PagedKVCache(len(self.layers), self.kv_heads, self.head_dim, self.dtype, block_size, max_tokens)
        self.generation_config = getattr(hf_model, "generation_config", None)

    # --- weights --------------------------------------------------------------------------
    def _cast(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor.detach().to(self.dtype).contiguous()

    def _layer_weights(self, layer) -> dict:
        attention = layer.self_attn
        weights = {
            "input_gamma": self._cast(layer.input_layernorm.weight),
            "w_qkv": self._cast(torch.cat([attention.q_proj.weight, attention.k_proj.weight,
                                           attention.v_proj.weight])),
            "q_norm": self._cast(attention.q_norm.weight), "k_norm": self._cast(attention.k_norm.weight),
            "w_o": self._cast(attention.o_proj.weight),
            "post_gamma": self._cast(layer.post_attention_layernorm.weight),
        }
        mlp = layer.mlp
        if hasattr(mlp, "experts"):  # Qwen3MoeSparseMoeBlock
            router = mlp.gate.weight.detach()
            experts = router.shape[0]
            padded = -experts % 16  # linear's cube tiles need 32-byte n tiles: zero rows, sliced off after it
            weights["moe"] = {"router": self._cast(torch.cat([router, router.new_zeros(padded, router.shape[1])])),
                              "experts": experts, "top_k": mlp.gate.top_k, "renormalize": bool(mlp.gate.norm_topk_prob),
                              "w": [self._cast(w) for w in split_gate_up(mlp.experts)]}
        else:
            weights["mlp"] = [self._cast(p.weight) for p in (mlp.gate_proj, mlp.up_proj, mlp.down_proj)]
        return weights

    # --- public API -----------------------------------------------------------------------
    @torch.no_grad()
    def prefill(self, input_ids):
        """Start the sequences of ``input_ids``; the logits of every position."""
        prompts, batched = _prompts(input_ids, "input_ids")
        self._check_ids(torch.cat(prompts), "input_ids")
        self.cache.reset(len(prompts))
        slots = [self.cache.append(b, len(p)) for b, p in enumerate(prompts)]
        tokens = torch.cat(prompts)
        positions = torch.cat([torch.arange(len(p)) for p in prompts])
        logits = self._forward(tokens, positions, torch.cat(slots), "prefill", [len(p) for p in prompts])
        per_sequence = list(logits.split([len(p) for p in prompts]))
        return torch.stack(per_sequence) if batched else per_sequence

    @torch.no_grad()
    def decode(self, token_ids):
        """One more token for each sequence of the last ``prefill``; next-token logits [B, vocab]."""
        if not self.cache.tables:
            raise RuntimeError("decode: no sequences yet; call prefill first")
        tokens = torch.as_tensor(token_ids).reshape(-1).long()
        if tokens.shape[0] != len(self.cache.tables):
            raise ValueError(f"token_ids: {tokens.shape[0]} tokens for {len(self.cache.tables)} sequences")
        self._check_ids(tokens, "token_ids")
        positions = self.cache.seq_lens().long()
        slots = torch.cat([self.cache.append(b, 1) for b in range(tokens.shape[0])])
        return self._forward(tokens, positions, slots, "decode", None)

    @torch.no_grad()
    def generate(self, input_ids, max_new_tokens: int, *, return_logits: bool = False):
        """Greedy decoding as HF's ``generate(do_sample=False)``: prompt + new tokens; a
        sequence that produced the generation config's eos token continues with its pad
        token, and decoding stops once all have.  A [B, S] input gives [B, S + n]; a list
        of prompts, a list of 1-D tensors.  ``return_logits``: also the logits each new
        token was chosen from, [B, n, vocab] (HF's ``output_logits``)."""
        if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 0:
            raise ValueError(f"max_new_tokens: must be an int >= 0, got {max_new_tokens!r}")
        prompts, batched = _prompts(input_ids, "input_ids")
        eos, pad = _stop_tokens(self.generation_config)
        generated, chosen_from = [], []
        if max_new_tokens:
            logits = torch.stack([row[-1] for row in self.prefill(prompts)])
            finished = torch.zeros(len(prompts), dtype=torch.bool)
            while True:
                tokens = torch.where(finished, torch.full_like(finished, pad or 0, dtype=torch.long), logits.argmax(-1))
                generated.append(tokens)
                chosen_from.append(logits)
                finished |= torch.isin(tokens, torch.tensor(eos, dtype=tokens.dtype))
                if len(generated) == max_new_tokens or bool(finished.all()):
                    break
                logits = self.decode(tokens)
        new = torch.stack(generated, 1) if generated else torch.empty(len(prompts), 0, dtype=torch.long)
        sequences = [torch.cat((p, row)) for p, row in zip(prompts, new)]
        sequences = torch.stack(sequences) if batched else sequences
        if not return_logits:
            return sequences
        vocab = self._lm_head.shape[0]
        return sequences, (torch.stack(chosen_from, 1) if chosen_from else torch.empty(len(prompts), 0, vocab))

    # --- one step -------------------------------------------------------------------------
    def _check_ids(self, tokens: torch.Tensor, name: str) -> None:
        vocab = self._embedding.shape[0]
        if bool(((tokens < 0) | (tokens >= vocab)).any()):
            raise ValueError(f"{name}: token ids must lie in [0, {vocab}) (the vocabulary), got "
                             f"{tokens.min().item()}..{tokens.max().item()}")

    def _forward(self, tokens, positions, slots, phase: str, prompt_lengths) -> torch.Tensor:
        hidden = torch.nn.functional.embedding(tokens, self._embedding).to(self.dtype)
        residual = torch.zeros_like(hidden)
        cos, sin = (t[0].to(self.dtype).contiguous() for t in self._rotary(hidden, positions[None]))
        for index, weights in enumerate(self.layers):
            with self.clock.timed(phase, index):
                hidden = self._layer(index, weights, hidden, residual, cos, sin, slots, phase, prompt_lengths)
        ops.inplace_add_rms_norm(hidden, residual, self._final_gamma, self.eps, backend=self.clock)
        if not bool(torch.isfinite(hidden).all()):
            raise FloatingPointError(f"the last hidden state is not finite in {self.dtype} (an fp16 overflow?); "
                                     "use dtype=torch.bfloat16")
        # fp32 logits: a bf16 rounding of the logits would make ties of values one ulp apart (greedy picks the
        # lower id of a tie), which the fp32 model does not have
        return torch.nn.functional.linear(hidden.float(), self._lm_head.float())

    def _layer(self, index, w, hidden, residual, cos, sin, slots, phase, prompt_lengths) -> torch.Tensor:
        clock = self.clock
        k_cache, v_cache = self.cache.flat(index)
        with clock.kernel("qwen3_pre_attn"):
            q = ops.qwen3_pre_attn(hidden, residual, w["input_gamma"], w["w_qkv"], w["q_norm"], w["k_norm"], cos, sin,
                                   k_cache, v_cache, slots, self.eps, backend=clock)
        if phase == "prefill":
            with clock.kernel("flash_attention"):
                attention = self._prefill_attention(q, k_cache, v_cache, prompt_lengths)
        else:
            with clock.kernel("paged_attention"):
                attention = ops.paged_attention(q, self.cache.k[index], self.cache.v[index], self.cache.block_table(),
                                                self.cache.seq_lens(), backend=clock)
        with clock.kernel("linear o_proj"):
            out = ops.linear(attention.reshape(q.shape[0], -1), w["w_o"], backend=clock)
        with clock.kernel("inplace_add_rms_norm"):
            ops.inplace_add_rms_norm(out, residual, w["post_gamma"], self.eps, backend=clock)
        if "mlp" in w:
            with clock.kernel("swiglu_mlp"):
                return ops.swiglu_mlp(out, *w["mlp"], backend=clock)
        moe = w["moe"]
        with clock.kernel("linear router"):
            router_logits = ops.linear(out, moe["router"], backend=clock)[:, :moe["experts"]].contiguous()
        with clock.kernel("moe_gating_topk"):
            weights, ids = ops.moe_gating_topk(router_logits, top_k=moe["top_k"], renormalize=moe["renormalize"],
                                               backend=clock)
        if self.model_dtype in COMPUTE_DTYPES:  # the HF router rounds its weights to the model dtype
            weights = weights.to(self.model_dtype)
        with clock.kernel("moe_experts", experts_hit=int(ids.unique().numel())):  # what the layer's floor reads
            return ops.moe_experts(out, weights, ids, *moe["w"], backend=clock)

    def _prefill_attention(self, q, k_cache, v_cache, lengths) -> torch.Tensor:
        """Causal attention of each new sequence over the k/v its cache slots hold (what
        qwen3_pre_attn just wrote there; gathered by index, no arithmetic)."""
        outputs, start = [], 0
        for sequence, length in enumerate(lengths):
            slots = self.cache.slots(sequence)
            k, v = (cache[slots].unsqueeze(0) for cache in (k_cache, v_cache))
            outputs.append(ops.flash_attention(q[start:start + length].unsqueeze(0), k, v, causal=True,
                                               backend=self.clock)[0])
            start += length
        return torch.cat(outputs)


def _prompts(input_ids, name: str) -> tuple[list[torch.Tensor], bool]:
    """The prompts as 1-D int64 tensors, and whether they came as one [B, S] tensor."""
    if isinstance(input_ids, torch.Tensor):
        if input_ids.dim() != 2 or input_ids.shape[1] == 0 or input_ids.shape[0] == 0:
            raise ValueError(f"{name}: a tensor must be [B, S] with B, S >= 1, got {list(input_ids.shape)}")
        if input_ids.dtype.is_floating_point or input_ids.dtype == torch.bool:
            raise TypeError(f"{name}: token ids must be integers, got {input_ids.dtype}")
        return list(input_ids.long()), True
    if not isinstance(input_ids, (list, tuple)) or not input_ids:
        raise TypeError(f"{name}: expected a [B, S] tensor or a non-empty list of prompts")
    prompts = [torch.as_tensor(p).reshape(-1).long() for p in input_ids]
    if any(len(p) == 0 for p in prompts):
        raise ValueError(f"{name}: every prompt needs at least one token")
    return prompts, False


def _stop_tokens(generation_config) -> tuple[list[int], int | None]:
    eos = getattr(generation_config, "eos_token_id", None)
    eos = [] if eos is None else ([eos] if isinstance(eos, int) else list(eos))
    pad = getattr(generation_config, "pad_token_id", None)
    return eos, pad if pad is not None else (eos[0] if eos else None)
