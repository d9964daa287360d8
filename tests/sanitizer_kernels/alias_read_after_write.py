"""Two parameters over one storage: each iteration writes its row through out, then reads it back
through src (racy: pypto orders nothing across two parameters, not even in one iteration), or
reads its row through src before writing it through out (free: an in-place update)."""
import torch

EXPECT = "S-RACE-02"


def racy(pypto):
    @pypto.frontend.jit()
    def kernel(src: pypto.Tensor([4, 32], pypto.DT_FP32), out: pypto.Tensor([4, 32], pypto.DT_FP32),
               total: pypto.Tensor([1, 32], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(1, 32)
        total[:] = pypto.full([1, 32], 0.0, pypto.DT_FP32)
        for i in pypto.loop(4, name="LOOP_ROWS", idx_name="i"):
            out[i:i + 1, :] = pypto.full([1, 32], 1.0, pypto.DT_FP32)  # first
            total[:] = total + src[i:i + 1, :]  # second

    data = torch.randn(4, 32)
    kernel(data, data, torch.empty(1, 32))


def free(pypto):
    @pypto.frontend.jit()
    def kernel(src: pypto.Tensor([4, 32], pypto.DT_FP32), out: pypto.Tensor([4, 32], pypto.DT_FP32),
               total: pypto.Tensor([1, 32], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(1, 32)
        total[:] = pypto.full([1, 32], 0.0, pypto.DT_FP32)
        for i in pypto.loop(4, name="LOOP_ROWS", idx_name="i"):
            row = src[i:i + 1, :]
            total[:] = total + row
            out[i:i + 1, :] = row + 1.0

    data = torch.randn(4, 32)
    kernel(data, data, torch.empty(1, 32))


if __name__ == "__main__":
    import _script
    _script.main(__import__(__name__))
