"""Flash attention (SK-01): the kernel against an fp64 reference written here and against
torch's scaled_dot_product_attention, on ragged lengths, GQA ratios, causal on/off,
Sq = 1, long key sequences and rows without keys; the golden; torch.library; errors."""
import math

import pytest
import torch

import ptogym.ops
from ptogym.ops.flash_attention.golden import flash_attention_golden
from ptogym.ops.flash_attention.op import flash_attention
from ptogym.verify import detailed_tensor_compare

TOL = {torch.bfloat16: 8e-3, torch.float16: 2e-3}


def make(batch, q_len, kv_len, heads, kv_heads, head_dim, dtype=torch.bfloat16, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, q_len, heads, head_dim, generator=g).to(dtype)
    k = torch.randn(batch, kv_len, kv_heads, head_dim, generator=g).to(dtype)
    v = torch.randn(batch, kv_len, kv_heads, head_dim, generator=g).to(dtype)
    return q, k, v


def visible(q_len, kv_len, causal):
    """[Sq, Skv] bool: key j visible to query row i (bottom-right causal alignment)."""
    keep = torch.ones(q_len, kv_len, dtype=torch.bool)
    if causal:
        for i in range(q_len):
            keep[i, max(0, i + kv_len - q_len + 1):] = False
    return keep


def reference_fp64(q, k, v, causal, scale):
    """softmax(q k^T * scale + mask) v in fp64, head by head; rows without keys: out 0, lse -inf."""
    batch, q_len, heads, head_dim = q.shape
    kv_heads = k.shape[2]
    keep = visible(q_len, k.shape[1], causal)
    out = torch.zeros(batch, q_len, heads, head_dim, dtype=torch.float64)
    lse = torch.full((batch, heads, q_len), -math.inf, dtype=torch.float64)
    for b in range(batch):
        for h in range(heads):
            kv = h // (heads // kv_heads)
            s = q[b, :, h].double() @ k[b, :, kv].double().T * scale
            s = torch.where(keep, s, -math.inf)
            rows = keep.any(dim=1)
            m = s[rows].max(dim=1, keepdim=True).values
            p = torch.exp(s[rows] - m)
            out[b, rows, h] = p @ v[b, :, kv].double() / p.sum(dim=1, keepdim=True)
            lse[b, h, rows] = (m + p.sum(dim=1, keepdim=True).log()).squeeze(1)
    return out, lse


def sdpa_reference(q, k, v, causal, scale):
    """torch's SDPA in fp64 with the bottom-right mask (its own is_causal is top-left);
    rows without keys (NaN there) are returned as NaN and left out by the caller."""
    group = q.shape[2] // k.shape[2]
    qt, kt, vt = (t.double().transpose(1, 2) for t in (q, k, v))
    out = torch.nn.functional.scaled_dot_product_attention(
        qt, kt.repeat_interleave(group, 1), vt.repeat_interleave(group, 1),
        attn_mask=visible(q.shape[1], k.shape[1], causal), scale=scale)
    return out.transpose(1, 2)


def assert_close(name, actual, expected, tol):
    result = detailed_tensor_compare(actual, expected, name, rtol=tol, atol=tol)
    assert result.all_close, result.report()


MATRIX = [  # batch, Sq, Skv, Hq, Hkv, D, causal, dtype
    (1, 16, 16, 2, 2, 64, False, torch.bfloat16),       # GQA ratio 1, one block
    (2, 37, 300, 8, 2, 64, True, torch.bfloat16),       # ratio 4, ragged, causal bottom-right
    (2, 150, 150, 8, 1, 128, True, torch.float16),      # MQA ratio 8, a whole q block + tail
    (1, 1, 1000, 8, 1, 128, True, torch.bfloat16),      # Sq = 1, long Skv with a partial key block
    (3, 1, 77, 4, 4, 128, False, torch.float16),        # decode-shaped, non-causal
    (1, 130, 520, 4, 1, 64, False, torch.bfloat16),     # ragged both ways, ratio 4
    (1, 40, 40, 2, 1, 256, True, torch.bfloat16),       # D = 256
]


@pytest.mark.parametrize("batch, q_len, kv_len, heads, kv_heads, head_dim, causal, dtype", MATRIX)
def test_matches_fp64_and_sdpa(batch, q_len, kv_len, heads, kv_heads, head_dim, causal, dtype):
    q, k, v = make(batch, q_len, kv_len, heads, kv_heads, head_dim, dtype, seed=q_len + kv_len)
    scale = head_dim ** -0.5
    out, lse = flash_attention(q, k, v, causal=causal, return_lse=True)
    assert out.dtype == dtype and out.shape == q.shape and lse.shape == (batch, heads, q_len)
    assert lse.dtype == torch.float32
    out64, lse64 = reference_fp64(q, k, v, causal, scale)
    assert_close("out", out, out64, TOL[dtype])
    assert_close("lse", lse, lse64, 1e-5)
    assert_close("out_vs_sdpa", out, sdpa_reference(q, k, v, causal, scale), TOL[dtype])


@pytest.mark.parametrize("variant", ["loops", "upstream", "kv512"])
@pytest.mark.parametrize("shape, causal", [((2, 150, 300, 4, 2, 64), True), ((1, 130, 520, 2, 1, 64), False),
                                           ((1, 50, 20, 2, 2, 64), True)])
def test_every_schedule_matches_fp64(variant, shape, causal):
    """The block loops with workspaces (used above UNROLL_STEPS steps a head, and by the
    variants) give the same answers as the default unrolled schedule."""
    from ptogym.ops.flash_attention.op import launch

    q, k, v = make(*shape, seed=7)
    out, lse, _ = launch(q, k, v, causal, None, None, variant)
    out64, lse64 = reference_fp64(q, k, v, causal, 64 ** -0.5)
    assert_close("out", out, out64, TOL[torch.bfloat16])
    seen = lse64 > -math.inf
    assert_close("lse", lse[seen], lse64[seen], 1e-5)
    assert torch.equal(lse[~seen], lse64[~seen].float())


def test_rows_without_keys_are_zero_and_minus_inf():
    """Causal with Sq > Skv: the first Sq - Skv rows see no key: out 0, lse -inf, no NaN."""
    q, k, v = make(2, 50, 20, 4, 2, 64)
    out, lse = flash_attention(q, k, v, causal=True, return_lse=True)
    assert not out.isnan().any() and not lse.isnan().any()
    assert torch.equal(out[:, :30], torch.zeros_like(out[:, :30]))
    assert torch.equal(lse[:, :, :30], torch.full_like(lse[:, :, :30], -math.inf))
    out64, lse64 = reference_fp64(q, k, v, True, 64 ** -0.5)
    assert_close("out", out, out64, TOL[torch.bfloat16])
    assert_close("lse", lse[:, :, 30:], lse64[:, :, 30:], 1e-5)


def test_scale_and_strided_inputs():
    """A custom scale; q, k, v as transposes of [B, H, S, D] tensors (not contiguous)."""
    g = torch.Generator().manual_seed(3)
    qt, kt, vt = (torch.randn(2, heads, s, 64, generator=g).bfloat16() for heads, s in ((4, 33), (2, 70), (2, 70)))
    q, k, v = (t.transpose(1, 2) for t in (qt, kt, vt))
    assert not q.is_contiguous()
    before = [t.clone() for t in (q, k, v)]
    out = flash_attention(q, k, v, causal=True, scale=0.3)
    assert all(torch.equal(a, b) for a, b in zip(before, (q, k, v)))
    assert_close("out", out, reference_fp64(q, k, v, True, 0.3)[0], TOL[torch.bfloat16])


def test_golden_tracks_fp64():
    q, k, v = make(2, 45, 90, 4, 2, 64, torch.bfloat16)
    out, lse = flash_attention_golden(q, k, v, causal=True)
    out64, lse64 = reference_fp64(q, k, v, True, 0.125)
    assert_close("out", out, out64, TOL[torch.bfloat16])
    assert_close("lse", lse, lse64, 1e-5)


def test_default_return_and_registry():
    q, k, v = make(1, 8, 8, 2, 2, 64)
    out = ptogym.ops.flash_attention(q, k, v)
    assert isinstance(out, torch.Tensor) and out.shape == q.shape


def test_empty_batch():
    q, k, v = make(0, 8, 8, 2, 2, 64)
    out, lse = flash_attention(q, k, v, return_lse=True)
    assert out.shape == q.shape and lse.shape == (0, 2, 8)


def test_opcheck():
    q, k, v = make(1, 20, 24, 4, 2, 64)
    torch.library.opcheck(torch.ops.ptogym.flash_attention.default, (q, k, v, True, 0.125))
    torch.library.opcheck(torch.ops.ptogym.flash_attention.default, (q, k, v, False, 0.2))


def test_torch_compile_fullgraph():
    def step(q, k, v):
        out, lse = ptogym.ops.flash_attention(q, k, v, causal=True, return_lse=True)
        return out * 2, lse

    torch._dynamo.reset()
    q, k, v = make(1, 20, 24, 4, 2, 64)
    for got, want in zip(torch.compile(step, fullgraph=True)(q, k, v), step(q, k, v)):
        assert torch.equal(got, want)


BAD_INPUTS = [
    ("fp32", lambda q, k, v: (q.float(), k.float(), v.float(), {}), TypeError, "q: dtype"),
    ("k dtype", lambda q, k, v: (q, k.half(), v, {}), TypeError, "k: dtype"),
    ("rank", lambda q, k, v: (q[0], k, v, {}), ValueError, r"q: needs shape \[B, S, H, D\]"),
    ("v shape", lambda q, k, v: (q, k, v[:, :5], {}), ValueError, "v: shape"),
    ("k head dim", lambda q, k, v: (q, torch.cat([k, k], -1), v, {}), ValueError, "k: shape"),
    ("group", lambda q, k, v: (q[:, :, :3], k, v, {}), ValueError, "multiple of Hkv"),
    ("head dim", lambda q, k, v: (q[..., :32], k[..., :32], v[..., :32], {}), ValueError, "head dim D = 32"),
    ("no keys", lambda q, k, v: (q, k[:, :0], v[:, :0], {}), ValueError, "Skv = 0"),
    ("causal", lambda q, k, v: (q, k, v, {"causal": 1}), TypeError, "causal: must be a bool, got int 1"),
    ("scale", lambda q, k, v: (q, k, v, {"scale": float("nan")}), ValueError, "scale: must be a finite"),
    ("huge int scale", lambda q, k, v: (q, k, v, {"scale": 10**400}), ValueError, "scale: must be a finite"),
    ("not a tensor", lambda q, k, v: (q, k.tolist(), v, {}), TypeError, "k: expected a torch"),
]


@pytest.mark.parametrize("label, corrupt, error, message", BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_is_rejected_untouched(label, corrupt, error, message):
    q, k, v, kwargs = corrupt(*make(1, 8, 8, 4, 2, 64))
    before = [t.clone() for t in (q, k, v) if isinstance(t, torch.Tensor)]
    with pytest.raises(error, match=message):
        flash_attention(q, k, v, **kwargs)
    assert all(torch.equal(a, b) for a, b in zip(before, [t for t in (q, k, v) if isinstance(t, torch.Tensor)]))


def test_numpy_bool_causal_is_a_bool():
    import numpy as np

    q, k, v = make(1, 8, 8, 4, 2, 64)
    assert torch.equal(flash_attention(q, k, v, causal=np.bool_(True)), flash_attention(q, k, v, causal=True))


def test_case_files_use_the_call_rules():
    import dataclasses

    from ptogym.ops import get_op
    from ptogym.verify.cases import TensorSpec, load_cases

    spec = get_op("flash_attention")
    case = load_cases(spec.cases_path, spec)[0]
    bad = dataclasses.replace(case, attrs={"causal": True}, inputs={
        "q": TensorSpec((1, 8, 6, 64), torch.bfloat16), "k": TensorSpec((1, 8, 4, 64), torch.bfloat16),
        "v": TensorSpec((1, 8, 4, 64), torch.bfloat16)})
    assert spec.check_case(bad) == ["k: Hq = 6 query heads must be a non-zero multiple of Hkv = 4 kv heads "
                                    "(grouped-query attention)"]


@pytest.mark.pypto
@pytest.mark.parametrize("shape, causal", [((1, 40, 72, 4, 2, 64), True), ((2, 1, 50, 8, 2, 64), False),
                                           ((1, 200, 300, 4, 2, 64), False)],
                         ids=["ragged-causal-gqa", "one-token-grouped", "merged-tasks"])
def test_compiles_and_matches_on_pypto_sim(shape, causal):
    """Real pypto: a ragged causal GQA case, a one-token case (the grouped q tile) and a
    non-causal one whose band merges 8 isomorphic tasks a task compile, simulate and
    compute the numbers."""
    pytest.importorskip("pypto")
    from ptogym.backends._pypto_worker import stop_workers
    from ptogym.ops.flash_attention import kernel
    from ptogym.tune.table import tuned_params

    merges = tuned_params(kernel, q_len=shape[1], kv_len=shape[2], causal=causal)
    assert (merges["cube_nbuffer"], merges["vec_nbuffer"]) == ((8, 8) if shape[1] == 200 else (1, 0))

    q, k, v = make(*shape, seed=5)
    try:
        out, lse = flash_attention(q, k, v, causal=causal, return_lse=True, backend="pypto-sim")
    finally:
        stop_workers()
    out64, lse64 = reference_fp64(q, k, v, causal, 0.125)
    assert_close("out", out, out64, TOL[torch.bfloat16])
    assert_close("lse", lse, lse64, 1e-5)
