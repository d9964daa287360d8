"""InplaceAddRmsNorm: numerics against the fp32 golden, the in-place contract,
torch.library integration and input validation."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import ptogym.ops
from ptogym.ops.inplace_add_rms_norm import kernel
from ptogym.ops.inplace_add_rms_norm.golden import inplace_add_rms_norm_golden, self_check
from ptogym.ops.inplace_add_rms_norm.op import inplace_add_rms_norm
from ptogym.verify import detailed_tensor_compare

TOL = {torch.bfloat16: 1e-2, torch.float16: 1e-3, torch.float32: 1e-4}
ALIGN = {torch.bfloat16: 16, torch.float16: 16, torch.float32: 8}


def make(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    x1 = torch.randn(shape, generator=g).to(dtype)
    x2 = torch.randn(shape, generator=g).to(dtype)
    gamma = torch.randn(shape[-1], generator=g).to(dtype)
    return x1, x2, gamma


def assert_matches_golden(x1, x2, gamma, eps=1e-6):
    expected = inplace_add_rms_norm_golden(x1, x2, gamma, eps)
    y, x_add, rstd = inplace_add_rms_norm(x1, x2, gamma, eps)
    tol = TOL[x1.dtype]
    for name, actual, golden in zip(("y", "x_add", "rstd"), (y, x_add, rstd), expected):
        result = detailed_tensor_compare(actual, golden, name, rtol=tol, atol=tol)
        print(f"{name}: max_abs={result['max_diff']:.3g} max_rel={result['max_rel_diff']:.3g}")
        assert result["all_close"], result.report()


def test_golden_self_checks():
    self_check()
    self_check(hidden=256, dtype=torch.bfloat16)


@settings(max_examples=25, deadline=None)
@given(dtype=st.sampled_from([torch.bfloat16, torch.float16, torch.float32]),
       batch=st.integers(1, 5), seq=st.integers(1, 70), blocks=st.integers(1, 48),
       seed=st.integers(0, 2**16))
def test_matches_golden_on_random_shapes(dtype, batch, seq, blocks, seed):
    hidden = blocks * ALIGN[dtype]
    assert_matches_golden(*make((batch, seq, hidden), dtype, seed))


@pytest.mark.parametrize("eps", [1e-6, 1e-3, 0.5])
def test_eps_is_honoured(eps):
    assert_matches_golden(*make((2, 3, 512), torch.float32), eps=eps)


def test_rank_two_input():
    assert_matches_golden(*make((77, 1024), torch.bfloat16))


def test_in_place_contract():
    """The seed's six in-place assertions."""
    x1, x2, gamma = make((4, 32, 7168), torch.bfloat16)
    x1_before, x2_before = x1.clone(), x2.clone()
    ptr1, ptr2 = x1.data_ptr(), x2.data_ptr()
    expected = inplace_add_rms_norm_golden(x1_before, x2_before, gamma)

    y, x_add, rstd = ptogym.ops.inplace_add_rms_norm(x1, x2, gamma, 1e-6)

    assert x1.data_ptr() == ptr1 and x2.data_ptr() == ptr2  # 1. addresses kept
    assert y.data_ptr() == ptr1 and x_add.data_ptr() == ptr2  # 2. returned tensors alias x1/x2
    assert y is x1 and x_add is x2
    assert rstd.data_ptr() not in (ptr1, ptr2)  # 3. rstd is new
    assert (x1 != x1_before).any() and (x2 != x2_before).any()  # 4. contents overwritten
    assert torch.equal(x2, (x1_before.float() + x2_before.float()).to(torch.bfloat16))
    assert (x1.shape, x1.dtype) == ((4, 32, 7168), torch.bfloat16)  # 5. shapes and dtypes
    assert (x2.shape, x2.dtype) == ((4, 32, 7168), torch.bfloat16)
    assert (rstd.shape, rstd.dtype) == ((4, 32, 1), torch.bfloat16)
    for name, actual, golden in zip(("y", "x_add", "rstd"), (y, x_add, rstd), expected):  # 6. precision
        result = detailed_tensor_compare(actual, golden, name, rtol=1e-2, atol=1e-2)
        print(f"{name}: max_abs={result['max_diff']:.3g} max_rel={result['max_rel_diff']:.3g}")
        assert result["all_close"], result.report()


def test_in_place_kernel_equals_scratch_buffers():
    """Passing x1/x2 as the y/x_add outputs gives bit-identical results to separate
    output buffers (upstream's scheme before its copy back)."""
    from ptogym.backends import get_backend

    x1, x2, gamma = make((3, 45, 2048), torch.bfloat16)
    rows1, rows2 = x1.view(-1, 2048).clone(), x2.view(-1, 2048).clone()
    y, x_add = torch.empty_like(rows1), torch.empty_like(rows2)
    rstd_scratch = torch.empty(rows1.shape[0], 1, dtype=torch.bfloat16)
    get_backend("interp").launch(kernel.build, {"hidden": 2048, "dtype": "DT_BF16"},
                                 [rows1, rows2, gamma.view(1, -1), y, x_add, rstd_scratch], {"eps": 1e-6})
    _, _, rstd = inplace_add_rms_norm(x1, x2, gamma)
    assert torch.equal(x1.view(-1, 2048), y)
    assert torch.equal(x2.view(-1, 2048), x_add)
    assert torch.equal(rstd.view(-1, 1), rstd_scratch)


def test_empty_rows():
    x1, x2, gamma = make((0, 3, 256), torch.bfloat16)
    y, x_add, rstd = inplace_add_rms_norm(x1, x2, gamma)
    assert rstd.shape == (0, 3, 1)


@pytest.mark.parametrize("hidden, rows", [(7168, 2), (256, 64), (4096, 4), (16384, 1), (100, 64)])
def test_vec_tile_rule(hidden, rows):
    assert kernel.vec_tile_rows(hidden) == rows


def test_vec_tile_rule_rejects_rows_beyond_sum_buffer():
    with pytest.raises(ValueError, match="sum buffer"):
        kernel.vec_tile_rows(16392)


def test_opcheck():
    x1, x2, gamma = make((2, 5, 256), torch.float32)
    torch.library.opcheck(torch.ops.ptogym.inplace_add_rms_norm.default, (x1, x2, gamma, 1e-6))


def test_torch_compile_fullgraph_aliasing():
    def step(x1, x2, gamma):
        y, x_add, rstd = ptogym.ops.inplace_add_rms_norm(x1, x2, gamma, 1e-6)
        return y * 2, x_add + 1, rstd

    torch._dynamo.reset()
    compiled = torch.compile(step, fullgraph=True)
    a1, a2, gamma = make((2, 8, 256), torch.float32)
    b1, b2 = a1.clone(), a2.clone()
    got = compiled(a1, a2, gamma)
    want = step(b1, b2, gamma)
    for g, w in zip(got, want):
        assert torch.allclose(g, w, rtol=1e-5, atol=1e-5)
    assert torch.equal(a1, b1) and torch.equal(a2, b2)  # the mutation of x1/x2 survived compilation


def _half_overlapping(x1):
    base = torch.cat([x1.reshape(-1), x1.reshape(-1)[: x1.numel() // 2]])
    return base[: x1.numel()].view(x1.shape), base[x1.numel() // 2:].view(x1.shape)


BAD_INPUTS = [
    ("dtype int32", lambda x1, x2, g: (x1.int(), x2.int(), g.int(), 1e-6), TypeError, "x1: dtype"),
    ("mixed dtypes", lambda x1, x2, g: (x1, x2.float(), g, 1e-6), TypeError, "x2: dtype"),
    ("gamma dtype", lambda x1, x2, g: (x1, x2, g.float(), 1e-6), TypeError, "gamma: dtype"),
    ("shape mismatch", lambda x1, x2, g: (x1, x2[:, :2], g, 1e-6), ValueError, "x2: shape"),
    ("gamma shape", lambda x1, x2, g: (x1, x2, g[:128], 1e-6), ValueError, "gamma: shape"),
    ("gamma 2-D", lambda x1, x2, g: (x1, x2, g.view(1, -1), 1e-6), ValueError, "gamma: shape"),
    ("rank 1", lambda x1, x2, g: (x1[0, 0], x2[0, 0], g, 1e-6), ValueError, "x1: needs at least 2 dims"),
    ("non-contiguous", lambda x1, x2, g: (x1, x2.transpose(0, 1).contiguous().transpose(0, 1), g, 1e-6),
     ValueError, "x2: must be contiguous"),
    ("unaligned H", lambda x1, x2, g: (x1[..., :200].contiguous(), x2[..., :200].contiguous(), g[:200], 1e-6),
     ValueError, "32 B"),
    ("eps zero", lambda x1, x2, g: (x1, x2, g, 0.0), ValueError, "eps"),
    ("eps negative", lambda x1, x2, g: (x1, x2, g, -1e-6), ValueError, "eps"),
    ("eps nan", lambda x1, x2, g: (x1, x2, g, float("nan")), ValueError, "eps"),
    ("eps inf", lambda x1, x2, g: (x1, x2, g, float("inf")), ValueError, "eps"),
    ("not a tensor", lambda x1, x2, g: (x1, x2.tolist(), g, 1e-6), TypeError, "x2: expected a torch.Tensor"),
    ("x1 aliases x2", lambda x1, x2, g: (x1, x1, g, 1e-6), ValueError, "shares memory"),
    # issue 9: gamma read while x1/x2 are written, through any view
    ("gamma is a row of x1", lambda x1, x2, g: (x1, x2, x1[0, 0], 1e-6), ValueError, "gamma: shares memory with x1"),
    ("gamma is a strided view of x2", lambda x1, x2, g: (x1, x2, x2.view(-1)[1:513:2], 1e-6), ValueError,
     "gamma: shares memory with x2"),
    ("x2 half-overlaps x1", lambda x1, x2, g: _half_overlapping(x1) + (g, 1e-6), ValueError,
     "x2: shares memory with x1"),
    ("gamma reinterprets x1's bytes", lambda x1, x2, g: (x1, x2, x1.view(torch.int16)[0, 0], 1e-6), TypeError,
     "gamma: dtype"),
    ("H = 0", lambda x1, x2, g: (x1[..., :0], x2[..., :0], g[:0], 1e-6), ValueError, "x1: H"),
    ("x1 leaf requires grad", lambda x1, x2, g: (x1.requires_grad_(), x2, g, 1e-6), ValueError,
     "x1: a leaf Variable that requires grad is being used in an in-place operation"),
    ("gamma requires grad", lambda x1, x2, g: (x1, x2, g.requires_grad_(), 1e-6), ValueError,
     "gamma: requires grad, but inplace_add_rms_norm has no backward"),
    ("eps overflows a float", lambda x1, x2, g: (x1, x2, g, 10**400), ValueError, "eps: .* overflows a float"),
    ("eps a string", lambda x1, x2, g: (x1, x2, g, "1e-6"), TypeError, "eps: must be a real number"),
]


@pytest.mark.parametrize("label, corrupt, error, message", BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_is_rejected_and_nothing_is_written(label, corrupt, error, message):
    x1, x2, gamma = make((2, 4, 256), torch.bfloat16)
    args = corrupt(x1, x2, gamma)
    snapshots = [a.clone() for a in args[:3] if isinstance(a, torch.Tensor)]
    with pytest.raises(error, match=message):
        inplace_add_rms_norm(*args)
    for before, after in zip(snapshots, [a for a in args[:3] if isinstance(a, torch.Tensor)]):
        assert torch.equal(before, after)
    assert torch.equal(x1, make((2, 4, 256), torch.bfloat16)[0])  # the caller's originals too


def test_bad_device_is_rejected():
    if not torch.cuda.is_available():
        x1, x2, gamma = make((2, 4, 256), torch.bfloat16)
        meta = x2.to("meta")
        with pytest.raises(ValueError, match="x2: device"):
            inplace_add_rms_norm(x1, meta, gamma)
        assert torch.equal(x1, make((2, 4, 256), torch.bfloat16)[0])


def test_case_files_are_checked_with_the_same_rules_as_calls():
    import dataclasses

    from ptogym.ops import get_op
    from ptogym.verify.cases import TensorSpec, load_cases

    spec = get_op("inplace_add_rms_norm")
    case = load_cases(spec.cases_path, spec)[0]
    assert spec.check_case(case) == []
    bad = dataclasses.replace(case, attrs={"eps": 0}, inputs={
        "x1": TensorSpec((2, 100), torch.bfloat16), "x2": TensorSpec((2, 100), torch.float16),
        "gamma": TensorSpec((99,), torch.bfloat16)})
    problems = spec.check_case(bad)
    assert problems == ["x2: dtype torch.float16 must equal x1's dtype torch.bfloat16",
                        "gamma: shape [99] must be [H] = [100]",
                        "x1: row of H=100 x 2 B = 200 B must be a multiple of 32 B (vector tiles are 32-byte aligned)",
                        "eps: must be a finite number > 0, got 0"]
    with pytest.raises(TypeError, match=problems[0].split(":")[0]):  # a call fails on the first one
        inplace_add_rms_norm(torch.zeros(2, 100, dtype=torch.bfloat16), torch.zeros(2, 100, dtype=torch.float16),
                             torch.zeros(99, dtype=torch.bfloat16), 0)


# ------------------------------------------------------------ issue 9 regressions
def test_gamma_may_be_strided_because_it_is_only_read():
    x1, x2, gamma = make((2, 4, 256), torch.bfloat16)
    wide = torch.zeros(512, dtype=torch.bfloat16)
    wide[::2] = gamma
    assert_matches_golden(x1, x2, wide[::2])


def test_numpy_and_integer_eps_are_accepted():
    import numpy as np

    assert_matches_golden(*make((2, 3, 256), torch.float32), eps=np.float32(1e-3))
    assert_matches_golden(*make((2, 3, 256), torch.float32), eps=1)


def test_meta_tensors_give_shapes_only():
    """Meta tensors have no memory: never 'shares memory', and the result is shape-only."""
    x1, x2, gamma = (torch.empty(s, device="meta", dtype=torch.bfloat16) for s in ((2, 3, 256), (2, 3, 256), (256,)))
    for backend in (None, "interp"):
        y, x_add, rstd = inplace_add_rms_norm(x1, x2, gamma, backend=backend)
        assert y is x1 and x_add is x2 and rstd.device.type == "meta" and rstd.shape == (2, 3, 1)


def test_leaf_requiring_grad_is_written_under_no_grad_as_torch_does():
    x1, x2, gamma = make((2, 3, 256), torch.float32)
    expected = inplace_add_rms_norm_golden(x1, x2, gamma)
    x1.requires_grad_()
    with torch.no_grad():
        y, _, _ = inplace_add_rms_norm(x1, x2, gamma)
    assert torch.allclose(y.detach(), expected[0], rtol=1e-4, atol=1e-4)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):  # torch's own wording
        torch.ones(2, requires_grad=True).add_(1)


def test_pypto_sim_above_its_compute_threshold_raises_and_writes_nothing(monkeypatch):
    """Issue 9's silent no-op: x1 [1,1024,1024] bf16 under pypto-sim used to return
    untouched x1/x2 and uninitialised rstd.  It now raises before compiling."""
    from ptogym.backends import get_backend
    from ptogym.backends.base import OutputsNotComputed

    monkeypatch.setenv("PTOGYM_BACKEND", "pypto-sim")
    sim = get_backend()
    monkeypatch.setattr(sim, "max_compute_elements", 1000)
    x1, x2, gamma = make((2, 4, 256), torch.bfloat16)
    before = [t.clone() for t in (x1, x2, gamma)]
    for backend in (None, "pypto-sim"):  # through torch.ops (PTOGYM_BACKEND) and the explicit argument
        with pytest.raises(OutputsNotComputed, match="PTOGYM_SIM_MAX_ELEMENTS=1000"):
            inplace_add_rms_norm(x1, x2, gamma, backend=backend)
        assert all(torch.equal(b, a) for b, a in zip(before, (x1, x2, gamma)))


@pytest.mark.parametrize("raw", ["abc", "-1", "1e6"])
def test_sim_max_elements_variable_is_validated_by_name(monkeypatch, raw):
    from ptogym.backends.pypto_sim import Backend

    monkeypatch.setenv("PTOGYM_SIM_MAX_ELEMENTS", raw)
    with pytest.raises(ValueError, match=f"PTOGYM_SIM_MAX_ELEMENTS: must be a non-negative integer.*{raw}"):
        Backend()


@pytest.mark.parametrize("name, variable, message", [
    ("", None, "backend: unknown backend ''"),
    ("bogus", None, "backend: unknown backend 'bogus'"),
    (None, "bogus", "PTOGYM_BACKEND: unknown backend 'bogus'"),
])
def test_backend_names_are_validated(monkeypatch, name, variable, message):
    from ptogym.backends import get_backend

    monkeypatch.delenv("PTOGYM_BACKEND", raising=False)
    if variable is not None:
        monkeypatch.setenv("PTOGYM_BACKEND", variable)
    with pytest.raises(ValueError, match=message):
        get_backend(name)
