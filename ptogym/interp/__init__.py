"""``ptogym.interp``: an eager, strict interpreter of the PyPTO kernel API.

``import ptogym.interp as pypto`` runs an ordinary PyPTO kernel on torch tensors, on
CPU or any torch device, computing each op exactly in its declared dtype and
enforcing PyPTO's constraints as named checks (``checks.CHECKS``).

Layout: dtypes (DT_*), symbolic (dynamic dims, loop indices), tensor (view,
assemble, slicing), ops (compute), config (tile shapes, options), frontend (jit,
loops), platform (profiles), checks (constraint ids, lenient mode), enums
(pypto.enum), controls (cond, options scopes, pass config, debug prints),
operation / pypto_impl (the module paths published kernels import from).
"""
from . import experimental  # noqa: F401
from . import frontend  # noqa: F401
from . import enums, operation, pypto_impl  # noqa: F401
from .ops import distributed  # noqa: F401
from .checks import (ADVICE, CHECKS, LIMITS, ConstraintViolation, ConstraintWarning, ResourceLimitExceeded,  # noqa: F401
                     lenient, set_limit, silence)
from .config import (CachePolicy, get_codegen_options, get_cube_tile_shapes, get_debug_options,  # noqa: F401
                     get_host_options, get_pass_options, get_runtime_options, get_vec_tile_shapes,
                     get_verify_options, set_cache_policy, set_codegen_options, set_cube_tile_shapes,
                     set_debug_options, set_host_options, set_options, set_pass_options, set_runtime_options,
                     set_semantic_label, set_vec_tile_shapes, set_verify_golden_data,
                     set_verify_options)
from .dtypes import *  # noqa: F401,F403
from .dtypes import DT_BF16, DT_FP16, DT_FP32, DT_INT8, DT_INT32, DataType, bytes_of  # noqa: F401
from .frontend import (DYN, DYNAMIC, STATIC, RunMode, StatusType, is_loop_begin, is_loop_end,  # noqa: F401
                       loop, loop_unroll)
from .ops import *  # noqa: F401,F403 (ops.__all__ includes sum/max/min/abs/round/pow)
from .platform import platform, set_platform  # noqa: F401
from .symbolic import SymbolicScalar, ceildiv  # noqa: F401
from .tensor import Tensor, assemble, reshape, view  # noqa: F401
from .controls import (CompStage, CubeTile, PassConfigKey, PassConfigs, SymInt, cond,  # noqa: F401
                       convert_to_element, get_global_config, get_pass_config, get_pass_configs,
                       get_pass_default_config, options, pass_verify_print, pass_verify_save, reset_options,
                       set_global_config, set_matrix_size, set_pass_config, set_pass_default_config,
                       set_print_options, to_sym, to_syms)
from .enums import AtomicType, OpType, OutType, ReduceMode, ReLuType, ScatterMode, TileOpFormat, TransMode  # noqa
from .operation import op_wrapper  # noqa: F401
from .ops.unsupported import (ConfigScope, Function, function, get_current_function,  # noqa: F401
                              get_current_scope, get_last_function, get_options_tree,
                              verify)

enum = enums  # ``pypto.enum`` (a module name the standard library also uses, hence enums.py)
# pypto's sub-modules kernels import by name, and the interpreter module standing for each
PYPTO_MODULES = {"pypto.frontend": frontend, "pypto.experimental": experimental, "pypto.operation": operation,
                 "pypto.pypto_impl": pypto_impl, "pypto.enum": enums, "pypto.distributed": distributed}

tensor = Tensor
element = Element
symbolic_scalar = SymbolicScalar


def _in_place(op):
    def method(self, *args, **kwargs):
        self.move(op(self, *args, **kwargs))
        return self

    method.__name__ = f"{getattr(op, '__name__', 'fill')}_"
    return method


def _tensor_methods():
    """Tensor methods and operators that pypto offers, bound to the same ops."""
    from . import ops
    for name in ["add", "sub", "mul", "div", "exp", "log", "sqrt", "rsqrt", "abs", "neg", "relu", "sigmoid",
                 "sin", "cos", "reciprocal", "amax", "amin", "sum", "prod", "transpose", "maximum", "minimum",
                 "round", "ceil", "floor", "trunc", "sign", "clone", "softmax", "gather", "unsqueeze",
                 "scatter_update", "exp2", "expm1", "log1p", "log2", "log10", "fmod", "greater", "logical_not",
                 "hypot", "prelu", "lrelu", "topk", "sort32", "mrgsort", "signbit", "gathermask", "index_add_",
                 "index_add", "cumsum", "gcd", "triu", "tril", "expand_clone", "pad", "fillpad", "scatter_",
                 "scatter", "var"]:
        setattr(Tensor, name, getattr(ops, name))
    for name in ("triu", "tril"):  # in place: the result moved into the tensor
        setattr(Tensor, f"{name}_", _in_place(getattr(ops, name)))
    Tensor.fill_ = _in_place(lambda self, value: ops.full(self.shape, value, self.dtype))
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
    Tensor.__eq__, Tensor.__ne__ = ops.eq, ops.ne  # elementwise, as in pypto
    Tensor.__hash__ = object.__hash__  # identity, as before __eq__ was defined
    Tensor.__pos__ = lambda self: self
    Tensor.__pow__ = ops.pow
    Tensor.__mod__ = ops.remainder
    Tensor.__floordiv__ = lambda self, other: ops.floor(ops.div(self, other))
    Tensor.__rtruediv__ = lambda self, other: ops.mul(ops.reciprocal(self), other)  # as pypto: other * (1/self)
    Tensor.__matmul__ = _matmul_operator
    Tensor.assemble = lambda self, input, offsets: assemble(input, offsets, self)


def _matmul_operator(self, other):
    """``a @ b``: pypto's output dtype is b's for FP16/BF16/FP32 and DT_INT32 for DT_INT8."""
    from . import ops
    if other.dtype in (DT_FP16, DT_BF16, DT_FP32):
        return ops.matmul(self, other, other.dtype)
    if other.dtype is DT_INT8:
        return ops.matmul(self, other, DT_INT32)
    raise RuntimeError("unsupported dtype")


_tensor_methods()
