"""Every recorded conformance case: the hand-written corpus and the generated sample."""
from . import corpus, generator

GENERATED_SAMPLE = 60  # fixed-seed generated kernels recorded against real pypto
AREA_SAMPLE = 60  # fixed-seed kernels of generator.random_area_spec


def all_cases() -> dict:
    return {**corpus.CASES, **generator.sample(GENERATED_SAMPLE), **generator.area_sample(AREA_SAMPLE)}
