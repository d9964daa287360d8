"""RoPE (AT-04): the golden against an fp64 element-wise reference, the kernel against
the golden on both layouts, the rotation matrices, torch.library and validation."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import ptogym.ops
from ptogym.ops.rope.golden import rope_golden, rotate_half, rotate_interleaved
from ptogym.ops.rope.op import rope, rotation_matrix
from ptogym.verify import detailed_tensor_compare

LAYOUTS = ("interleave", "half")


def make(tokens, heads, head_dim, rope_dim, dtype=torch.bfloat16, seed=0):
    g = torch.Generator().manual_seed(seed)
    shape = (tokens, heads, head_dim) if heads else (tokens, head_dim)
    x = torch.randn(shape, generator=g).to(dtype)
    cos = torch.randn(tokens, rope_dim, generator=g).to(dtype)
    sin = torch.randn(tokens, rope_dim, generator=g).to(dtype)
    return x, cos, sin


def reference_fp64(x, cos, sin, layout):
    """Element by element from the definitions, in fp64."""
    x, cos, sin = x.double(), cos.double(), sin.double()
    rope_dim = cos.shape[-1]
    y = x.clone()
    heads = x.reshape(x.shape[0], -1, x.shape[-1])
    out = y.reshape(heads.shape)
    start = x.shape[-1] - rope_dim
    for i in range(rope_dim):
        if layout == "interleave":
            partner, sign = (i + 1, -1.0) if i % 2 == 0 else (i - 1, 1.0)
        else:
            partner, sign = (i + rope_dim // 2, -1.0) if i < rope_dim // 2 else (i - rope_dim // 2, 1.0)
        out[..., start + i] = (heads[..., start + i] * cos[:, None, i]
                               + sign * heads[..., start + partner] * sin[:, None, i])
    return out.reshape(x.shape)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("heads, head_dim, rope_dim", [(3, 96, 64), (0, 64, 64), (2, 128, 32)])
def test_golden_matches_fp64_reference(layout, heads, head_dim, rope_dim):
    x, cos, sin = make(5, heads, head_dim, rope_dim, torch.float32)
    expected = reference_fp64(x, cos, sin, layout)
    assert torch.allclose(rope_golden(x, cos, sin, layout).double(), expected, rtol=1e-6, atol=1e-6)


def test_golden_rotations_are_the_documented_permutations():
    x = torch.arange(8.0)
    assert rotate_interleaved(x).tolist() == [-1, 0, -3, 2, -5, 4, -7, 6]
    assert rotate_half(x).tolist() == [-4, -5, -6, -7, 0, 1, 2, 3]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_rotation_matrix_is_the_golden_rotation(layout):
    x = torch.randn(7, 64)
    rotate = rotate_interleaved if layout == "interleave" else rotate_half
    assert torch.equal(x @ rotation_matrix(64, layout, torch.float32), rotate(x))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_angle_zero_is_identity_and_rotation_is_norm_preserving(layout):
    x, _, _ = make(4, 2, 64, 64, torch.float32)
    ones, zeros = torch.ones(4, 64), torch.zeros(4, 64)
    assert torch.equal(rope_golden(x, ones, zeros, layout), x)
    angle = torch.rand(4, 32) * 6.28
    full = angle.repeat_interleave(2, -1) if layout == "interleave" else torch.cat((angle, angle), -1)
    y = rope_golden(x, full.cos(), full.sin(), layout)
    assert torch.allclose(y.norm(dim=-1), x.norm(dim=-1), rtol=1e-5)


def assert_matches_golden(x, cos, sin, layout):
    result = detailed_tensor_compare(rope(x, cos, sin, layout=layout), rope_golden(x, cos, sin, layout), "y",
                                     rtol=0.0078125, atol=1e-4)
    assert result.all_close, result.report()


@settings(max_examples=20, deadline=None)
@given(layout=st.sampled_from(LAYOUTS), dtype=st.sampled_from([torch.bfloat16, torch.float16]),
       tokens=st.integers(1, 45), heads=st.integers(0, 5), rope_blocks=st.integers(1, 8),
       nope_blocks=st.integers(0, 4), seed=st.integers(0, 2**16))
def test_kernel_matches_golden_on_random_shapes(layout, dtype, tokens, heads, rope_blocks, nope_blocks, seed):
    rope_dim = 16 * rope_blocks
    assert_matches_golden(*make(tokens, heads, rope_dim + 16 * nope_blocks, rope_dim, dtype, seed), layout)


def test_empty_tokens():
    x, cos, sin = make(0, 2, 64, 64)
    assert rope(x, cos, sin).shape == (0, 2, 64)


def test_inputs_unchanged():
    x, cos, sin = make(3, 2, 128, 64)
    before = [t.clone() for t in (x, cos, sin)]
    rope(x, cos, sin)
    assert all(torch.equal(a, b) for a, b in zip(before, (x, cos, sin)))


def test_opcheck():
    x, cos, sin = make(3, 2, 64, 32)
    torch.library.opcheck(torch.ops.ptogym.rope.default, (x, cos, sin, "interleave"))


def test_torch_compile_fullgraph():
    def step(x, cos, sin):
        return ptogym.ops.rope(x, cos, sin, layout="half") * 2

    torch._dynamo.reset()
    x, cos, sin = make(4, 2, 64, 64, torch.float16)
    assert torch.equal(torch.compile(step, fullgraph=True)(x, cos, sin), step(x, cos, sin))


BAD_INPUTS = [
    ("fp32 x", lambda x, c, s: (x.float(), c, s, "half"), TypeError, "x: dtype"),
    ("cos dtype", lambda x, c, s: (x, c.half(), s, "half"), TypeError, "cos: dtype"),
    ("layout", lambda x, c, s: (x, c, s, "neox"), ValueError, "layout"),
    ("rank 4", lambda x, c, s: (x[None], c, s, "half"), ValueError, "x: needs shape"),
    ("cos tokens", lambda x, c, s: (x, c[:2], s[:2], "half"), ValueError, "cos: shape"),
    ("sin shape", lambda x, c, s: (x, c, s[:, :32], "half"), ValueError, "sin: shape"),
    ("R > D", lambda x, c, s: (x[..., :32].contiguous(), c, s, "half"), ValueError, "must be in"),
    ("R unaligned", lambda x, c, s: (x, c[:, :40].contiguous(), s[:, :40].contiguous(), "half"), ValueError,
     "multiples of 16"),
    ("not a tensor", lambda x, c, s: (x, c.tolist(), s, "half"), TypeError, "cos: expected a torch.Tensor"),
]


@pytest.mark.parametrize("label, corrupt, error, message", BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_is_rejected(label, corrupt, error, message):
    x, cos, sin, layout = corrupt(*make(3, 2, 64, 64))
    with pytest.raises(error, match=message):
        rope(x, cos, sin, layout=layout)


def test_interleave_rope_dim_limit():
    x, cos, sin = make(2, 1, 256, 256)
    with pytest.raises(ValueError, match="interleaved layout"):
        rope(x, cos, sin, layout="interleave")
    assert_matches_golden(x, cos, sin, "half")
