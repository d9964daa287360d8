"""InplaceAddRmsNorm: interpreter vs golden wall time and, under pypto 0.2.0's cost
model, the default kernel side by side with upstream's configuration, per level.

    python benchmarks/bench_inplace_add_rms_norm.py [--levels level1 level4 ...] [--plot F.png]

Same as ``ptogym bench inplace_add_rms_norm``; prints one block per level with the
simulated µs, GB/s, percent of the modeled ceiling and the speedup over upstream.
"""
import sys

from ptogym.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", "inplace_add_rms_norm", *sys.argv[1:]]))
