"""Interpreter overhead: a row-tiled bf16 RMSNorm run by ``ptogym.interp`` against the
same computation in plain torch eager, measured side by side in one process.

    python benchmarks/bench_interp.py [--rows 8192] [--hidden 7168] [--tile-rows 64] [--repeat 5]

Prints the median wall time of each and their ratio (target: interp within 3x).
"""

import argparse
import statistics
import time

import torch

import ptogym.interp as pypto


def build_rms_norm(hidden: int, tile_rows: int):
    @pypto.frontend.jit()
    def rms_norm(x: pypto.Tensor([pypto.DYNAMIC, hidden], pypto.DT_BF16),
                 gamma: pypto.Tensor([1, hidden], pypto.DT_BF16),
                 y: pypto.Tensor([pypto.DYNAMIC, hidden], pypto.DT_BF16)):
        pypto.set_vec_tile_shapes(2, hidden)
        gamma_fp32 = pypto.cast(gamma, pypto.DT_FP32)
        rows = x.shape[0]
        for row in pypto.loop(0, rows, tile_rows, name="ROWS", idx_name="row"):
            valid = (rows - row).min(tile_rows)
            x_fp32 = pypto.cast(pypto.view(x, [tile_rows, hidden], [row, 0], valid_shape=[valid, hidden]),
                                pypto.DT_FP32)
            square_sum = pypto.sum(pypto.mul(x_fp32, x_fp32), -1, keepdim=True)
            rstd = pypto.rsqrt(pypto.add(pypto.mul(square_sum, 1.0 / hidden), 1e-6))
            pypto.assemble(pypto.cast(pypto.mul(pypto.mul(x_fp32, rstd), gamma_fp32), pypto.DT_BF16), [row, 0], y)
    return rms_norm


def torch_rms_norm(x, gamma, y):
    x_fp32 = x.float()
    rstd = torch.rsqrt(x_fp32.pow(2).sum(-1, keepdim=True) * (1.0 / x.shape[-1]) + 1e-6)
    y.copy_((x_fp32 * rstd * gamma.float()).to(torch.bfloat16))


def median_time(fn, repeat: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv=None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=8192)
    parser.add_argument("--hidden", type=int, default=7168)
    parser.add_argument("--tile-rows", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    x = torch.randn(args.rows, args.hidden).to(torch.bfloat16)
    gamma = torch.randn(1, args.hidden).to(torch.bfloat16)
    y_interp, y_torch = torch.empty_like(x), torch.empty_like(x)
    kernel = build_rms_norm(args.hidden, args.tile_rows)
    t_interp = median_time(lambda: kernel(x, gamma, y_interp), args.repeat)
    t_torch = median_time(lambda: torch_rms_norm(x, gamma, y_torch), args.repeat)
    max_diff = (y_interp.float() - y_torch.float()).abs().max().item()
    ratio = t_interp / t_torch
    print(f"bf16 RMSNorm [{args.rows}, {args.hidden}], {args.tile_rows}-row tiles, torch threads={torch.get_num_threads()}")
    print(f"  interp      {t_interp * 1e3:9.1f} ms")
    print(f"  plain torch {t_torch * 1e3:9.1f} ms")
    print(f"  ratio interp/torch = {ratio:.2f}x (target <= 3x); max |diff| = {max_diff:.3g}")
    return ratio


if __name__ == "__main__":
    main()
