"""``pypto.frontend`` and the loop constructs: how a kernel is called and iterated.

``jit`` runs the decorated function eagerly on each call: torch tensors are checked
against their ``pypto.Tensor`` annotations, wrapped as parameters (dynamic dims
become symbolic scalars), the body runs with fresh tile state, and afterwards every
pure output is checked to be fully written.
"""
from __future__ import annotations

import __future__
import ast
import contextlib
import enum
import functools
import inspect
import sys
import textwrap
import types
import warnings

import torch

from . import dtypes, runtime
from .checks import advise, violation
from .runtime import KernelRun, LoopInfo, StorageRecord
from .symbolic import SymbolicScalar, value_of
from .tensor import Tensor


class StatusType(enum.Enum):
    STATIC = 0
    DYNAMIC = 1
    DYN = 1


class RunMode(enum.Enum):
    NPU = 0
    SIM = 1


DYNAMIC = StatusType.DYNAMIC
DYN = StatusType.DYN
STATIC = StatusType.STATIC


def dynamic(name: str) -> SymbolicScalar:
    """A named dynamic dim: every annotation using it must bind the same value."""
    return SymbolicScalar(0, name)


# The statements pypto 0.2.0's kernel parser has a visitor for (parser.py ``_visit_*``);
# any other statement is "not supported by the PTO parser yet".  ``return`` has a
# visitor that always refuses; nested ``def`` and ``lambda`` are refused too (measured).
_PARSED_STATEMENTS = (ast.For, ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Expr, ast.If, ast.Delete,
                      ast.Assert, ast.Pass)
_REFUSED_EXPRESSIONS = {ast.Lambda: "lambda"}
_STATEMENT_NAMES = {ast.FunctionDef: "nested def", ast.AsyncFunctionDef: "nested async def",
                    ast.ClassDef: "class definition", ast.While: "while loop", ast.Break: "break",
                    ast.Continue: "continue", ast.With: "with block", ast.Try: "try block",
                    ast.Return: "return (write results into an out parameter instead)",
                    ast.Import: "import", ast.ImportFrom: "import"}


def _kernel_definition(func):
    """The ``def`` of a kernel as an AST with the file's line numbers, or None where the
    source is not available (e.g. exec'd code: nothing can be checked then)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
    except (OSError, TypeError, SyntaxError):
        return None
    definition = tree.body[0]
    if not isinstance(definition, ast.FunctionDef):
        return None
    ast.increment_lineno(definition, func.__code__.co_firstlineno - 1)
    return definition


def _check_parser_subset(func, definition) -> str:
    """C-SYNTAX-01: the kernel source must be something real pypto can parse.  Returns
    the kernel's site, file:line of its ``def``."""
    filename = func.__code__.co_filename
    if func.__code__.co_flags & __future__.annotations.compiler_flag:
        violation("C-SYNTAX-01", f"kernel {func.__name__} is defined under `from __future__ import annotations`: "
                                 f"pypto would then treat every tensor parameter as a scalar",
                  f"{filename}:{func.__code__.co_firstlineno}")
    if definition is None:
        return f"{filename}:{func.__code__.co_firstlineno}"

    def refuse(node, what):
        violation("C-SYNTAX-01", f"{what} inside kernel {func.__name__} (pypto's parser refuses it)",
                  f"{filename}:{node.lineno}")

    arguments = definition.args
    for kind, present in (("keyword-only parameter", arguments.kwonlyargs), ("*args", arguments.vararg),
                          ("**kwargs", arguments.kwarg), ("positional-only parameter", arguments.posonlyargs)):
        if present:
            refuse(definition, f"{kind} in the signature")
    for node in _parsed_nodes(definition):
        if isinstance(node, ast.stmt) and not isinstance(node, _PARSED_STATEMENTS):
            refuse(node, _STATEMENT_NAMES.get(type(node), f"{type(node).__name__} statement"))
        elif isinstance(node, ast.For) and node.orelse:
            refuse(node, "for-else")
        elif type(node) in _REFUSED_EXPRESSIONS:
            refuse(node, _REFUSED_EXPRESSIONS[type(node)])
    return f"{filename}:{definition.lineno}"


_IF_TEST = "_ptogym_if_test"


def _if_test(value, site: str) -> bool:
    """An ``if``/``elif`` test as pypto's parser takes it: a bool (decided while the
    kernel is built) or a symbolic scalar (a runtime condition); anything else is
    refused there ("Test condition must be a symbolic scalar or boolean")."""
    if isinstance(value, SymbolicScalar):
        return bool(value.value)
    if not isinstance(value, bool):
        violation("C-SYNTAX-01", f"`if` test is {type(value).__name__} {value!r}: pypto's parser takes only a "
                                 f"bool or a symbolic scalar (write e.g. `!= 0` or `is not None`)", site)
    return bool(value)


def _with_checked_if_tests(func, definition):
    """``func`` recompiled with every ``if`` test passed through :func:`_if_test`, the
    file's line numbers and the same globals and closure cells; ``func`` itself when it
    has no ``if`` or no source."""
    tests = [node for node in ast.walk(definition) if isinstance(node, ast.If)] if definition else []
    if not tests:
        return func
    filename = func.__code__.co_filename
    for node in tests:
        node.test = ast.Call(ast.Name(_IF_TEST, ast.Load()), [node.test, ast.Constant(f"{filename}:{node.lineno}")],
                             [])
    definition.decorator_list = []
    # Compiled inside a factory whose parameters are the closure's names, so they stay
    # free variables of the kernel and the original cells can be handed back.
    outer = [_IF_TEST, *func.__code__.co_freevars]
    module = ast.parse(f"def _factory({', '.join(outer)}): pass")
    module.body[0].body = [definition]
    ast.fix_missing_locations(module)
    factory_code = next(c for c in compile(module, filename, "exec").co_consts if isinstance(c, types.CodeType))
    code = next(c for c in factory_code.co_consts if isinstance(c, types.CodeType) and c.co_name == func.__name__)
    cells = dict(zip(func.__code__.co_freevars, func.__closure__ or ()))
    cells[_IF_TEST] = types.CellType(_if_test)
    checked = types.FunctionType(code, func.__globals__, func.__name__, func.__defaults__,
                                 tuple(cells[name] for name in code.co_freevars))
    checked.__kwdefaults__ = func.__kwdefaults__
    return checked


def _parsed_nodes(definition):
    """The nodes pypto's parser visits whatever the arguments: an ``if`` with a Python
    bool test only has its taken branch visited, so if-branches are left out."""
    pending = list(ast.iter_child_nodes(definition))
    while pending:
        node = pending.pop()
        yield node
        if isinstance(node, ast.If):
            pending.append(node.test)
        else:
            pending.extend(ast.iter_child_nodes(node))


def _warn_npu_only(options: dict, site: str) -> None:
    """Options that only mean something on an NPU are ignored here, with one line saying so."""
    run_mode = (options.get("runtime_options") or {}).get("run_mode")
    if run_mode is not None and getattr(run_mode, "value", run_mode) == RunMode.NPU.value:
        warnings.warn_explicit(f"jit option runtime_options['run_mode'] = RunMode.NPU is NPU-only: ptogym.interp "
                               f"runs the kernel on the arguments' torch device instead", RuntimeWarning,
                               *_site_parts(site))


def _site_parts(site: str):
    path, _, line = site.rpartition(":")
    return path, int(line)


class JitKernel:
    """A ``@pypto.frontend.jit`` kernel; options are accepted and kept in ``options``."""

    def __init__(self, func, options: dict, scope: dict | None = None):
        self.func = func
        self.options = options
        self.scope = scope or {}  # the defining frame's locals, for postponed annotations
        definition = _kernel_definition(func)
        self.site = _check_parser_subset(func, definition)
        self._run = _with_checked_if_tests(func, definition)
        _warn_npu_only(options, self.site)
        self.signature = inspect.signature(func)
        self.tensor_params, self.scalar_params = self._split_params()
        functools.update_wrapper(self, func)

    def _annotation(self, param):
        ann = param.annotation
        if isinstance(ann, str):  # postponed annotations: resolve in the kernel's scope
            scope = dict(self.func.__globals__)
            scope.update(self.scope)
            scope.update(inspect.getclosurevars(self.func).nonlocals)
            ann = eval(ann, scope)  # noqa: S307 - the kernel's own annotation text
        return ann

    def _split_params(self):
        tensors, scalars = [], []
        for param in self.signature.parameters.values():
            ann = self._annotation(param)
            (tensors if isinstance(ann, Tensor) else scalars).append((param.name, ann))
        return tensors, scalars

    def __call__(self, *args, **kwargs):
        n = len(self.tensor_params)
        if len(args) < n:
            raise TypeError(f"{self.__name__}: expected at least {n} tensor argument(s), got {len(args)}")
        run = KernelRun(self.__name__, vec_tile=runtime.GLOBAL_RUN.vec_tile,
                        cube_tile=runtime.GLOBAL_RUN.cube_tile, options=self.options)
        runtime.push(run)
        try:
            params = self._bind_tensors(run, args[:n])
            scalars = dict(zip((name for name, _ in self.scalar_params), args[n:]))
            scalars.update(kwargs)
            result = self._run(*params, **scalars)
            run.check_outputs(self.site)
        finally:
            runtime.pop()
        return _to_torch(result)

    def _bind_tensors(self, run: KernelRun, args) -> list:
        device = None
        params = []
        for (name, spec), arg in zip(self.tensor_params, args):
            if not isinstance(arg, torch.Tensor):
                violation("C-ARG-01", f"{self.__name__}({name}=...): got {type(arg).__name__}, expected torch.Tensor")
            if device is None:
                device = arg.device
            elif arg.device != device:
                violation("C-ARG-02", f"{self.__name__}({name}=...): on {arg.device}, other tensors on {device}")
            if not arg.is_contiguous():
                violation("C-ARG-02", f"{self.__name__}({name}=...): non-contiguous tensor (strides {arg.stride()})")
            params.append(self._bind_one(run, name, spec, arg))
        run.device = device
        return params

    def _bind_one(self, run: KernelRun, name: str, spec: Tensor, arg: torch.Tensor) -> Tensor:
        """A parameter shaped like its argument, with the annotation's dynamic axes symbolic.
        The rank rule is pypto's: ``Tensor()`` takes any rank, a list of DYNAMIC/STATIC/ints
        (optionally ending in ``...``) or ``[]`` at least its length, int/symbol shapes exactly."""
        expected = spec.dtype
        if expected is not None and arg.dtype != expected.torch:
            violation("C-ARG-01", f"{self.__name__}({name}=...): dtype {arg.dtype}, annotation says {expected}")
        rule = _rank_rule(spec.spec_shape)
        dims = [d for d in spec.shape if d is not Ellipsis]
        if (rule == "exact" and len(dims) != arg.dim()) or (rule == "at least" and len(dims) > arg.dim()):
            advise("A-ARG-04", f"{self.__name__}({name}=...): rank {arg.dim()} {list(arg.shape)}, annotation "
                               f"{_fmt_spec(spec.shape)} needs rank {'>= ' if rule == 'at least' else ''}{len(dims)}")
        shape = []
        for axis, size in enumerate(arg.shape):
            dim = dims[axis] if axis < len(dims) else STATIC
            if isinstance(dim, StatusType) and dim is not STATIC:
                shape.append(SymbolicScalar(size, f"{name}.shape[{axis}]"))
            elif isinstance(dim, SymbolicScalar):
                bound = run.dims.setdefault(dim.expr, size)
                dim.value = bound  # the kernel body may use the pypto.frontend.dynamic object itself
                if bound != size:  # pypto does not compare the bindings (measured): advice
                    advise("A-ARG-03", f"{self.__name__}({name}=...): dynamic dim {dim.expr} is {size} on axis "
                                       f"{axis}, bound to {bound} by an earlier argument")
                shape.append(SymbolicScalar(size, dim.expr))
            else:
                static = size if dim is STATIC else dim
                if static != size:
                    violation("C-ARG-01", f"{self.__name__}({name}=...): axis {axis} is {size}, annotation says "
                                          f"{static} (shape {list(arg.shape)} vs {_fmt_spec(spec.shape)})")
                shape.append(size)
        record = StorageRecord(name, "param", tuple(arg.shape))
        run.records.append(record)
        param = Tensor(shape, dtypes.from_torch(arg.dtype), name, _data=arg, _record=record,
                       _region=tuple(slice(0, n) for n in arg.shape))
        param.owns_storage = True
        return param


def _rank_rule(spec_shape) -> str:
    """How an annotation constrains the argument's rank (measured with pypto 0.2.0):
    "any" for ``Tensor()`` and ``Tensor([], dt)``, "at least" for a list ending in
    ``...`` (``[DYNAMIC, ...]``), "exact" otherwise (``[DYNAMIC]`` on a rank-2 tensor
    passes pypto's CHECKATTR but fails to compile)."""
    if spec_shape is None or (isinstance(spec_shape, list) and not spec_shape):
        return "any"
    if isinstance(spec_shape, list) and spec_shape[-1] is Ellipsis:
        return "at least"
    return "exact"


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _fmt_spec(shape) -> str:
    return "[" + ", ".join(d.name if isinstance(d, StatusType) else "..." if d is Ellipsis else str(d)
                           for d in shape) + "]"


def _to_torch(result):
    if isinstance(result, Tensor):
        return result.data
    if isinstance(result, (tuple, list)):
        return type(result)(_to_torch(r) for r in result)
    return result


def jit(func=None, **options):
    """``@pypto.frontend.jit`` / ``@pypto.frontend.jit(**options)``."""
    frame = sys._getframe(1)
    scope = {} if frame.f_locals is frame.f_globals else dict(frame.f_locals)
    if func is None:
        return lambda f: JitKernel(f, options, scope)
    return JitKernel(func, options, scope)


def function(func=None, **options):
    """``@pypto.frontend.function``: inlined into the calling kernel; tensor args only."""
    def wrap(f):
        body = _with_checked_if_tests(f, _kernel_definition(f))

        @functools.wraps(f)
        def inlined(*args, **kwargs):
            for value in (*args, *kwargs.values()):
                if not isinstance(value, Tensor):
                    violation("C-API-06", f"@pypto.frontend.function {f.__name__}: argument {value!r} is not a "
                                          f"Tensor; functions take tensor parameters only")
            return body(*args, **kwargs)
        return inlined
    return wrap if func is None else wrap(func)


# --- loops ------------------------------------------------------------------------------
def _range(args):
    if len(args) == 1:
        return 0, args[0], 1
    if len(args) == 2:
        return args[0], args[1], 1
    if len(args) == 3:
        return args
    raise TypeError(f"loop() takes 1 to 3 positional arguments but {len(args)} were given")


def loop(*args, name: str | None = None, idx_name: str | None = None, unroll_list=None,
         submit_before_loop: bool = False):
    """``for i in pypto.loop(stop)`` / ``loop(start, stop[, step])``: i is a symbolic
    index carrying its value."""
    start, stop, step = (value_of(v) for v in _range(args))
    if step == 0:
        violation("C-LOOP-09", f"pypto.loop({', '.join(_fmt_arg(a) for a in args)}): step 0")
        return
    values = range(start, stop, step)
    info = LoopInfo(name or "loop", values[0] if values else None, values[-1] if values else None)
    label = idx_name or name or "i"
    yield from _iterations(SymbolicScalar(v, label, loop=info) for v in values)


def _iterations(items):
    """A loop's iterations, counted as loop depth (ops on dynamic shapes need a loop), each
    starting from the tile shapes the loop started with: pypto records a loop inside a
    configuration scope of its own (``BeginScope``/``EndScope``), so a tile set in the body
    holds there only (upstream ``st/test_options_new_front.py``)."""
    run = runtime.current()
    saved = run.vec_tile, run.cube_tile
    run.loop_depth += 1
    try:
        for item in items:
            yield item
            run.vec_tile, run.cube_tile = saved
    finally:
        run.loop_depth -= 1
        run.vec_tile, run.cube_tile = saved


def loop_unroll(*args, name: str | None = None, idx_name: str | None = None, unroll_list=(1,),
                submit_before_loop: bool = False):
    """Yield ``(index, factor)`` pairs, with pypto's arithmetic: factors largest first
    (1 added), each a sub-loop ``loop(begin, stop - left, step * factor)`` where
    ``left = (stop - start) % (step * factor)`` and the next begins at ``stop - left``.
    ``is_loop_begin``/``is_loop_end`` refer to the first/last index of the sub-loop."""
    start, stop, step = (value_of(v) for v in _range(args))
    call = f"pypto.loop_unroll({', '.join(_fmt_arg(a) for a in args)}, unroll_list={list(unroll_list)})"
    bad = [f for f in unroll_list if not _is_int(f) or f == 0]
    if bad or step == 0:  # pypto: "integer modulo by zero" (measured), or a loop that never ends
        violation("C-LOOP-09", f"{call}: " + (f"factors {bad} are not non-zero ints" if bad else "step 0"))
        return
    if any(f < 0 for f in unroll_list):  # pypto runs their sub-loops zero times (measured)
        advise("A-LOOP-01", f"{call}: negative factors {[f for f in unroll_list if f < 0]} are ignored")
    factors = sorted(set(unroll_list) | {1}, reverse=True)
    label = idx_name or name or "i"
    plan, begin = [], start
    for factor in factors:
        stride = step * factor
        left = (stop - start) % stride
        plan.append((factor, stride, range(begin, stop - left, stride)))
        begin = stop - left
    covered = [i + k * step for _, stride, indices in plan for i in indices for k in range(stride // step)]
    if covered != list(range(start, stop, step)):
        advise("A-LOOP-01", f"pypto.loop_unroll({', '.join(_fmt_arg(a) for a in args)}, unroll_list="
                            f"{list(unroll_list)}) runs iterations {covered[:12]}{'...' if len(covered) > 12 else ''}"
                            f" instead of range({start}, {stop}, {step})")
    for factor, stride, indices in plan:
        if indices:
            info = LoopInfo(f"{name or 'loop_unroll'}_LoopUnroll{factor}", indices[0], indices[-1], stride)
            yield from _iterations((SymbolicScalar(value, label, loop=info), factor) for value in indices)


def _fmt_arg(x) -> str:
    return f"{x.expr}={x.value}" if isinstance(x, SymbolicScalar) else repr(x)


def _loop_position(scalar, which: str) -> SymbolicScalar:
    if not isinstance(scalar, SymbolicScalar) or scalar.loop is None:
        violation("C-LOOP-07", f"pypto.is_loop_{which}({scalar!r}): not a pypto.loop index")
        return SymbolicScalar(0, "is_loop_position(?)")
    target = scalar.loop.first if which == "begin" else scalar.loop.last
    return SymbolicScalar(int(scalar.value == target), f"is_loop_{which}({scalar.expr})")


def is_loop_begin(scalar) -> SymbolicScalar:
    return _loop_position(scalar, "begin")


def is_loop_end(scalar) -> SymbolicScalar:
    return _loop_position(scalar, "end")
