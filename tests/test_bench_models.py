"""Smoke test of benchmarks/bench_models.py (interpreter against golden) on small levels."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_bench_models_prints_ratios_and_a_verdict():
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_models.py"), "--repeat", "1",
                           "--levels", "mla_prolog:level0", "qwen3_pre_attn:level0"],
                          capture_output=True, text=True, timeout=300)
    lines = proc.stdout.strip().splitlines()
    assert [line.split()[0] for line in lines[:2]] == ["mla_prolog", "qwen3_pre_attn"], proc.stdout + proc.stderr
    assert "ratio" in lines[0] and lines[-1].startswith(("[BENCH_OK]", "[BENCH_SLOW]"))
    assert proc.returncode == (0 if lines[-1].startswith("[BENCH_OK]") else 1)
