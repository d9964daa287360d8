"""Every recorded conformance case: the hand-written corpus and the generated sample."""
from . import corpus, generator

GENERATED_SAMPLE = 60  # fixed-seed generated kernels recorded against real pypto


def all_cases() -> dict:
    return {**corpus.CASES, **generator.sample(GENERATED_SAMPLE)}
