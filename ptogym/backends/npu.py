"""``npu``: the real pypto on an Ascend device through torch_npu.

The device index comes from ``TILE_FWK_DEVICE_ID`` (default 0), as in pypto's own
examples; ``torch.npu.set_device`` is called once.  Kernels run with
``run_mode=NPU`` whatever their source says.  Output directories, logs and console
chatter are handled as for ``pypto-sim`` (see ``_pypto_runtime``).
"""
from __future__ import annotations

import contextlib
import importlib.util
import os
import time

from . import BackendUnavailable
from . import _pypto_runtime as rt


def device_id() -> int:
    raw = os.environ.get("TILE_FWK_DEVICE_ID", "0").strip() or "0"
    try:
        return int(raw)
    except ValueError as exc:
        raise BackendUnavailable(f"npu: TILE_FWK_DEVICE_ID must be an integer, got {raw!r}") from exc


class Backend(rt.RealPyptoBackend):
    name = "npu"
    run_mode = 0  # pypto.RunMode.NPU

    def __init__(self):
        super().__init__()
        self._device_set = False

    @property
    def device(self):
        import torch

        try:
            return torch.device(f"npu:{device_id()}")
        except RuntimeError as exc:  # "npu" is only a device type once torch_npu is imported
            raise BackendUnavailable(f"npu: no 'npu' device type in torch ({exc}); "
                                     "install torch_npu on an Ascend machine") from exc

    def check_available(self) -> None:
        if importlib.util.find_spec("torch_npu") is None:
            raise BackendUnavailable(
                "backend 'npu' needs torch_npu and an Ascend NPU with CANN; torch_npu is not "
                "installed (use --backend pypto-sim or interp on machines without an NPU)")
        super().check_available()
        try:
            import torch
            import torch_npu  # noqa: F401  (registers torch.npu)
        except Exception as exc:  # CANN libraries missing, driver mismatch ...
            raise BackendUnavailable(f"npu: importing torch_npu failed: {exc}") from exc
        if not torch.npu.is_available():
            raise BackendUnavailable("npu: torch_npu is installed but no NPU is available")
        idx = device_id()
        if idx >= torch.npu.device_count():
            raise BackendUnavailable(
                f"npu: TILE_FWK_DEVICE_ID={idx} but only {torch.npu.device_count()} device(s)")
        if not self._device_set:
            torch.npu.set_device(idx)
            self._device_set = True

    @contextlib.contextmanager
    def _prepare(self, pypto, kernel, tensors):
        dev = self.device
        for t in tensors:
            if t.device != dev:
                raise ValueError(f"npu: tensors must live on {dev}, got {t.device}")
        yield {"compute": "npu", "device": str(dev)}

    def _finish(self, pypto, run_dir, report: dict) -> None:
        import torch

        start = time.perf_counter()
        torch.npu.synchronize()
        report["sync_s"] = time.perf_counter() - start
