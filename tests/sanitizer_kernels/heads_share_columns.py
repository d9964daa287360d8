"""Slicing in nested loops: every head writes columns [0, D) of its row (racy) or its own (free)."""
import torch

EXPECT = "S-RACE-01"
B, H, D = 2, 3, 16


def racy(pypto):
    @pypto.frontend.jit()
    def kernel(q: pypto.Tensor([B, H * D], pypto.DT_FP32), out: pypto.Tensor([B, H * D], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(1, D)
        for b in pypto.loop(B, name="LOOP_B", idx_name="b"):
            for h in pypto.loop(H, name="LOOP_H", idx_name="h"):
                head = q[b:b + 1, h * D:(h + 1) * D]
                out[b:b + 1, 0:D] = head * 2.0  # first # second

    kernel(torch.randn(B, H * D), torch.empty(B, H * D))


def free(pypto):
    @pypto.frontend.jit()
    def kernel(q: pypto.Tensor([B, H * D], pypto.DT_FP32), out: pypto.Tensor([B, H * D], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(1, D)
        for b in pypto.loop(B, name="LOOP_B", idx_name="b"):
            for h in pypto.loop(H, name="LOOP_H", idx_name="h"):
                head = q[b:b + 1, h * D:(h + 1) * D]
                out[b:b + 1, h * D:(h + 1) * D] = head * 2.0

    kernel(torch.randn(B, H * D), torch.empty(B, H * D))


if __name__ == "__main__":
    import _script
    _script.main(__import__(__name__))
