"""KV-cache scatter (AT-16): in-place writes against the golden, padding slots, refused
slots leaving everything bitwise unchanged, torch.library integration."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import ptogym.ops
from ptogym.ops.cache_scatter.golden import cache_scatter_golden
from ptogym.ops.cache_scatter.op import cache_scatter, make_slot_mapping


def make(slots, row_shape, tokens, padding=0, dtype=torch.bfloat16, index_dtype=torch.int32, seed=0):
    g = torch.Generator().manual_seed(seed)
    cache = torch.randn(slots, *row_shape, generator=g).to(dtype)
    values = torch.randn(tokens, *row_shape, generator=g).to(dtype)
    return cache, values, make_slot_mapping(tokens, slots, padding, index_dtype, g)


def test_golden_writes_exactly_the_named_rows():
    cache = torch.zeros(6, 2)
    values = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    result = cache_scatter_golden(cache, values, torch.tensor([4, -1, 0]))
    assert result.tolist() == [[5, 6], [0, 0], [0, 0], [0, 0], [1, 2], [0, 0]]
    assert (cache == 0).all()  # the golden works on a copy


@settings(max_examples=15, deadline=None)
@given(dtype=st.sampled_from([torch.bfloat16, torch.float16, torch.float32]),
       index_dtype=st.sampled_from([torch.int32, torch.int64]), tokens=st.integers(1, 45),
       padding=st.integers(0, 3), extra_slots=st.integers(0, 20), seed=st.integers(0, 2**16))
def test_in_place_scatter_matches_golden(dtype, index_dtype, tokens, padding, extra_slots, seed):
    padding = min(padding, tokens)
    cache, values, slots = make(tokens + extra_slots, (2, 64), tokens, padding, dtype, index_dtype, seed)
    expected = cache_scatter_golden(cache, values, slots)
    address, values_before = cache.data_ptr(), values.clone()
    result = cache_scatter(cache, values, slots)
    assert result is cache and cache.data_ptr() == address
    assert torch.equal(cache, expected)
    assert torch.equal(values, values_before)


def test_paged_cache_through_a_flat_view():
    blocks, block_size = 4, 8
    paged = torch.zeros(blocks, block_size, 2, 16, dtype=torch.bfloat16)
    values = torch.randn(3, 2, 16).bfloat16()
    cache_scatter(paged.view(-1, 2, 16), values, torch.tensor([1 * block_size + 3, 0, 3 * block_size + 7]))
    assert torch.equal(paged[1, 3], values[0]) and torch.equal(paged[0, 0], values[1])
    assert torch.equal(paged[3, 7], values[2])
    assert int((paged != 0).any(-1).any(-1).sum()) == 3


def test_all_padding_writes_nothing():
    cache, values, _ = make(8, (64,), 3)
    before = cache.clone()
    cache_scatter(cache, values, torch.full((3,), -1, dtype=torch.int32))
    assert torch.equal(cache, before)


@pytest.mark.parametrize("slots, message", [
    ([0, 8, 1], "slot 8 at token 1 is >= the cache's 8 slots"),
    ([2, 5, 2], r"slot 2 is named by tokens \[0, 2\]"),
])
def test_refused_slots_leave_everything_bitwise_unchanged(slots, message):
    cache, values, _ = make(8, (64,), 3)
    mapping = torch.tensor(slots, dtype=torch.int64)
    snapshots = [t.clone() for t in (cache, values, mapping)]
    with pytest.raises(ValueError, match=message):
        cache_scatter(cache, values, mapping)
    assert all(torch.equal(a, b) for a, b in zip(snapshots, (cache, values, mapping)))


BAD_INPUTS = [
    ("cache dtype", lambda c, v, s: (c.int(), v, s), TypeError, "cache: dtype"),
    ("values dtype", lambda c, v, s: (c, v.half(), s), TypeError, "values: dtype"),
    ("slot dtype", lambda c, v, s: (c, v, s.float()), TypeError, "slot_mapping: dtype"),
    ("rank 1 cache", lambda c, v, s: (c[:, 0, 0].contiguous(), v, s), ValueError, "cache: needs shape"),
    ("row shape", lambda c, v, s: (c, v[:, :1].contiguous(), s), ValueError, "values: shape"),
    ("slot count", lambda c, v, s: (c, v, s[:2]), ValueError, "slot_mapping: shape"),
    ("unaligned row", lambda c, v, s: (c[:, :1, :8].contiguous(), v[:, :1, :8].contiguous(), s), ValueError, "32 B"),
    ("non-contiguous", lambda c, v, s: (c.transpose(1, 2).contiguous().transpose(1, 2), v, s), ValueError,
     "cache: must be contiguous"),
    ("values alias cache", lambda c, v, s: (c, c[:3], s), ValueError, "shares memory"),
    ("not a tensor", lambda c, v, s: (c, v, s.tolist()), TypeError, "slot_mapping: expected a torch.Tensor"),
]


@pytest.mark.parametrize("label, corrupt, error, message", BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_is_rejected_and_nothing_is_written(label, corrupt, error, message):
    args = corrupt(*make(8, (2, 64), 3))
    snapshots = [a.clone() for a in args if isinstance(a, torch.Tensor)]
    with pytest.raises(error, match=message):
        cache_scatter(*args)
    assert all(torch.equal(a, b) for a, b in zip(snapshots, [a for a in args if isinstance(a, torch.Tensor)]))


def test_opcheck():
    cache, values, slots = make(8, (2, 16), 3, dtype=torch.float32)
    torch.library.opcheck(torch.ops.ptogym.cache_scatter.default, (cache, values, slots))


def test_torch_compile_keeps_the_mutation():
    def step(cache, values, slots):
        ptogym.ops.cache_scatter(cache, values, slots)
        return cache.sum()

    torch._dynamo.reset()
    cache, values, slots = make(8, (2, 16), 3, dtype=torch.float32)
    reference = cache.clone()
    total = torch.compile(step, fullgraph=True)(cache, values, slots)
    expected = cache_scatter_golden(reference, values, slots)
    assert torch.equal(cache, expected) and torch.allclose(total, expected.sum())
