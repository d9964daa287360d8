"""In place, two parameters over one storage, two passes: the first copies every row block of x
to z; after a submit_before_loop barrier the second squares block i + 1 of x into block i of y
(racy: iteration i + 1 writes the block iteration i read; the first read of that block since it
was written lies before the barrier, where it is ordered), or its own block (free)."""
import torch

EXPECT = "S-RACE-02"


def racy(pypto):
    @pypto.frontend.jit()
    def kernel(x: pypto.Tensor([40, 64], pypto.DT_FP32), y: pypto.Tensor([40, 64], pypto.DT_FP32),
               z: pypto.Tensor([40, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        for i in pypto.loop(5, name="COPY", idx_name="i"):
            pypto.assemble(pypto.view(x, [8, 64], [i * 8, 0]), [i * 8, 0], z)
        for j in pypto.loop(4, name="SECOND", idx_name="j", submit_before_loop=True):
            tile = pypto.view(x, [8, 64], [j * 8 + 8, 0])  # first
            pypto.assemble(pypto.mul(tile, tile), [j * 8, 0], y)  # second

    data = torch.randn(40, 64)
    kernel(data, data, torch.empty(40, 64))


def free(pypto):
    @pypto.frontend.jit()
    def kernel(x: pypto.Tensor([40, 64], pypto.DT_FP32), y: pypto.Tensor([40, 64], pypto.DT_FP32),
               z: pypto.Tensor([40, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        for i in pypto.loop(5, name="COPY", idx_name="i"):
            pypto.assemble(pypto.view(x, [8, 64], [i * 8, 0]), [i * 8, 0], z)
        for j in pypto.loop(5, name="SECOND", idx_name="j", submit_before_loop=True):
            tile = pypto.view(x, [8, 64], [j * 8, 0])
            pypto.assemble(pypto.mul(tile, tile), [j * 8, 0], y)

    data = torch.randn(40, 64)
    kernel(data, data, torch.empty(40, 64))


if __name__ == "__main__":
    import _script
    _script.main(__import__(__name__))
