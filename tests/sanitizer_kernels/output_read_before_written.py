"""Prefix offsets into an int32 output, one element per iteration: racy reads entry i (not yet
written: the caller's memory) instead of entry i - 1, free reads the entry the previous
iteration wrote (a read of the tensor written is stitched to its writer)."""
import torch

EXPECT = "S-UNINIT-01"


def racy(pypto):
    @pypto.frontend.jit()
    def kernel(counts: pypto.Tensor([4, 1], pypto.DT_INT32), offsets: pypto.Tensor([5, 1], pypto.DT_INT32)):
        offsets[0, 0] = 0
        for i in pypto.loop(1, 5, 1, name="LOOP_EXPERTS", idx_name="i"):
            offsets[i, 0] = offsets[i, 0] + counts[i - 1, 0]  # second

    kernel(torch.randint(0, 9, (4, 1), dtype=torch.int32), torch.empty(5, 1, dtype=torch.int32))  # first


def free(pypto):
    @pypto.frontend.jit()
    def kernel(counts: pypto.Tensor([4, 1], pypto.DT_INT32), offsets: pypto.Tensor([5, 1], pypto.DT_INT32)):
        offsets[0, 0] = 0
        for i in pypto.loop(1, 5, 1, name="LOOP_EXPERTS", idx_name="i"):
            offsets[i, 0] = offsets[i - 1, 0] + counts[i - 1, 0]

    kernel(torch.randint(0, 9, (4, 1), dtype=torch.int32), torch.empty(5, 1, dtype=torch.int32))


if __name__ == "__main__":
    import _script
    _script.main(__import__(__name__))
