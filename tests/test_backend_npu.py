"""The ``npu`` backend: real pypto on an Ascend device through torch_npu.

Without torch_npu (every CI machine) it must refuse cleanly; the device index
comes from ``TILE_FWK_DEVICE_ID`` as in pypto's examples.
"""
import importlib.util

import pytest
import torch

from ptogym.backends import BackendUnavailable, get_backend
from ptogym.backends import npu

HAVE_TORCH_NPU = importlib.util.find_spec("torch_npu") is not None


def test_registered_and_constructible_without_an_npu():
    backend = get_backend("npu")
    assert backend.name == "npu" and isinstance(backend, npu.Backend)


@pytest.mark.skipif(HAVE_TORCH_NPU, reason="torch_npu is installed here")
def test_unavailable_without_torch_npu():
    backend = npu.Backend()
    with pytest.raises(BackendUnavailable, match="torch_npu"):
        backend.check_available()
    with pytest.raises(BackendUnavailable):
        backend.launch(lambda pypto: None, {}, [torch.zeros(1)])
    with pytest.raises(BackendUnavailable, match="npu"):
        backend.device  # noqa: B018  (no 'npu' device type without torch_npu)


def test_device_id_from_environment(monkeypatch):
    monkeypatch.delenv("TILE_FWK_DEVICE_ID", raising=False)
    assert npu.device_id() == 0
    monkeypatch.setenv("TILE_FWK_DEVICE_ID", "3")
    assert npu.device_id() == 3
    monkeypatch.setenv("TILE_FWK_DEVICE_ID", "first")
    with pytest.raises(BackendUnavailable, match="TILE_FWK_DEVICE_ID"):
        npu.device_id()


@pytest.mark.skipif(not HAVE_TORCH_NPU, reason="needs torch_npu and an Ascend NPU")
def test_device_is_the_configured_npu(monkeypatch):
    monkeypatch.setenv("TILE_FWK_DEVICE_ID", "0")
    assert npu.Backend().device == torch.device("npu:0")
