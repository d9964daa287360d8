"""``ptogym.interp``: an eager, strict interpreter of the PyPTO kernel API.

``import ptogym.interp as pypto`` runs an ordinary PyPTO kernel on torch tensors, on
CPU or any torch device, computing each op exactly in its declared dtype and
enforcing PyPTO's constraints as named checks (``checks.CHECKS``).

Layout: dtypes (DT_*), symbolic (dynamic dims, loop indices), tensor (view,
assemble, slicing), ops (compute), config (tile shapes, options), frontend (jit,
loops), platform (profiles), checks (constraint ids, lenient mode).
"""
from . import experimental  # noqa: F401
from . import frontend  # noqa: F401
from .checks import ADVICE, CHECKS, ConstraintViolation, ConstraintWarning, lenient, silence  # noqa: F401
from .config import (CachePolicy, get_codegen_options, get_cube_tile_shapes, get_debug_options,  # noqa: F401
                     get_host_options, get_pass_options, get_runtime_options, get_vec_tile_shapes,
                     get_verify_options, set_cache_policy, set_codegen_options, set_cube_tile_shapes,
                     set_debug_options, set_host_options, set_options, set_pass_options, set_runtime_options,
                     set_semantic_label, set_vec_tile_shapes, set_verify_options)
from .dtypes import *  # noqa: F401,F403
from .dtypes import DataType, bytes_of  # noqa: F401
from .frontend import (DYN, DYNAMIC, STATIC, RunMode, StatusType, is_loop_begin, is_loop_end,  # noqa: F401
                       loop, loop_unroll)
from .ops import *  # noqa: F401,F403 (ops.__all__ includes sum/max/min/abs/round/pow)
from .platform import platform, set_platform  # noqa: F401
from .symbolic import SymbolicScalar, ceildiv  # noqa: F401
from .tensor import Tensor, assemble, reshape, view  # noqa: F401

tensor = Tensor
element = Element
symbolic_scalar = SymbolicScalar


def _tensor_methods():
    """Tensor methods and operators that pypto offers, bound to the same ops."""
    from . import ops
    for name in ["add", "sub", "mul", "div", "exp", "log", "sqrt", "rsqrt", "abs", "neg", "relu", "sigmoid",
                 "sin", "cos", "reciprocal", "amax", "amin", "sum", "prod", "transpose", "maximum", "minimum",
                 "round", "ceil", "floor", "trunc", "sign", "clone", "softmax", "gather", "unsqueeze",
                 "scatter_update", "exp2", "expm1", "log1p", "log2", "log10", "fmod", "greater", "logical_not"]:
        setattr(Tensor, name, getattr(ops, name))
    Tensor.view = view
    Tensor.reshape = reshape
    Tensor.matmul = ops.matmul
    Tensor.where = lambda self, condition, other: ops.where(condition, self, other)
    for dunder, fn in [("add", ops.add), ("sub", ops.sub), ("mul", ops.mul), ("truediv", ops.div),
                       ("lt", ops.lt), ("le", ops.le), ("gt", ops.gt), ("ge", ops.ge)]:
        setattr(Tensor, f"__{dunder}__", fn)
    Tensor.__radd__ = lambda self, other: ops.add(self, other)
    Tensor.__rmul__ = lambda self, other: ops.mul(self, other)
    Tensor.__rsub__ = lambda self, other: ops.add(ops.neg(self), other)
    Tensor.__neg__ = ops.neg


_tensor_methods()
