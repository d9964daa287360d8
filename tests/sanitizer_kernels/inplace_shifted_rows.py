"""Two parameters bound to one storage (in place): iteration i reads row block i + 1 through x and
writes block i through y (racy: the next iteration writes what this one reads), or reads and writes
its own block (free: a row-wise read-then-write)."""
import torch

EXPECT = "S-RACE-02"


def racy(pypto):
    @pypto.frontend.jit()
    def kernel(x: pypto.Tensor([40, 64], pypto.DT_FP32), y: pypto.Tensor([40, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        for i in pypto.loop(4, name="LOOP_ROWS", idx_name="i"):
            tile = pypto.view(x, [8, 64], [i * 8 + 8, 0])  # first
            pypto.assemble(pypto.mul(tile, tile), [i * 8, 0], y)  # second

    data = torch.randn(40, 64)
    kernel(data, data)


def free(pypto):
    @pypto.frontend.jit()
    def kernel(x: pypto.Tensor([40, 64], pypto.DT_FP32), y: pypto.Tensor([40, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        for i in pypto.loop(5, name="LOOP_ROWS", idx_name="i"):
            tile = pypto.view(x, [8, 64], [i * 8, 0])
            pypto.assemble(pypto.mul(tile, tile), [i * 8, 0], y)

    data = torch.randn(40, 64)
    kernel(data, data)


if __name__ == "__main__":
    import _script
    _script.main(__import__(__name__))
