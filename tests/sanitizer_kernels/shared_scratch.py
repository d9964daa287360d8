"""A pypto.tensor used as scratch by every iteration: allocated before the loop (racy: iterations
that run at once share it), or inside the loop body (free: one workspace per iteration)."""
import torch

EXPECT = "S-RACE-01"


def racy(pypto):
    @pypto.frontend.jit()
    def kernel(x: pypto.Tensor([24, 32], pypto.DT_FP32), y: pypto.Tensor([24, 32], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 32)
        scratch = pypto.tensor([8, 32], pypto.DT_FP32, "scratch")
        for i in pypto.loop(3, name="LOOP_ROWS", idx_name="i"):
            scratch[:] = pypto.exp(pypto.view(x, [8, 32], [i * 8, 0]))  # first # second
            pypto.assemble(pypto.mul(scratch, 2.0), [i * 8, 0], y)

    kernel(torch.randn(24, 32), torch.empty(24, 32))


def free(pypto):
    @pypto.frontend.jit()
    def kernel(x: pypto.Tensor([24, 32], pypto.DT_FP32), y: pypto.Tensor([24, 32], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 32)
        for i in pypto.loop(3, name="LOOP_ROWS", idx_name="i"):
            scratch = pypto.tensor([8, 32], pypto.DT_FP32, "scratch")
            scratch[:] = pypto.exp(pypto.view(x, [8, 32], [i * 8, 0]))
            pypto.assemble(pypto.mul(scratch, 2.0), [i * 8, 0], y)

    kernel(torch.randn(24, 32), torch.empty(24, 32))


if __name__ == "__main__":
    import _script
    _script.main(__import__(__name__))
