"""Paged decode attention under pypto's cost model on shapes outside the CI levels: the
tuned table against upstream's configuration (the `upstream` variant), side by side.

    python benchmarks/bench_paged_shapes.py [--only 0 3 7] [--variants default upstream] [--params JSON]

Each shape is (batch, Hq, Hkv, D, block_size, sequence lengths); random bf16 q and
caches, every sequence's blocks drawn shuffled from the pool, the block table as wide as
the longest sequence needs (its width picks the table's key-capacity band).  Prints one
row per shape: µs (tasks) per variant and the table's speed-up over upstream.  The
paged_attention README's "Shapes outside the levels" table is its output.
"""
import argparse
import json
import math

import torch

from ptogym.backends import get_backend
from ptogym.ops.paged_attention import kernel, op
from ptogym.tune.table import override

SHAPES = [  # batch, Hq, Hkv, D, block_size, lengths
    (1, 8, 8, 128, 128, [100]),
    (1, 8, 8, 128, 128, [500]),
    (1, 8, 8, 128, 128, [800]),
    (1, 8, 8, 64, 128, [700]),
    (4, 8, 8, 128, 128, [30, 200, 400, 700]),
    (4, 8, 8, 64, 128, [30, 200, 400, 700]),
    (8, 8, 8, 128, 128, [5, 100, 250, 400, 530, 700, 810, 900]),
    (16, 8, 8, 128, 128, [1] + [60 * i for i in range(1, 16)]),
    (16, 8, 8, 64, 128, [1] + [60 * i for i in range(1, 16)]),
    (16, 16, 16, 128, 128, [1] + [60 * i for i in range(1, 16)]),
    (2, 16, 16, 128, 128, [129, 640]),
    (1, 32, 8, 128, 128, [500]),
    (1, 32, 8, 128, 128, [600]),
    (1, 1, 1, 64, 16, [300]),
    (4, 8, 1, 64, 16, [100, 500, 900, 1000]),
    (8, 8, 8, 128, 16, [1, 40, 200, 333, 512, 640, 700, 1000]),
    (2, 16, 2, 128, 16, [700, 1024]),
    (1, 4, 4, 128, 64, [700]),
    (8, 4, 4, 64, 32, [5, 100, 250, 400, 530, 700, 810, 900]),
    (4, 4, 4, 256, 128, [30, 200, 400, 700]),
    (2, 8, 8, 128, 256, [30, 700]),
]


def inputs(batch, heads, kv_heads, head_dim, block_size, lengths, seed=0):
    """(q, k_cache, v_cache, block_table, seq_lens) of one shape."""
    g = torch.Generator().manual_seed(seed)
    width = max(math.ceil(n / block_size) for n in lengths)
    pool = batch * width + 2
    q = torch.randn(batch, heads, head_dim, generator=g).to(torch.bfloat16)
    k_cache, v_cache = (torch.randn(pool, block_size, kv_heads, head_dim, generator=g).to(torch.bfloat16)
                        for _ in range(2))
    table = torch.randperm(pool, generator=g)[:batch * width].reshape(batch, width).to(torch.int32)
    return q, k_cache, v_cache, table, torch.tensor(lengths, dtype=torch.int32)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", type=int, nargs="+", help="shape indices (default: all)")
    parser.add_argument("--variants", nargs="+", default=["default", "upstream"])
    parser.add_argument("--params", type=json.loads, default={},
                        help="build parameters on top of the tuned table for the default (a JSON object)")
    args = parser.parse_args(argv)
    sim = get_backend("pypto-sim")
    for index in args.only or range(len(SHAPES)):
        shape = SHAPES[index]
        call = inputs(*shape)
        us = {}
        cells = []
        for variant in args.variants:
            with sim.cost_only(), override(kernel, args.params if variant == "default" else {}):
                _, report = op.launch(*call, None, sim, None if variant == "default" else variant)
            us[variant] = report.simulated_us
            cells.append(f"{variant} {report.simulated_us:.1f} ({report.tasks})")
        ratio = f"  {us['upstream'] / us['default']:.2f}x" if {"default", "upstream"} <= us.keys() else ""
        print(f"[{index}] {shape}: " + "  ".join(cells) + ratio, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
