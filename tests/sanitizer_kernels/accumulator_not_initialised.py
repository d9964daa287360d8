"""A pypto.tensor accumulated over a loop: racy reads it before anything wrote it, free starts it
with is_loop_begin (the chain of read-modify-writes is ordered through the one tensor)."""
import torch

EXPECT = "S-UNINIT-01"


def racy(pypto):
    @pypto.frontend.jit()
    def kernel(x: pypto.Tensor([32, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        acc = pypto.tensor([8, 64], pypto.DT_FP32, "acc")  # first
        for i in pypto.loop(4, name="LOOP_K", idx_name="i"):
            acc[:] = acc + pypto.view(x, [8, 64], [i * 8, 0])  # second
        out[:] = acc

    kernel(torch.randn(32, 64), torch.empty(8, 64))


def free(pypto):
    @pypto.frontend.jit()
    def kernel(x: pypto.Tensor([32, 64], pypto.DT_FP32), out: pypto.Tensor([8, 64], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 64)
        acc = pypto.tensor([8, 64], pypto.DT_FP32, "acc")
        for i in pypto.loop(4, name="LOOP_K", idx_name="i"):
            if pypto.is_loop_begin(i):
                acc[:] = pypto.full([8, 64], 0.0, pypto.DT_FP32)
            acc[:] = acc + pypto.view(x, [8, 64], [i * 8, 0])
        out[:] = acc

    kernel(torch.randn(32, 64), torch.empty(8, 64))


if __name__ == "__main__":
    import _script
    _script.main(__import__(__name__))
