"""DeepSeek-V4 MLA prolog: the golden against an fp64 reference written from the maths
(RoPE as a complex rotation of the pairs), the kernel and its upstream variant against
the golden, torch.library and validation of every dimension."""
import pytest
import torch

import ptogym.ops
from ptogym.ops import get_op
from ptogym.ops.mla_prolog.golden import mla_prolog_golden
from ptogym.ops.mla_prolog.op import INPUT_NAMES, OUTPUT_NAMES, launch, mla_prolog
from ptogym.verify import detailed_tensor_compare
from ptogym.verify.cases import load_cases
from ptogym.verify.runner import make_case_inputs

TOL = dict(rtol=0.0078125, atol=1e-4, max_error_ratio=0.005)


def case_inputs(level="level1"):
    spec = get_op("mla_prolog")
    case = next(c for c in load_cases(spec.cases_path, spec) if c.id == level)
    return make_case_inputs(spec, case)


def reference_fp64(t, eps=1e-6):
    t = {k: v.double() for k, v in t.items()}
    rope_dim, head_dim = t["cos"].shape[1], t["gamma_ckv"].shape[0]

    def norm(x):
        return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)

    def rope(x):  # (x[2i] + i x[2i+1]) * (cos + i sin) on the pairs, cos/sin taken per element
        part = x[..., -rope_dim:]
        even, odd = part[..., 0::2], part[..., 1::2]
        shape = (x.shape[0],) + (1,) * (x.dim() - 2) + (rope_dim // 2,)
        cos_e, cos_o = t["cos"][:, 0::2].reshape(shape), t["cos"][:, 1::2].reshape(shape)
        sin_e, sin_o = t["sin"][:, 0::2].reshape(shape), t["sin"][:, 1::2].reshape(shape)
        rotated = torch.stack((even * cos_e - odd * sin_e, odd * cos_o + even * sin_o), -1).flatten(-2)
        return torch.cat((x[..., :-rope_dim], rotated), -1)

    qr = norm(t["x"] @ t["wq_a"]) * t["gamma_cq"]
    q = norm((qr @ t["wq_b"]).reshape(t["x"].shape[0], -1, head_dim))
    kv = norm(t["x"] @ t["wkv"]) * t["gamma_ckv"]
    return rope(q), rope(kv), qr


def test_golden_tracks_fp64_reference():
    inputs = case_inputs("level2")
    for name, got, want in zip(OUTPUT_NAMES, mla_prolog_golden(*[inputs[n] for n in INPUT_NAMES]),
                               reference_fp64(inputs)):
        result = detailed_tensor_compare(got, want, name, rtol=2e-2, atol=2e-2, max_error_ratio=0.001)
        assert result.all_close, result.report()


@pytest.mark.parametrize("variant", [None, "upstream"])
def test_kernel_and_upstream_variant_match_golden(variant):
    inputs = case_inputs("level3")
    before = {k: v.clone() for k, v in inputs.items()}
    outputs, _ = launch(*[inputs[n] for n in INPUT_NAMES], backend="interp", variant=variant)
    expected = mla_prolog_golden(*[before[n] for n in INPUT_NAMES])
    for name, got, want in zip(OUTPUT_NAMES, outputs, expected):
        result = detailed_tensor_compare(got, want, name, **TOL)
        assert result.all_close, result.report()
    assert all(torch.equal(inputs[k], v) for k, v in before.items())


def test_output_shapes_and_empty_batch():
    inputs = case_inputs("level0")
    q, kv, qr = mla_prolog(*[inputs[n] for n in INPUT_NAMES])
    assert (q.shape, kv.shape, qr.shape) == ((1, 4, 128), (1, 128), (1, 128))
    empty = {k: v[:0] if k in ("x", "cos", "sin") else v for k, v in inputs.items()}
    assert [t.shape[0] for t in mla_prolog(*[empty[n] for n in INPUT_NAMES])] == [0, 0, 0]


def test_opcheck():
    inputs = case_inputs("level0")
    torch.library.opcheck(torch.ops.ptogym.mla_prolog.default, tuple(inputs[n] for n in INPUT_NAMES) + (1e-6,))


def test_torch_compile_fullgraph():
    def step(*args):
        q, kv, qr = ptogym.ops.mla_prolog(*args)
        return q.float().sum() + kv.float().sum() + qr.float().sum()

    torch._dynamo.reset()
    inputs = [case_inputs("level1")[n] for n in INPUT_NAMES]
    assert torch.equal(torch.compile(step, fullgraph=True)(*inputs), step(*inputs))


def _with(name, make):
    return lambda t: {**t, name: make(t)}


BAD_INPUTS = [
    ("fp32", lambda t: {k: v.float() for k, v in t.items()}, TypeError, "x: dtype"),
    ("wkv dtype", _with("wkv", lambda t: t["wkv"].half()), TypeError, "wkv: dtype"),
    ("x rank", _with("x", lambda t: t["x"][None]), ValueError, "x: needs 2 dims"),
    ("wq_a rows", _with("wq_a", lambda t: t["wq_a"][:128]), ValueError, "wq_a: shape"),
    ("wq_b rows", _with("wq_b", lambda t: t["wq_b"][:64]), ValueError, "wq_b: shape"),
    ("wq_b width", _with("wq_b", lambda t: t["wq_b"][:, :200]), ValueError, "wq_b: shape"),
    ("wkv width", _with("wkv", lambda t: t["wkv"][:, :64]), ValueError, "wkv: shape"),
    ("gamma_cq", _with("gamma_cq", lambda t: t["gamma_cq"][:64]), ValueError, "gamma_cq: shape"),
    ("cos tokens", _with("cos", lambda t: t["cos"][:1]), ValueError, "cos: shape"),
    ("sin width", _with("sin", lambda t: t["sin"][:, :32]), ValueError, "sin: shape"),
    ("rope = head_dim", lambda t: {**t, "cos": torch.zeros(3, 128).bfloat16(), "sin": torch.zeros(3, 128).bfloat16()},
     ValueError, "rope_dim 128 must be < head_dim"),
    ("unaligned rope", lambda t: {**t, "cos": t["cos"][:, :40], "sin": t["sin"][:, :40]}, ValueError,
     "multiple of 16"),
    ("not a tensor", _with("gamma_ckv", lambda t: t["gamma_ckv"].tolist()), TypeError, "gamma_ckv: expected"),
]


@pytest.mark.parametrize("label, corrupt, error, message", BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_is_rejected(label, corrupt, error, message):
    inputs = corrupt(case_inputs("level1"))
    inputs = {k: v.contiguous() if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
    with pytest.raises(error, match=message):
        mla_prolog(*[inputs[n] for n in INPUT_NAMES])


def test_bad_eps():
    inputs = case_inputs("level0")
    with pytest.raises(ValueError, match="eps"):
        mla_prolog(*[inputs[n] for n in INPUT_NAMES], eps=-1.0)
