"""Two loops write the same rows: racy without a barrier, free with submit_before_loop on the second."""
import torch

EXPECT = "S-RACE-01"


def racy(pypto):
    @pypto.frontend.jit()
    def kernel(x: pypto.Tensor([16, 32], pypto.DT_FP32), y: pypto.Tensor([16, 32], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 32)
        for i in pypto.loop(2, name="FIRST", idx_name="i"):
            pypto.assemble(pypto.view(x, [8, 32], [i * 8, 0]), [i * 8, 0], y)  # first
        for j in pypto.loop(2, name="SECOND", idx_name="j"):
            pypto.assemble(pypto.exp(pypto.view(x, [8, 32], [j * 8, 0])), [j * 8, 0], y)  # second

    kernel(torch.randn(16, 32), torch.empty(16, 32))


def free(pypto):
    @pypto.frontend.jit()
    def kernel(x: pypto.Tensor([16, 32], pypto.DT_FP32), y: pypto.Tensor([16, 32], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 32)
        for i in pypto.loop(2, name="FIRST", idx_name="i"):
            pypto.assemble(pypto.view(x, [8, 32], [i * 8, 0]), [i * 8, 0], y)
        for j in pypto.loop(2, name="SECOND", idx_name="j", submit_before_loop=True):
            pypto.assemble(pypto.exp(pypto.view(x, [8, 32], [j * 8, 0])), [j * 8, 0], y)

    kernel(torch.randn(16, 32), torch.empty(16, 32))


if __name__ == "__main__":
    import _script
    _script.main(__import__(__name__))
