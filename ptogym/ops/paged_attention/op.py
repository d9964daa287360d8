"""Public API of paged decode attention (SK-01 over AT-17), its torch.library registration and ``SPEC``.

``paged_attention(q, k_cache, v_cache, block_table, seq_lens, *, scale=None)`` returns
out [B, Hq, D]: for each sequence b, softmax(q[b] k_b^T * scale) v_b over its
seq_lens[b] keys, which live in the blocks block_table[b, :ceil(seq_lens[b] / block_size)]
of the caches (one slot = block * block_size + offset, ``cache_scatter``'s layout).
The caches are only read.

torch.library: ``ptogym::paged_attention(Tensor q, Tensor k_cache, Tensor v_cache,
Tensor block_table, Tensor seq_lens, float scale) -> Tensor``.
"""
from __future__ import annotations

import math

import torch

from ptogym.atoms import host, measure
from ptogym.backends.base import LaunchReport
from ptogym.ops import OpSpec
from ptogym.ops.flash_attention.op import HEAD_DIMS, default_scale, scale_rule
from ptogym.tune.table import tuned_params

from . import kernel
from .golden import paged_attention_golden

INPUT_NAMES = ("q", "k_cache", "v_cache", "block_table", "seq_lens")
BLOCK_ALIGN = 16  # a block is the n extent of the score matmul: the cube's 16-row fractal


def shape_rule_violations(q, k_cache, v_cache, block_table, seq_lens) -> list:
    """Dtype and shape rules for tensors or case specs, as (exception, message) pairs."""
    problems = host.dtype_rule("q", q, host.HALF_DTYPES)
    if problems:
        return problems
    problems += host.same_dtype_rule("k_cache", k_cache, "q", q) + host.same_dtype_rule("v_cache", v_cache, "q", q)
    for name, t in (("block_table", block_table), ("seq_lens", seq_lens)):
        if t.dtype != torch.int32:
            problems.append((TypeError, f"{name}: dtype {t.dtype} must be torch.int32"))
    if len(q.shape) != 3:
        return problems + [(ValueError, f"q: needs shape [B, Hq, D], got {list(q.shape)}")]
    if len(k_cache.shape) != 4:
        return problems + [(ValueError, f"k_cache: needs shape [num_blocks, block_size, Hkv, D], "
                                        f"got {list(k_cache.shape)}")]
    batch, heads, head_dim = q.shape
    num_blocks, block_size, kv_heads, _ = k_cache.shape
    problems += host.shape_rule("k_cache", k_cache, (num_blocks, block_size, kv_heads, head_dim),
                                "[num_blocks, block_size, Hkv, D] with q's D")
    problems += host.shape_rule("v_cache", v_cache, tuple(k_cache.shape), "k_cache's shape")
    if len(block_table.shape) != 2 or block_table.shape[0] != batch:
        problems.append((ValueError, f"block_table: shape {list(block_table.shape)} must be [B, max_blocks] "
                                     f"with B = {batch}"))
    problems += host.shape_rule("seq_lens", seq_lens, (batch,), "[B]")
    if head_dim not in HEAD_DIMS:
        problems.append((ValueError, f"q: head dim D = {head_dim} is not one of {list(HEAD_DIMS)}"))
    if kv_heads == 0 or heads % kv_heads:
        problems.append((ValueError, f"k_cache: Hq = {heads} query heads must be a non-zero multiple of "
                                     f"Hkv = {kv_heads} kv heads (grouped-query attention)"))
    if block_size == 0 or block_size % BLOCK_ALIGN:
        problems.append((ValueError, f"k_cache: block_size = {block_size} must be a non-zero multiple of "
                                     f"{BLOCK_ALIGN}"))
    if math.prod(k_cache.shape) > host.INT32_MAX:
        problems.append((ValueError, f"k_cache: {math.prod(k_cache.shape)} elements > {host.INT32_MAX}; "
                                     "PyPTO shapes are int32-sized"))
    return problems


def value_violations(block_table, seq_lens, num_blocks: int, block_size: int) -> list[str]:
    """Lengths and the block-table entries they use: 1 <= seq_lens[b] <= max_blocks * block_size,
    used entries in [0, num_blocks).  Entries past a sequence's length are not looked at."""
    capacity = block_table.shape[1] * block_size
    bad = ((seq_lens < 1) | (seq_lens > capacity)).nonzero().flatten()
    if bad.numel():
        b = int(bad[0])
        return [f"seq_lens: seq_lens[{b}] = {int(seq_lens[b])} must be in [1, {capacity}] "
                f"(max_blocks {block_table.shape[1]} x block_size {block_size})"]
    used = torch.arange(block_table.shape[1], device=block_table.device)[None, :] * block_size < seq_lens[:, None]
    wrong = used & ((block_table < 0) | (block_table >= num_blocks))
    if wrong.any():
        b, j = (int(i) for i in wrong.nonzero()[0])
        return [f"block_table: block_table[{b}, {j}] = {int(block_table[b, j])} is used by seq_lens[{b}] = "
                f"{int(seq_lens[b])} and must be in [0, {num_blocks})"]
    return []


def validate(q, k_cache, v_cache, block_table, seq_lens, scale) -> None:
    """Raise TypeError/ValueError naming the argument and the rule; reads, writes nothing."""
    tensors = dict(zip(INPUT_NAMES, (q, k_cache, v_cache, block_table, seq_lens)))
    for name, t in tensors.items():
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    host.raise_first(shape_rule_violations(*tensors.values()))
    for name, t in tensors.items():
        if t.device != q.device:
            raise ValueError(f"{name}: device {t.device} must equal q's device {q.device}")
    for name in ("k_cache", "v_cache"):
        if not tensors[name].is_contiguous():
            raise ValueError(f"{name}: must be contiguous (strides {tensors[name].stride()}); the kernel reads its "
                             "blocks in place")
    host.raise_first(scale_rule(scale))
    host.raise_first(host.autograd_rule("paged_attention", tensors))
    if not any(host.is_meta(t) for t in (block_table, seq_lens)):  # meta tensors carry no values to check
        host.raise_first([(ValueError, m) for m in value_violations(block_table, seq_lens, *k_cache.shape[:2])])


def table_shape(q_shape, cache_shape, table_shape) -> dict:
    """The shape a call passes to the tuned table (``tuned_params(kernel, ...)``), from the
    shapes of q, a cache and the block table."""
    batch, heads, head_dim = q_shape
    _, block_size, kv_heads, _ = cache_shape
    return {"batch": batch, "kv_len": table_shape[1] * block_size, "group": heads // kv_heads,
            "block_size": block_size, "head_dim": head_dim, "kv_heads": kv_heads}


def tuning_shape(case) -> dict:
    """The shape a level's calls pass to the tuned table."""
    return table_shape(case.inputs["q"].shape, case.inputs["k_cache"].shape, case.inputs["block_table"].shape)


def launch(q, k_cache, v_cache, block_table, seq_lens, scale=None, backend=None, variant=None
           ) -> tuple[torch.Tensor, LaunchReport]:
    """Validate and run the kernel; return (out, launch report).  q, block_table and
    seq_lens may be strided (small, made contiguous); the caches are read in place."""
    validate(q, k_cache, v_cache, block_table, seq_lens, scale)
    batch, heads, head_dim = q.shape
    num_blocks, block_size, kv_heads, _ = k_cache.shape
    out = torch.empty(batch, heads, head_dim, dtype=q.dtype, device=q.device)
    static = {"batch": batch, "heads": heads, "kv_heads": kv_heads, "head_dim": head_dim, "num_blocks": num_blocks,
              "block_size": block_size, "max_blocks": block_table.shape[1], "dtype": host.HALF_DTYPES[q.dtype],
              **tuned_params(kernel, **table_shape(q.shape, k_cache.shape, block_table.shape)),
              **kernel.VARIANTS.get(variant, {})}
    slots, width = num_blocks * block_size, kv_heads * head_dim
    tensors = [q.contiguous().view(batch * heads, head_dim), k_cache.view(slots, width), v_cache.view(slots, width),
               block_table.contiguous(), seq_lens.contiguous(), out.view(batch * heads, head_dim)]
    report = host.launch(kernel.build, static, tensors, {"scale": default_scale(head_dim, scale)}, backend,
                         batch * heads)
    return out, report


@torch.library.custom_op("ptogym::paged_attention", mutates_args=())
def _paged_attention_op(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
                        seq_lens: torch.Tensor, scale: float) -> torch.Tensor:
    return launch(q, k_cache, v_cache, block_table, seq_lens, scale)[0]


@_paged_attention_op.register_fake
def _(q, k_cache, v_cache, block_table, seq_lens, scale):
    return torch.empty_like(q, memory_format=torch.contiguous_format)


def paged_attention(q, k_cache, v_cache, block_table, seq_lens, *, scale=None, backend=None):
    """Decode attention over a paged KV cache; returns out [B, Hq, D] in q's dtype.

    q [B, Hq, D] (one new token per sequence); k_cache, v_cache [num_blocks,
    block_size, Hkv, D] (slot = block * block_size + offset, as ``cache_scatter``
    writes them; only read); block_table [B, max_blocks] int32: sequence b's logical
    block j is physical block block_table[b, j] (entries past ceil(seq_lens[b] /
    block_size) are never read, whatever they hold); seq_lens [B] int32 in [1,
    max_blocks * block_size].  Hq % Hkv == 0; bf16/fp16; D in 64 / 128 / 256;
    block_size a multiple of 16; ``scale`` defaults to D^-0.5; fp32 softmax state.
    """
    if not torch.compiler.is_compiling():
        validate(q, k_cache, v_cache, block_table, seq_lens, scale)
    scale = default_scale(q.shape[-1], scale)
    if backend is None:
        return torch.ops.ptogym.paged_attention(q, k_cache, v_cache, block_table, seq_lens, scale)
    return launch(q, k_cache, v_cache, block_table, seq_lens, scale, backend)[0]


# --- what the runner, tests and benchmarks need -------------------------------------------
def case_seq_lens(case, generator) -> torch.Tensor:
    """attrs["seq_lens"]: one int for every sequence, a list of B ints, or absent:
    random lengths in [1, capacity] from the case seed."""
    batch, max_blocks = case.inputs["block_table"].shape
    capacity = max_blocks * case.inputs["k_cache"].shape[1]
    given = case.attrs.get("seq_lens")
    if given is None:
        return torch.randint(1, capacity + 1, (batch,), generator=generator, dtype=torch.int32)
    return torch.tensor([given] * batch if isinstance(given, int) else given, dtype=torch.int32)


def shuffled_block_table(seq_lens, max_blocks: int, num_blocks: int, block_size: int, generator) -> torch.Tensor:
    """Distinct physical blocks in random order for every used entry; the unused entries
    hold out-of-range garbage (num_blocks + 7), which the kernel must never read."""
    table = torch.full((len(seq_lens), max_blocks), num_blocks + 7, dtype=torch.int32)
    needed = [-(-int(n) // block_size) for n in seq_lens]
    physical = torch.randperm(num_blocks, generator=generator)[:sum(needed)].to(torch.int32)
    start = 0
    for b, count in enumerate(needed):
        table[b, :count] = physical[start:start + count]
        start += count
    return table


def _make_inputs(case, generator, device="cpu"):
    specs = case.inputs
    seq_lens = case_seq_lens(case, generator)
    num_blocks, block_size = specs["k_cache"].shape[:2]
    tensors = {name: torch.randn(specs[name].shape, generator=generator).to(specs[name].dtype)
               for name in ("q", "k_cache", "v_cache")}
    tensors["block_table"] = shuffled_block_table(seq_lens, specs["block_table"].shape[1], num_blocks, block_size,
                                                  generator)
    tensors["seq_lens"] = seq_lens
    return {name: t.to(device) for name, t in tensors.items()}


def _golden(inputs, attrs):
    return {"out": paged_attention_golden(*(inputs[n] for n in INPUT_NAMES), attrs.get("scale"))}


def _run(inputs, attrs, backend, variant=None):
    out, report = launch(*(inputs[n] for n in INPUT_NAMES), attrs.get("scale"), backend, variant)
    return {"out": out}, report


def _check_case(case) -> list[str]:
    if set(case.inputs) != set(INPUT_NAMES):
        return [f"inputs must be exactly {', '.join(INPUT_NAMES)}; got {sorted(case.inputs)}"]
    problems = [m for _, m in shape_rule_violations(*(case.inputs[n] for n in INPUT_NAMES))]
    if problems:
        return problems
    batch, max_blocks = case.inputs["block_table"].shape
    num_blocks, block_size = case.inputs["k_cache"].shape[:2]
    given = case.attrs.get("seq_lens")
    lengths = [given] * batch if isinstance(given, int) else given
    if lengths is None:
        return [] if batch * max_blocks <= num_blocks else [
            f"k_cache: {num_blocks} blocks cannot hold {batch} random sequences of up to {max_blocks} blocks"]
    if not isinstance(lengths, list) or len(lengths) != batch or not all(
            isinstance(n, int) and 1 <= n <= max_blocks * block_size for n in lengths):
        return [f"attrs.seq_lens: {given!r} must be an int or a list of {batch} ints in "
                f"[1, {max_blocks * block_size}]"]
    needed = sum(-(-n // block_size) for n in lengths)
    return [] if needed <= num_blocks else [f"k_cache: {num_blocks} blocks < the {needed} the sequences need"]


def kv_read_bytes(case) -> int:
    """Key and value bytes the sequences occupy (the floor any decode kernel reads)."""
    specs = case.inputs
    batch = specs["q"].shape[0]
    given = case.attrs.get("seq_lens")
    lengths = [given] * batch if isinstance(given, int) else given
    if lengths is None:  # random: the expectation
        lengths = [(specs["block_table"].shape[1] * specs["k_cache"].shape[1] + 1) / 2] * batch
    row = math.prod(specs["k_cache"].shape[2:]) * host.element_size(specs["k_cache"].dtype)
    return int(2 * sum(lengths) * row)


def hbm_bytes(case) -> int:
    """The keys and values read, q, the block table, the lengths and out."""
    specs = case.inputs
    small = sum(math.prod(specs[n].shape) * host.element_size(specs[n].dtype)
                for n in ("q", "block_table", "seq_lens"))
    return kv_read_bytes(case) + small + math.prod(specs["q"].shape) * host.element_size(specs["q"].dtype)


SPEC = OpSpec(
    name="paged_attention",
    description="paged decode attention (SK-01 over AT-17): GQA, KV blocks read in place through a block table, "
                "ragged lengths, fp32 state",
    make_inputs=_make_inputs,
    golden=_golden,
    run=_run,
    check_case=_check_case,
    hbm_bytes=hbm_bytes,
    input_names=INPUT_NAMES,
    output_names=("out",),
    attr_names=("seq_lens", "scale"),
    required_levels=("level0", "level1", "level2", "level3"),
    extra={"patterns": ("SK-01", "AT-01", "AT-12", "AT-13", "AT-17", "AT-20", "AT-21"), "variants": tuple(kernel.VARIANTS),
           "sim_summary": measure.summarizer(hbm_bytes), "tuning_shape": tuning_shape},
)
