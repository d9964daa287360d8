"""Names of pypto 0.2.0 the interpreter cannot emulate.  Each is a callable that
raises ``NotImplementedError`` naming the op and saying why; ``reason`` is also
kept on the object (``__not_emulatable__``) for the API-coverage report
(docs/api-coverage.md)."""
from __future__ import annotations

MULTI_DEVICE = ("needs several NPUs sharing memory (SHMEM): the interpreter runs one kernel on one device "
                "and has no peer PEs, signals or barriers")
NPU_INTERNAL = "drives the NPU compiler/runtime itself; there is no compiled graph in the eager interpreter"


def not_emulatable(name: str, reason: str):
    """A stand-in for ``pypto.<name>`` that raises NotImplementedError with ``reason``."""
    def stub(*args, **kwargs):
        raise NotImplementedError(f"pypto.{name} is not emulated by ptogym.interp: {reason}")

    stub.__name__ = stub.__qualname__ = name.rsplit(".", 1)[-1]
    stub.__doc__ = f"Not emulated: {reason}."
    stub.__not_emulatable__ = reason
    return stub


def not_emulatable_class(name: str, reason: str):
    """A class whose construction raises like ``not_emulatable``."""
    def __init__(self, *args, **kwargs):
        raise NotImplementedError(f"pypto.{name} is not emulated by ptogym.interp: {reason}")

    return type(name.rsplit(".", 1)[-1], (), {"__init__": __init__, "__not_emulatable__": reason,
                                               "__doc__": f"Not emulated: {reason}."})


conv = not_emulatable("conv", "convolution needs the cube unit's img2col/fixpipe pipeline and the conv tile "
                              "configuration (TileL1Info/TileL0Info); not yet modelled")
ConvParams = not_emulatable_class("ConvParams", "parameter bundle of pypto.conv, which is not emulated")
ConvTile = not_emulatable_class("ConvTile", "conv tile configuration of pypto.conv, which is not emulated")
set_conv_tile_shapes = not_emulatable("set_conv_tile_shapes", "conv tiles take pypto_impl.TileL1Info/TileL0Info "
                                                              "objects of the NPU compiler; pypto.conv is not emulated")
get_conv_tile_shapes = not_emulatable("get_conv_tile_shapes", "see set_conv_tile_shapes")
Function = not_emulatable_class("Function", NPU_INTERNAL)
get_current_function = not_emulatable("get_current_function", NPU_INTERNAL)
get_last_function = not_emulatable("get_last_function", NPU_INTERNAL)
function = not_emulatable("function", "the pre-frontend graph-recording API (`with pypto.function(...)`) builds a "
                                      "compiled graph; write kernels with @pypto.frontend.jit")
verify = not_emulatable("verify", "pypto.verify compiles and compares per compiler pass on an NPU; use "
                                  "ptogym.verify or compare the kernel's outputs directly")
get_options_tree = not_emulatable("get_options_tree", "pypto's option schema lives in its C++ configuration")
get_current_scope = not_emulatable("get_current_scope", "the C++ configuration scope of pypto's compiler")
ConfigScope = not_emulatable_class("ConfigScope", "the C++ configuration scope of pypto's compiler")
mrgsort = not_emulatable("mrgsort", "pypto 0.2.0's MrgSort verifier rejected every kernel tried (sort32 output "
                                    "merged with mergesize 2, 32 or 64), so there is no verified result to reproduce")
