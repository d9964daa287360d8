"""Public API of the KV-cache scatter (AT-16), its torch.library registration and ``SPEC``.

``cache_scatter(cache, values, slot_mapping)`` writes ``values[t]`` into
``cache[slot_mapping[t]]`` in place and returns ``cache``.  Negative slots are
padding (vLLM's -1) and skip their token; a slot >= cache.shape[0] or a slot named
twice is refused before anything is written.

torch.library: ``ptogym::cache_scatter(Tensor(a!) cache, Tensor values, Tensor
slot_mapping) -> ()``.
"""
from __future__ import annotations

import math

import torch

from ptogym.atoms import host
from ptogym.backends import get_backend
from ptogym.backends.base import LaunchReport
from ptogym.ops import OpSpec
from ptogym.ops.inplace import check_inplace_arguments
from ptogym.tune.table import tuned_params

from . import kernel
from .golden import cache_scatter_golden

SUPPORTED_DTYPES = {torch.bfloat16: "DT_BF16", torch.float16: "DT_FP16", torch.float32: "DT_FP32",
                    torch.int8: "DT_INT8"}
INDEX_DTYPES = {torch.int32: "DT_INT32", torch.int64: "DT_INT64"}
ALIGN_BYTES = 32
MAX_ROW_BYTES = kernel.UB_BYTES // 4
INT32_MAX = 2**31 - 1


def shape_rule_violations(cache, values, slot_mapping) -> list[tuple[type, str]]:
    """The dtype and shape rules as (exception type, message) pairs, for anything with
    ``.shape`` and ``.dtype`` (the caller's tensors or a case's declared inputs)."""
    if cache.dtype not in SUPPORTED_DTYPES:
        return [(TypeError, f"cache: dtype {cache.dtype} unsupported; use one of {list(SUPPORTED_DTYPES)}")]
    problems = []
    if values.dtype != cache.dtype:
        problems.append((TypeError, f"values: dtype {values.dtype} must equal cache's dtype {cache.dtype}"))
    if slot_mapping.dtype not in INDEX_DTYPES:
        problems.append((TypeError, f"slot_mapping: dtype {slot_mapping.dtype} must be one of {list(INDEX_DTYPES)}"))
    if len(cache.shape) < 2:
        return problems + [(ValueError, f"cache: needs shape [slots, ...] with a row per slot, got {list(cache.shape)}")]
    row_shape = tuple(cache.shape[1:])
    if len(values.shape) < 1 or tuple(values.shape[1:]) != row_shape:
        problems.append((ValueError, f"values: shape {list(values.shape)} must be [T, {', '.join(map(str, row_shape))}] "
                                     "(one cache row per token)"))
    if len(slot_mapping.shape) != 1 or (len(values.shape) and slot_mapping.shape[0] != values.shape[0]):
        problems.append((ValueError, f"slot_mapping: shape {list(slot_mapping.shape)} must be [T] = "
                                     f"[{values.shape[0] if len(values.shape) else '?'}]"))
    row_bytes = math.prod(row_shape) * torch.empty((), dtype=cache.dtype).element_size()
    if row_bytes % ALIGN_BYTES:
        problems.append((ValueError, f"cache: a row of {row_bytes} B must be a multiple of {ALIGN_BYTES} B "
                                     "(vector tiles are 32-byte aligned)"))
    if row_bytes > MAX_ROW_BYTES:
        problems.append((ValueError, f"cache: a row of {row_bytes} B > {MAX_ROW_BYTES} B (a quarter of the UB)"))
    if math.prod(cache.shape) > INT32_MAX:
        problems.append((ValueError, f"cache: {math.prod(cache.shape)} elements > {INT32_MAX}; "
                                     "PyPTO shapes are int32-sized"))
    return problems


def slot_violations(slot_mapping: torch.Tensor, slots: int) -> list[str]:
    """Slot values the device cannot take: out of range, or one slot named twice (none
    known for a meta tensor)."""
    if host.is_meta(slot_mapping):
        return []
    problems = []
    beyond = (slot_mapping >= slots).nonzero().flatten()
    if beyond.numel():
        token = int(beyond[0])
        problems.append(f"slot_mapping: slot {int(slot_mapping[token])} at token {token} is >= the cache's "
                        f"{slots} slots ({beyond.numel()} such token(s)); negative slots are padding")
    used = slot_mapping[slot_mapping >= 0]
    unique, counts = torch.unique(used, return_counts=True)
    if (counts > 1).any():
        slot = int(unique[counts > 1][0])
        tokens = (slot_mapping == slot).nonzero().flatten().tolist()
        problems.append(f"slot_mapping: slot {slot} is named by tokens {tokens}; each slot may be written once")
    return problems


def padding_attr_violations(padding, tokens: int, slots: int) -> list[str]:
    """A case's ``padding`` attribute (trailing tokens with slot -1) must leave at most
    ``slots`` tokens to write."""
    if isinstance(padding, int) and 0 <= padding <= tokens and tokens - padding <= slots:
        return []
    return [f"attrs.padding: {padding!r} padded tokens of {tokens} must leave at most {slots} tokens to write "
            "into the cache's slots"]


def validate(cache, values, slot_mapping) -> None:
    """Raise TypeError/ValueError naming the argument and the rule; writes nothing."""
    for name, t in (("cache", cache), ("values", values), ("slot_mapping", slot_mapping)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    for error, message in shape_rule_violations(cache, values, slot_mapping)[:1]:
        raise error(message)
    for name, t in (("values", values), ("slot_mapping", slot_mapping)):
        if t.device != cache.device:
            raise ValueError(f"{name}: device {t.device} must equal cache's device {cache.device}")
    if not cache.is_contiguous():
        raise ValueError(f"cache: must be contiguous (strides {cache.stride()}); the op writes in place")
    check_inplace_arguments("cache_scatter", written={"cache": cache}, read={"values": values,
                                                                           "slot_mapping": slot_mapping})
    for message in slot_violations(slot_mapping, cache.shape[0])[:1]:
        raise ValueError(message)


def tuning_shape(case) -> dict:
    """The shape a level's calls pass to the tuned table (``launch``'s ``tuned_params``)."""
    cache, slot_mapping = case.inputs["cache"], case.inputs["slot_mapping"]
    return {"tokens": math.prod(slot_mapping.shape), "row": math.prod(cache.shape[1:]),
            "dtype": SUPPORTED_DTYPES[cache.dtype], "index_dtype": INDEX_DTYPES[slot_mapping.dtype]}


def launch(cache, values, slot_mapping, backend=None) -> LaunchReport:
    """Validate, drop the padding tokens, then scatter in place; return the launch report."""
    validate(cache, values, slot_mapping)
    backend = backend if not isinstance(backend, (str, type(None))) else get_backend(backend)
    row = math.prod(cache.shape[1:])
    static = {"row": row, "dtype": SUPPORTED_DTYPES[cache.dtype], "index_dtype": INDEX_DTYPES[slot_mapping.dtype]}
    static.update(tuned_params(kernel, tokens=slot_mapping.numel(), **static))
    if host.is_meta(cache):  # which tokens are padding is unknown: the launch gives shapes only
        return backend.launch(kernel.build, static, [values.reshape(-1, row), slot_mapping.reshape(-1, 1),
                                                     cache.view(-1, row)])
    keep = slot_mapping >= 0
    if not bool(keep.any()):
        return LaunchReport(backend=backend.name, wall_s=0.0)
    rows = values.reshape(-1, row)[keep].contiguous()
    index = slot_mapping[keep].reshape(-1, 1).contiguous()
    return backend.launch(kernel.build, static, [rows, index, cache.view(-1, row)])


@torch.library.custom_op("ptogym::cache_scatter", mutates_args=("cache",))
def _cache_scatter_op(cache: torch.Tensor, values: torch.Tensor, slot_mapping: torch.Tensor) -> None:
    launch(cache, values, slot_mapping)


@_cache_scatter_op.register_fake
def _(cache, values, slot_mapping):
    return None


def cache_scatter(cache, values, slot_mapping, *, backend=None):
    """Write ``values[t]`` into ``cache[slot_mapping[t]]`` in place; return ``cache``.

    cache: [slots, ...] (a paged cache [blocks, block_size, ...] passes as
    ``cache.view(-1, ...)``, slot = block * block_size + offset); values: [T, ...]
    with cache's row shape and dtype; slot_mapping: [T] int32/int64.  Negative slots
    are padding: their tokens are skipped.  A slot >= slots or named twice raises
    ValueError before anything is written.
    """
    if not torch.compiler.is_compiling():
        validate(cache, values, slot_mapping)
    if backend is None:
        torch.ops.ptogym.cache_scatter(cache, values, slot_mapping)
    else:
        launch(cache, values, slot_mapping, backend)
    return cache


# --- what the runner, tests and benchmarks need -------------------------------------------
def make_slot_mapping(tokens: int, slots: int, padding: int, dtype, generator) -> torch.Tensor:
    """Distinct random slots for the first tokens - padding tokens, -1 for the rest."""
    if tokens - padding > slots:
        raise ValueError(f"{tokens - padding} distinct slots do not fit {slots} cache slots")
    mapping = torch.full((tokens,), -1, dtype=torch.int64)
    mapping[:tokens - padding] = torch.randperm(slots, generator=generator)[:tokens - padding]
    return mapping.to(dtype)


def _make_inputs(case, generator, device="cpu"):
    cache_spec, values_spec, slots_spec = (case.inputs[n] for n in ("cache", "values", "slot_mapping"))
    cache = torch.randn(cache_spec.shape, generator=generator).to(cache_spec.dtype)
    values = torch.randn(values_spec.shape, generator=generator).to(values_spec.dtype)
    mapping = make_slot_mapping(slots_spec.shape[0], cache_spec.shape[0], case.attrs.get("padding", 0),
                                slots_spec.dtype, generator)
    return {"cache": cache.to(device), "values": values.to(device), "slot_mapping": mapping.to(device)}


def _golden(inputs, attrs):
    return {"cache": cache_scatter_golden(inputs["cache"], inputs["values"], inputs["slot_mapping"])}


def _run(inputs, attrs, backend, variant=None):
    if variant is not None:
        raise ValueError(f"cache_scatter has no kernel variants, got {variant!r}")
    report = launch(inputs["cache"], inputs["values"], inputs["slot_mapping"], backend)
    return {"cache": inputs["cache"]}, report


def _check_case(case) -> list[str]:
    if set(case.inputs) != {"cache", "values", "slot_mapping"}:
        return [f"inputs must be exactly cache, values, slot_mapping; got {sorted(case.inputs)}"]
    inputs = [case.inputs[n] for n in ("cache", "values", "slot_mapping")]
    problems = [message for _, message in shape_rule_violations(*inputs)]
    return problems + padding_attr_violations(case.attrs.get("padding", 0), inputs[2].shape[0] if inputs[2].shape else 0,
                                              inputs[0].shape[0])


def hbm_bytes(case) -> int:
    """Read the written tokens' values and slots, write their cache rows."""
    cache, values, slots = (case.inputs[n] for n in ("cache", "values", "slot_mapping"))
    written = slots.shape[0] - case.attrs.get("padding", 0)
    row_bytes = math.prod(cache.shape[1:]) * torch.empty((), dtype=cache.dtype).element_size()
    return written * (2 * row_bytes + torch.empty((), dtype=slots.dtype).element_size())


SPEC = OpSpec(
    name="cache_scatter",
    description="KV-cache scatter (AT-16): cache[slot_mapping[t]] = values[t] in place, negative slots skipped",
    make_inputs=_make_inputs,
    golden=_golden,
    run=_run,
    check_case=_check_case,
    hbm_bytes=hbm_bytes,
    output_names=("cache",),
    input_names=("cache", "values", "slot_mapping"),
    attr_names=("padding",),
    writes=("cache",),
    required_levels=("level0", "level1"),
    extra={"patterns": ("AT-16",), "tuning_shape": tuning_shape},
)
