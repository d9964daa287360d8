"""Qwen3 pre-attention: the golden against an fp64 model-style reference, the fused
kernel against the golden, the three in-place updates, torch.library and validation."""
import pytest
import torch

import ptogym.ops
from ptogym.ops import get_op
from ptogym.ops.qwen3_pre_attn.golden import qwen3_pre_attn_golden
from ptogym.ops.qwen3_pre_attn.op import INPUT_NAMES, qwen3_pre_attn
from ptogym.verify import detailed_tensor_compare
from ptogym.verify.cases import load_cases
from ptogym.verify.runner import make_case_inputs

TOL = dict(rtol=0.0078125, atol=1e-4, max_error_ratio=0.005)


def case_inputs(level="level1"):
    spec = get_op("qwen3_pre_attn")
    case = next(c for c in load_cases(spec.cases_path, spec) if c.id == level)
    return make_case_inputs(spec, case)


def reference_fp64(inputs, eps=1e-6):
    """The Hugging Face Qwen3 attention front end in fp64, written independently."""
    t = {k: v.double() if v.is_floating_point() else v for k, v in inputs.items()}
    head_dim = t["q_norm_gamma"].shape[0]
    kv_heads = t["k_cache"].shape[1]

    def norm(x, gamma):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * gamma

    def rotate(x):
        return torch.cat((-x[..., head_dim // 2:], x[..., :head_dim // 2]), -1)

    residual = t["hidden"] + t["residual"]
    qkv = norm(residual, t["input_gamma"]) @ t["w_qkv"].T
    tokens = qkv.shape[0]
    q, k, v = qkv.split([qkv.shape[1] - 2 * kv_heads * head_dim, kv_heads * head_dim, kv_heads * head_dim], -1)
    cos, sin = t["cos"][:, None], t["sin"][:, None]
    q = norm(q.reshape(tokens, -1, head_dim), t["q_norm_gamma"])
    k = norm(k.reshape(tokens, kv_heads, head_dim), t["k_norm_gamma"])
    return q * cos + rotate(q) * sin, residual, k * cos + rotate(k) * sin, v.reshape(tokens, kv_heads, head_dim)


def test_golden_tracks_fp64_reference():
    inputs = case_inputs("level2")
    q, residual, k_cache, v_cache = qwen3_pre_attn_golden(*[inputs[n] for n in INPUT_NAMES])
    q64, residual64, k64, v64 = reference_fp64(inputs)
    slots = inputs["slot_mapping"].long()
    # the golden rounds every stage to fp16 as the model does; fp64 stays within a few ulps
    for name, got, want in (("q", q, q64), ("residual", residual, residual64), ("k", k_cache[slots], k64),
                            ("v", v_cache[slots], v64)):
        result = detailed_tensor_compare(got, want, name, rtol=8e-3, atol=8e-3)
        assert result.all_close, result.report()


def test_fused_kernel_in_place_contract():
    inputs = case_inputs("level3")
    originals = {k: v.clone() for k, v in inputs.items()}
    addresses = {n: inputs[n].data_ptr() for n in ("residual", "k_cache", "v_cache")}
    expected = qwen3_pre_attn_golden(*[originals[n] for n in INPUT_NAMES])
    q = qwen3_pre_attn(*[inputs[n] for n in INPUT_NAMES])
    assert all(inputs[n].data_ptr() == a for n, a in addresses.items())
    for name, got, want in zip(("q", "residual", "k_cache", "v_cache"),
                               (q, inputs["residual"], inputs["k_cache"], inputs["v_cache"]), expected):
        result = detailed_tensor_compare(got, want, name, **TOL)
        assert result.all_close, result.report()
    for name in ("hidden", "w_qkv", "cos", "sin", "slot_mapping"):  # read only
        assert torch.equal(inputs[name], originals[name])
    untouched = torch.ones(inputs["k_cache"].shape[0], dtype=torch.bool)
    untouched[inputs["slot_mapping"].long()] = False
    assert torch.equal(inputs["k_cache"][untouched], originals["k_cache"][untouched])


PADDING = {"middle": [0, -1, 2], "trailing": [5, 1, -1], "all": [-1, -1, -1]}


def padded_inputs(pattern):
    """level1's inputs (3 tokens, 8 slots) with some slots replaced by -1."""
    inputs = case_inputs("level1")
    inputs["slot_mapping"] = torch.tensor(PADDING[pattern], dtype=inputs["slot_mapping"].dtype)
    return inputs


def check_padded_run(inputs, backend=None):
    """Run on *inputs*; q and residual as the golden (and q bitwise as the same batch
    with every slot valid), kept tokens' cache rows as the golden, every other cache
    row bitwise untouched."""
    originals = {k: v.clone() for k, v in inputs.items()}
    expected = dict(zip(("q", "residual", "k_cache", "v_cache"),
                        qwen3_pre_attn_golden(*[originals[n] for n in INPUT_NAMES])))
    q = qwen3_pre_attn(*[inputs[n] for n in INPUT_NAMES], backend=backend)
    slots = originals["slot_mapping"]
    kept = slots[slots >= 0].long()
    untouched = torch.ones(originals["k_cache"].shape[0], dtype=torch.bool)
    untouched[kept] = False
    for name, got in (("q", q), ("residual", inputs["residual"])):
        result = detailed_tensor_compare(got, expected[name], name, **TOL)
        assert result.all_close, result.report()
    for name in ("k_cache", "v_cache"):
        assert torch.equal(inputs[name][untouched], originals[name][untouched]), f"{name}: a padding row was written"
        result = detailed_tensor_compare(inputs[name][kept], expected[name][kept], name, **TOL)
        assert result.all_close, result.report()
    unpadded = {k: v.clone() for k, v in originals.items()}
    unpadded["slot_mapping"] = torch.arange(len(slots), dtype=slots.dtype)
    assert torch.equal(q, qwen3_pre_attn(*[unpadded[n] for n in INPUT_NAMES], backend=backend))


@pytest.mark.parametrize("pattern", list(PADDING))
def test_padding_slots_are_skipped_like_cache_scatter(pattern):
    check_padded_run(padded_inputs(pattern))


def test_golden_skips_padding_slots():
    inputs = padded_inputs("middle")
    _, _, k_cache, v_cache = qwen3_pre_attn_golden(*[inputs[n] for n in INPUT_NAMES])
    _, _, k64, v64 = reference_fp64(inputs)
    assert torch.equal(k_cache[1], inputs["k_cache"][1]) and torch.equal(k_cache[3:], inputs["k_cache"][3:])
    for got, want in ((k_cache[[0, 2]], k64[[0, 2]]), (v_cache[[0, 2]], v64[[0, 2]])):
        assert detailed_tensor_compare(got, want, "kv", rtol=8e-3, atol=8e-3).all_close


def test_padding_slots_on_pypto_sim():
    """Real pypto: the padded batch (k/v rows out of the fused kernel, then two
    cache_scatter launches) compiles, simulates and computes the same numbers."""
    pytest.importorskip("pypto")
    from ptogym.backends._pypto_worker import stop_workers

    try:
        check_padded_run(padded_inputs("middle"), backend="pypto-sim")
    finally:
        stop_workers()


def test_empty_batch():
    inputs = {k: v[:0] if k in ("hidden", "residual", "cos", "sin", "slot_mapping") else v
              for k, v in case_inputs("level0").items()}
    assert qwen3_pre_attn(*[inputs[n] for n in INPUT_NAMES]).shape == (0, 4, 64)


@pytest.mark.parametrize("padded", [False, True])
def test_opcheck(padded):
    inputs = padded_inputs("middle") if padded else case_inputs("level0")
    torch.library.opcheck(torch.ops.ptogym.qwen3_pre_attn.default, tuple(inputs[n] for n in INPUT_NAMES) + (1e-6,))


def test_torch_compile_keeps_the_mutations():
    def step(*args):
        return ptogym.ops.qwen3_pre_attn(*args).float().sum()

    torch._dynamo.reset()
    inputs = case_inputs("level1")
    eager = {k: v.clone() for k, v in inputs.items()}
    total = torch.compile(step, fullgraph=True)(*[inputs[n] for n in INPUT_NAMES])
    want = step(*[eager[n] for n in INPUT_NAMES])
    assert torch.equal(total, want)
    for name in ("residual", "k_cache", "v_cache"):
        assert torch.equal(inputs[name], eager[name])


def _with(name, make):
    return lambda t: {**t, name: make(t)}


BAD_INPUTS = [
    ("fp32", lambda t: {k: v.float() if v.is_floating_point() else v for k, v in t.items()}, TypeError, "hidden: dtype"),
    ("gamma dtype", _with("input_gamma", lambda t: t["input_gamma"].half()), TypeError, "input_gamma: dtype"),
    ("slot dtype", _with("slot_mapping", lambda t: t["slot_mapping"].short()), TypeError, "slot_mapping: dtype"),
    ("hidden rank", _with("hidden", lambda t: t["hidden"][None]), ValueError, "hidden: needs shape"),
    ("residual shape", _with("residual", lambda t: t["residual"][:1]), ValueError, "residual: shape"),
    ("input_gamma", _with("input_gamma", lambda t: t["input_gamma"][:128]), ValueError, "input_gamma: shape"),
    ("k_norm_gamma", _with("k_norm_gamma", lambda t: t["k_norm_gamma"][:32]), ValueError, "k_norm_gamma: shape"),
    ("cos", _with("cos", lambda t: t["cos"][:, :32]), ValueError, "cos: shape"),
    ("v_cache", _with("v_cache", lambda t: t["v_cache"][:4]), ValueError, "v_cache: shape"),
    ("k_cache head_dim", _with("k_cache", lambda t: t["k_cache"][..., :32]), ValueError, "k_cache: shape"),
    ("w_qkv width", _with("w_qkv", lambda t: t["w_qkv"][:, :128]), ValueError, "w_qkv: shape"),
    ("w_qkv rows", _with("w_qkv", lambda t: t["w_qkv"][:200]), ValueError, "w_qkv: shape"),
    ("gqa", _with("w_qkv", lambda t: t["w_qkv"][:320]), ValueError, "multiple of the 2 kv heads"),
    ("slots count", _with("slot_mapping", lambda t: t["slot_mapping"][:2]), ValueError, "slot_mapping: shape"),
    ("slot range", _with("slot_mapping", lambda t: torch.tensor([0, 8, 2])), ValueError, "is >= the cache's 8 slots"),
    ("slot range beside padding", _with("slot_mapping", lambda t: torch.tensor([-1, 9, 2])), ValueError,
     "slot 9 at token 1 is >= the cache's 8 slots"),
    ("slot twice", _with("slot_mapping", lambda t: torch.tensor([1, 5, 1])), ValueError, "named by tokens"),
    ("slot twice beside padding", _with("slot_mapping", lambda t: torch.tensor([4, -1, 4])), ValueError,
     r"slot 4 is named by tokens \[0, 2\]"),
    ("caches alias", _with("v_cache", lambda t: t["k_cache"]), ValueError, "v_cache: shares memory with k_cache"),
    ("not a tensor", _with("cos", lambda t: t["cos"].tolist()), TypeError, "cos: expected a torch.Tensor"),
]


@pytest.mark.parametrize("label, corrupt, error, message", BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_is_rejected_and_nothing_is_written(label, corrupt, error, message):
    inputs = corrupt(case_inputs("level1"))
    snapshots = {k: v.clone() for k, v in inputs.items() if isinstance(v, torch.Tensor)}
    with pytest.raises(error, match=message):
        qwen3_pre_attn(*[inputs[n] for n in INPUT_NAMES])
    assert all(torch.equal(v, inputs[k]) for k, v in snapshots.items())


def test_bad_eps():
    inputs = case_inputs("level0")
    with pytest.raises(ValueError, match="eps"):
        qwen3_pre_attn(*[inputs[n] for n in INPUT_NAMES], eps=0.0)
