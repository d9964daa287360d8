"""A stand-in ``torch_npu`` for running NPU-targeted PyPTO tests on a CPU.

pypto's own system tests import ``torch_npu`` and place their tensors on ``npu:N``.
``install()`` registers a ``torch_npu`` module and a ``torch.npu`` device module, and
maps every ``npu`` device a test names (factories' ``device=``, ``Tensor.to``,
``Tensor.npu``) to the CPU, where both real pypto (SIM run mode) and ``ptogym.interp``
compute.  What only an NPU can do (internal formats such as NZ, streams with work on
them) raises ``NpuOnly``, so such a test fails honestly instead of computing on a
plain tensor.
"""
from __future__ import annotations

import functools
import sys
import types

import torch


#: what ``torch_npu.npu.get_soc_version()`` answers: an Ascend 910B (DAV_2201), the
#: platform pypto-sim models; pypto's conftest.py keeps the tests marked for "910"
SOC_VERSION = 220


class NpuOnly(RuntimeError):
    """The test needs something only an NPU (torch_npu on a device) provides."""


_FACTORIES = ("tensor", "as_tensor", "rand", "randn", "randint", "rand_like", "randn_like", "randint_like",
              "zeros", "ones", "empty", "full", "zeros_like", "ones_like", "empty_like", "full_like", "arange",
              "linspace", "logspace", "eye", "randperm", "empty_strided", "normal", "tril_indices",
              "triu_indices", "from_numpy")


def _cpu_if_npu(value):
    """``npu``, ``npu:N``, an npu ``torch.device`` or a bare index (the current accelerator) -> the CPU."""
    if isinstance(value, int) and not isinstance(value, bool):
        return "cpu"
    if isinstance(value, str) and value.split(":")[0] == "npu":
        return "cpu"
    if isinstance(value, torch.device) and value.type == "npu":
        return torch.device("cpu")
    return value


def _mapping_devices(function):
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        if "device" in kwargs:
            kwargs["device"] = _cpu_if_npu(kwargs["device"])
        return function(*args, **kwargs)

    return wrapper


def _to_device(tensor: torch.Tensor) -> torch.Tensor:
    """What a host-to-NPU copy gives: a new tensor, its strides kept where the source is dense
    (a sliced, non-dense view arrives contiguous, as ``Tensor.to`` across devices does)."""
    return tensor.clone(memory_format=torch.preserve_format)


def _tensor_to(original):
    @functools.wraps(original)
    def to(self, *args, **kwargs):
        devices = [a for a in (*args, kwargs.get("device")) if isinstance(a, (str, torch.device, int))]
        to_npu = any(_cpu_if_npu(d) != d for d in devices)
        args = tuple(_cpu_if_npu(a) if isinstance(a, (str, torch.device, int)) else a for a in args)
        if "device" in kwargs:
            kwargs["device"] = _cpu_if_npu(kwargs["device"])
        result = original(self, *args, **kwargs)
        return _to_device(result) if to_npu and result is self else result

    return to


def _npu_only(what: str):
    def refuse(*args, **kwargs):
        raise NpuOnly(f"{what} needs an NPU (torch_npu stand-in on a CPU)")

    return refuse


class _Stream:
    npu_stream = 0

    def synchronize(self):
        return None

    def wait_stream(self, other):
        return None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _device_module() -> types.ModuleType:
    npu = types.ModuleType("torch.npu")
    state = {"device": 0}
    npu.set_device = lambda device: state.__setitem__("device", int(str(device).split(":")[-1] or 0))
    npu.current_device = lambda: state["device"]
    npu.device_count = lambda: 1
    npu.is_available = lambda: False  # nothing runs on an NPU here
    npu.synchronize = lambda *args, **kwargs: None
    npu.current_stream = lambda *args, **kwargs: _Stream()
    npu.default_stream = npu.current_stream
    npu.Stream = lambda *args, **kwargs: _Stream()
    npu.stream = lambda stream=None: stream or _Stream()
    npu.empty_cache = lambda: None
    npu.get_soc_version = lambda: SOC_VERSION
    npu.manual_seed = torch.manual_seed
    npu.manual_seed_all = torch.manual_seed
    npu.config = types.SimpleNamespace(allow_internal_format=False)
    npu.NPUGraph = _npu_only("torch.npu.NPUGraph")
    npu.graph = _npu_only("torch.npu.graph")
    return npu


_installed = False


def install() -> None:
    """Register the stand-in (idempotent); call before the tests import torch_npu."""
    global _installed
    if _installed:
        return
    _installed = True
    torch.utils.rename_privateuse1_backend("npu")
    npu = _device_module()
    torch._register_device_module("npu", npu)
    for name in _FACTORIES:
        if hasattr(torch, name):
            setattr(torch, name, _mapping_devices(getattr(torch, name)))
    torch.Tensor.to = _tensor_to(torch.Tensor.to)
    torch.Tensor.npu = lambda self, *args, **kwargs: _to_device(self)
    torch_npu = types.ModuleType("torch_npu")
    torch_npu.npu = npu
    torch_npu.npu_format_cast = _npu_only("torch_npu.npu_format_cast (internal tensor formats such as NZ)")
    torch_npu.get_npu_format = lambda tensor: 2  # ND: a CPU tensor has no internal format
    torch_npu.Format = types.SimpleNamespace(NCHW=0, ND=2, FRACTAL_NZ=29)  # the ids get_npu_format answers
    torch_npu.__version__ = "stand-in"
    sys.modules["torch_npu"] = torch_npu
    sys.modules["torch_npu.npu"] = npu
