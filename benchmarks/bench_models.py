"""The model operators' interpreter time against their plain-torch golden at T = 128
(issue target: within 2x), measured side by side in one process.

    python benchmarks/bench_models.py [--repeat N] [--levels mla_prolog:level5 ...]

Cost-model figures (default kernel against upstream's configuration) come from
``ptogym bench mla_prolog mla_prolog_quant qwen3_pre_attn --levels ...`` and are
recorded in the operators' READMEs.
"""
import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ptogym.backends import get_backend  # noqa: E402
from ptogym.ops import get_op  # noqa: E402
from ptogym.verify.cases import load_cases  # noqa: E402
from ptogym.verify.runner import make_case_inputs  # noqa: E402

DEFAULT = ("mla_prolog:level5", "mla_prolog_quant:level5", "qwen3_pre_attn:level5")  # T = 128, the models' shapes


def median_seconds(call, inputs, repeat):
    times = []
    for _ in range(repeat):
        fresh = {k: v.clone() for k, v in inputs.items()}
        start = time.perf_counter()
        call(fresh)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", nargs="+", default=list(DEFAULT), help="OP:LEVEL pairs")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    interp = get_backend("interp")
    worst = 0.0
    for item in args.levels:
        name, level = item.split(":")
        spec = get_op(name)
        case = next(c for c in load_cases(spec.cases_path, spec) if c.id == level)
        inputs = make_case_inputs(spec, case)
        golden = median_seconds(lambda x: spec.golden(x, case.attrs), inputs, args.repeat)
        kernel = median_seconds(lambda x: spec.run(x, case.attrs, interp), inputs, args.repeat)
        worst = max(worst, kernel / golden)
        print(f"{name:16s} {level:8s} interp {kernel * 1e3:8.1f} ms  golden {golden * 1e3:8.1f} ms  "
              f"ratio {kernel / golden:.2f}x")
    verdict = worst <= 2.0
    print(f"[{'BENCH_OK' if verdict else 'BENCH_SLOW'}] worst interp/golden ratio {worst:.2f}x (target <= 2x)")
    return 0 if verdict else 1


if __name__ == "__main__":
    sys.exit(main())
