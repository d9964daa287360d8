"""The interpreter's images of unchanged tensors (``ptogym.interp.images``): a weight's fp32
(or contiguous) form is made once and reused while nothing writes the tensor; a write,
another view or a dropped tensor never lets a stale image through."""
import gc
import importlib

import pytest
import torch

import ptogym.interp as pypto
from ptogym.interp import images

matmul_ops = importlib.import_module("ptogym.interp.ops.matmul")  # the package exports a function of that name
from tests.interp_helpers import run_op

BIG = (256, 512)  # above images.MIN_ELEMENTS: kept


def test_converted_is_bitwise_to_and_reused_while_unchanged():
    images.clear()
    w = torch.randn(BIG).bfloat16()
    first = images.converted(w, torch.float32)
    assert torch.equal(first, w.to(torch.float32)) and first.dtype == torch.float32
    assert images.converted(w, torch.float32) is first


def test_an_in_place_write_replaces_the_image():
    images.clear()
    w = torch.randn(BIG).bfloat16()
    before = images.converted(w, torch.float32)
    w[3, 7] = 5.0  # bumps the version counter every view shares
    after = images.converted(w, torch.float32)
    assert after is not before and after[3, 7].item() == 5.0
    assert torch.equal(after, w.to(torch.float32))


def test_each_view_has_its_own_image():
    images.clear()
    w = torch.randn(512, 512).bfloat16()
    whole, transposed = images.converted(w, torch.float32), images.converted(w.t(), torch.float32)
    assert torch.equal(transposed, w.t().to(torch.float32)) and not torch.equal(whole, transposed)
    assert torch.equal(images.converted(w[256:], torch.float32), w[256:].to(torch.float32))


def test_small_tensors_and_dropped_roots_keep_nothing():
    images.clear()
    small = torch.randn(8, 8).bfloat16()
    assert images.converted(small, torch.float32) is not images.converted(small, torch.float32)
    w = torch.randn(BIG).bfloat16()
    images.converted(w, torch.float32)
    assert images._bytes == w.numel() * 4
    del w
    gc.collect()
    assert images._bytes == 0 and not images._images


@pytest.mark.parametrize("contiguous_faster", [None, True, False], ids=["first-call", "image", "view"])
def test_int8_matmul_on_a_transposed_weight_follows_writes_between_calls(contiguous_faster):
    """The int8 GEMM multiplies a transposed weight view as given or through its kept
    contiguous image (whichever ran faster for those sizes; None: not timed yet): the same
    integers as the exact int64 product either way, and the new ones after the weight is
    written."""
    images.clear()
    gen = torch.Generator().manual_seed(5)
    x = torch.randint(-128, 128, (32, 512), generator=gen, dtype=torch.int8)
    w = torch.randint(-128, 128, (256, 512), generator=gen, dtype=torch.int8)  # [N, K], nn.Linear layout

    def product():
        return run_op(lambda a, b: pypto.matmul(a, b, pypto.DT_INT32, b_trans=True), [x, w], ((32, 256), torch.int32),
                      tile=None, cube=([32, 32], [64, 64], [64, 64]))

    sizes = (32, 512, 256)
    matmul_ops._CONTIGUOUS_FASTER.pop(sizes, None)
    if contiguous_faster is not None:
        matmul_ops._CONTIGUOUS_FASTER[sizes] = contiguous_faster
    assert torch.equal(product(), (x.long() @ w.long().t()).int())
    assert sizes in matmul_ops._CONTIGUOUS_FASTER
    assert bool(images._images) == (contiguous_faster is not False)  # the image kept only where it may be used
    w[:, :7] = 127
    assert torch.equal(product(), (x.long() @ w.long().t()).int())
