"""Figures the atom operators report under pypto's cost model, and the reference
rates they are compared with.

* Cube peak, from the cost model's own platform file (``A2A3.ini``, the one
  ``platform_model()["source"]`` names): ``cube_core_cnt`` cores, each retiring one
  ``cube_m_size x cube_n_size x cube_k_size`` (16 x 16 x 16) multiply-add fractal
  per cycle, at the 1.8 GHz the cost model's cycles are converted with:
  24 x 4096 x 2 FLOP x 1.8 GHz = 353.9 TFLOPS (fp16/bf16; the file lists no
  separate int8 fractal, so int8 is measured against the same figure, in TOPS).
* Nominal DDR: the platform file's ``ddr_rate`` per AI core per cycle
  (``platform_model()["platform_ddr_gbps"]``, 1382 GB/s, close to the real chip's
  HBM).  The cost model has no HBM term, so a simulated rate above it is an
  artefact of the model, flagged as such.
* Per-core copy asymptote: every vector core streaming COPY_IN back to back
  (``platform_model()["hbm_gbps"]``, the ceiling InplaceAddRmsNorm reports).
"""
from __future__ import annotations

import configparser
from pathlib import Path

FLOP_PER_MAC = 2


def cube_peak_tflops(model: dict) -> float:
    """Peak cube TFLOPS of the cost model's platform (see the module docstring)."""
    ini = configparser.ConfigParser(strict=False, interpolation=None)
    ini.read(Path(model["source"]))
    core = ini["AICoreSpec"]
    fractal = int(core["cube_m_size"]) * int(core["cube_n_size"]) * int(core["cube_k_size"])
    return model["cube_cores"] * fractal * FLOP_PER_MAC * model["clock_ghz"] * 1e9 / 1e12


def figures(model: dict, simulated_us: float, hbm_bytes: int, flops: int | None = None) -> dict:
    """Rates of one simulated launch against the platform's references."""
    seconds = simulated_us * 1e-6
    gbps = hbm_bytes / seconds / 1e9
    result = {"gbps": gbps, "percent_of_ddr": 100 * gbps / model["platform_ddr_gbps"],
              "percent_of_copy_asymptote": 100 * gbps / model["hbm_gbps"],
              "above_ddr": gbps > model["platform_ddr_gbps"]}
    if flops:
        tflops = flops / seconds / 1e12
        result.update(tflops=tflops, percent_of_cube_peak=100 * tflops / cube_peak_tflops(model))
    return result


def summary(fig: dict) -> str:
    """One line: TFLOPS vs cube peak when there are FLOPs, then GB/s vs DDR and the asymptote."""
    text = ""
    if "tflops" in fig:
        text += f"{fig['tflops']:.1f} TFLOPS = {fig['percent_of_cube_peak']:.1f}% of cube peak; "
    text += (f"{fig['gbps']:.0f} GB/s = {fig['percent_of_ddr']:.0f}% of nominal DDR, "
             f"{fig['percent_of_copy_asymptote']:.1f}% of the copy asymptote")
    return text + (" (above DDR: a cost-model artefact)" if fig["above_ddr"] else "")


def summarizer(hbm_bytes, flops=None):
    """``SPEC.extra["sim_summary"]`` for ``ptogym bench``: (case, simulated µs) -> ``summary`` line."""
    def sim_summary(case, simulated_us: float) -> str:
        from ptogym.backends._pypto_runtime import platform_model  # imports pypto's runtime glue lazily

        return summary(figures(platform_model(), simulated_us, hbm_bytes(case), flops(case) if flops else None))

    return sim_summary
