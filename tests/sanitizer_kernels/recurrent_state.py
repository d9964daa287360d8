"""A state carried from chunk to chunk (the value, not memory) and written to the output after
every chunk, as recurrent kernels do: free, since each chunk's write follows the previous chunk's
through the state it read; racy when every chunk writes its own, independent state."""
import torch

EXPECT = "S-RACE-01"


def racy(pypto):
    @pypto.frontend.jit()
    def kernel(x: pypto.Tensor([32, 16], pypto.DT_FP32), init: pypto.Tensor([8, 16], pypto.DT_FP32),
               last: pypto.Tensor([8, 16], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 16)
        for c in pypto.loop(4, name="LOOP_CHUNKS", idx_name="c"):
            state = pypto.add(init, pypto.view(x, [8, 16], [c * 8, 0]))
            last[:] = state  # first # second

    kernel(torch.randn(32, 16), torch.randn(8, 16), torch.empty(8, 16))


def free(pypto):
    @pypto.frontend.jit()
    def kernel(x: pypto.Tensor([32, 16], pypto.DT_FP32), init: pypto.Tensor([8, 16], pypto.DT_FP32),
               last: pypto.Tensor([8, 16], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 16)
        state = pypto.view(init, [8, 16], [0, 0])
        for c in pypto.loop(4, name="LOOP_CHUNKS", idx_name="c"):
            new_state = pypto.add(pypto.mul(state, 0.5), pypto.view(x, [8, 16], [c * 8, 0]))
            state[:] = new_state
            last[:] = state

    kernel(torch.randn(32, 16), torch.randn(8, 16), torch.empty(8, 16))


if __name__ == "__main__":
    import _script
    _script.main(__import__(__name__))
