"""loop_unroll: each block also zeroes the row after its own, an end marker (racy: the next block
writes that row too, with other values); free writes each block's rows only."""
import torch

EXPECT = "S-RACE-01"


def racy(pypto):
    @pypto.frontend.jit()
    def kernel(x: pypto.Tensor([pypto.DYNAMIC, 32], pypto.DT_FP32),
               y: pypto.Tensor([pypto.DYNAMIC, 32], pypto.DT_FP32)):
        rows = x.shape[0]
        for row, size in pypto.loop_unroll(0, rows - 1, 1, name="LOOP_BLOCKS", idx_name="row", unroll_list=[4]):
            pypto.set_vec_tile_shapes(size, 32)
            tile = pypto.view(x, [size, 32], [row, 0])
            y[row:row + size, :] = tile + 1.0  # second
            y[row + size:row + size + 1, :] = pypto.full([1, 32], 0.0, pypto.DT_FP32)  # first

    kernel(torch.randn(13, 32), torch.empty(13, 32))


def free(pypto):
    @pypto.frontend.jit()
    def kernel(x: pypto.Tensor([pypto.DYNAMIC, 32], pypto.DT_FP32),
               y: pypto.Tensor([pypto.DYNAMIC, 32], pypto.DT_FP32)):
        rows = x.shape[0]
        for row, size in pypto.loop_unroll(0, rows, 1, name="LOOP_BLOCKS", idx_name="row", unroll_list=[4]):
            pypto.set_vec_tile_shapes(size, 32)
            tile = pypto.view(x, [size, 32], [row, 0])
            y[row:row + size, :] = tile + 1.0

    kernel(torch.randn(13, 32), torch.empty(13, 32))


if __name__ == "__main__":
    import _script
    _script.main(__import__(__name__))
