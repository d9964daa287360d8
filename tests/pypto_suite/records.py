"""What the pypto-suite harness keeps of a run: digests, small outputs, verdicts.

Tensors use the conformance corpus's encoding (``conformance.harness``): an output
of at most ``KEEP_BYTES`` bytes is kept whole (base64 of its raw bytes), a larger one
by its SHA-1 and a few statistics, so the fixtures stay small and hold no upstream
code - only test ids, digests, outputs and verdicts.
"""
from __future__ import annotations

import hashlib
import os

import torch

from conformance import harness

KEEP_BYTES = 4096


def clean_error(text: str) -> str:
    """A message without the temporary extraction paths (the run's working directory is the
    extracted repository, its harness links beside it), cut like the corpus's errors."""
    root = os.getcwd()
    text = text.replace(os.path.join(os.path.dirname(root), "harness") + os.sep, "").replace(root + os.sep, "")
    return harness.clean_error(text)


def _raw(t: torch.Tensor) -> bytes:
    t = t.detach().cpu().contiguous()
    return (t.to(torch.uint8) if t.dtype is torch.bool else t.view(torch.uint8)).numpy().tobytes()


def digest(tensors) -> str:
    """SHA-1 over the dtypes, shapes and bytes of ``tensors``."""
    h = hashlib.sha1()
    for t in tensors:
        h.update(f"{t.dtype}{list(t.shape)}".encode())
        h.update(_raw(t))
    return h.hexdigest()


def encode_output(t: torch.Tensor) -> dict:
    """A tensor after a jit call: whole when small, else digest and statistics."""
    t = t.detach().cpu()
    if t.numel() * t.element_size() <= KEEP_BYTES:
        return harness.encode_tensor(t)
    data = {"dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape), "sha1": digest([t])}
    if t.dtype.is_floating_point:
        finite = t[torch.isfinite(t)].double()
        data["abs_sum"] = float(finite.abs().sum()) if finite.numel() else 0.0
        data["nonfinite"] = int(t.numel() - finite.numel())
    return data


def decode_output(data: dict) -> torch.Tensor | None:
    """The recorded tensor, or None when only its digest was kept."""
    return harness.decode_tensor(data) if "b64" in data else None


def output_sha1(data: dict) -> str:
    return data["sha1"] if "sha1" in data else digest([harness.decode_tensor(data)])


#: a float output that differs from pypto's by no more than rounding: a few units in the
#: last place of its dtype relative to the tensor's largest magnitude (fp32: 1e-5), or, for
#: a digest-only output, its sum of magnitudes within 1e-5; anything more is a difference
ROUNDING_ULPS = 4
RELATIVE_BOUND = 1e-5
BEYOND = "beyond the bound: "


def rounding_bound(dtype: torch.dtype) -> float:
    """The relative difference an output of ``dtype`` may show from a sum taken in another order."""
    return max(RELATIVE_BOUND, ROUNDING_ULPS * torch.finfo(dtype).eps)


def _within_bound(mine: dict, recorded: dict) -> bool:
    ta, tb = decode_output(mine), decode_output(recorded)
    if ta is None or tb is None:
        a, b = mine.get("abs_sum"), recorded.get("abs_sum")
        return (a is not None and b is not None and mine.get("nonfinite") == recorded.get("nonfinite")
                and abs(a - b) <= RELATIVE_BOUND * max(abs(b), 1.0))
    if not (ta.dtype.is_floating_point and ta.shape == tb.shape and ta.dtype == tb.dtype):
        return False
    bound = rounding_bound(ta.dtype)
    ta, tb = ta.double(), tb.double()
    finite = torch.isfinite(tb)
    scale = max(float(tb[finite].abs().max()) if finite.any() else 0.0, 1.0)
    return bool(torch.equal(torch.isfinite(ta), finite) and ((ta - tb).abs()[finite] <= bound * scale).all())


def compare_call(mine: dict, recorded: dict) -> str:
    """How one jit call's tensors compare: 'bitwise', 'inputs differ', or what differs
    (prefixed ``BEYOND`` when a tensor differs by more than rounding)."""
    if mine.get("inputs_sha1") != recorded.get("inputs_sha1"):
        return "inputs differ"
    if "outputs" not in recorded or "outputs" not in mine:
        return "bitwise" if ("outputs" in recorded) == ("outputs" in mine) else "one side failed"
    if len(mine["outputs"]) != len(recorded["outputs"]):
        return "tensor count differs"
    for k, (a, b) in enumerate(zip(mine["outputs"], recorded["outputs"])):
        if output_sha1(a) == output_sha1(b):
            continue
        ta, tb = decode_output(a), decode_output(b)
        detail = (f"tensor {k} differs (digest; abs sum {a.get('abs_sum')} vs {b.get('abs_sum')})"
                  if ta is None or tb is None else f"tensor {k} differs: {harness.describe_difference(ta, tb)}")
        return detail if _within_bound(a, b) else BEYOND + detail
    return "bitwise"
