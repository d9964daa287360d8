"""view/assemble: every iteration assembles its rows of x at row 0 of an 8-row y (racy: four
iterations write those rows), or at its own rows of a 32-row y (free)."""
import torch

EXPECT = "S-RACE-01"


def racy(pypto):
    @pypto.frontend.jit()
    def kernel(x: pypto.Tensor([32, 64], pypto.DT_FP32), y: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        for i in pypto.loop(4, name="LOOP_ROWS", idx_name="i"):
            tile = pypto.view(x, [8, 64], [i * 8, 0])
            pypto.assemble(pypto.exp(tile), [0, 0], y)  # first # second

    kernel(torch.randn(32, 64), torch.empty(8, 64))


def free(pypto):
    @pypto.frontend.jit()
    def kernel(x: pypto.Tensor([32, 64], pypto.DT_FP32), y: pypto.Tensor([32, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        for i in pypto.loop(4, name="LOOP_ROWS", idx_name="i"):
            tile = pypto.view(x, [8, 64], [i * 8, 0])
            pypto.assemble(pypto.exp(tile), [i * 8, 0], y)

    kernel(torch.randn(32, 64), torch.empty(32, 64))


if __name__ == "__main__":
    import _script
    _script.main(__import__(__name__))
