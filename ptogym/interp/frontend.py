"""``pypto.frontend`` and the loop constructs: how a kernel is called and iterated.

``jit`` runs the decorated function eagerly on each call: torch tensors are checked
against their ``pypto.Tensor`` annotations, wrapped as parameters (dynamic dims
become symbolic scalars), the body runs with fresh tile state, and afterwards every
pure output is checked to be fully written.
"""
from __future__ import annotations

import __future__
import ast
import enum
import functools
import inspect
import sys
import textwrap
import types
import warnings

import torch

from . import dtypes, runtime, sanitizer
from .aliasing import copy_back, find_aliases, private_copies
from .checks import advise, exceeded, limit, user_location, violation
from .config import report_pass_verify
from .runtime import KernelRun, LoopInfo, StorageRecord
from .symbolic import IfBranch, SymbolicScalar, value_of
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



class ArgumentCountError(TypeError, RuntimeError):
    """Too few tensor arguments for a kernel: pypto raises RuntimeError (its upstream test
    asserts that), Python's convention is TypeError; both catch it."""

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


def _check_parser_subset(func, definition, *, kernel: bool = True) -> str:
    """C-SYNTAX-01: the kernel source must be something real pypto can parse.  Returns
    the kernel's site, file:line of its ``def``.  A ``@pypto.frontend.function`` body
    (``kernel=False``) obeys the same rules, except that pypto reads its annotations
    from the source, so ``from __future__ import annotations`` does not matter there."""
    filename = func.__code__.co_filename
    if kernel and func.__code__.co_flags & __future__.annotations.compiler_flag:
        violation("C-SYNTAX-01", f"kernel {func.__name__} is defined under `from __future__ import annotations`: "
                                 f"pypto would then treat every tensor parameter as a scalar",
                  f"{filename}:{func.__code__.co_firstlineno}")
    if definition is None:
        return f"{filename}:{func.__code__.co_firstlineno}"

    def refuse(node, what):
        violation("C-SYNTAX-01", f"{what} inside {'kernel' if kernel else 'function'} {func.__name__} (pypto's "
                                 f"parser refuses it)",
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
    if isinstance(value, IfBranch):
        violation("C-SYNTAX-01", "`if pypto.cond(...)` in the kernel's own body: pypto's parser takes the symbolic "
                                 "scalar itself there (`if x > 0:`), not the RecordIfBranch pypto.cond returns "
                                 "(plain helper functions the kernel calls may use pypto.cond)", site)
        return bool(value)
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
        warnings.warn_explicit("jit option runtime_options['run_mode'] = RunMode.NPU is NPU-only: ptogym.interp "
                               "runs the kernel on the arguments' torch device instead", RuntimeWarning,
                               *_site_parts(site))


def _compile_stage(options: dict):
    """The compile stage pypto stops at (a CompStage or its int; 0 is ALL_COMPLETE: compile
    and run): the jit's own host_options, else the global ones (read at the call)."""
    stage = (options.get("host_options") or {}).get("compile_stage")
    return runtime.GLOBAL_RUN.options.get("host_options", {}).get("compile_stage", 0) if stage is None else stage


def _site_parts(site: str):
    path, _, line = site.rpartition(":")
    return path, int(line)


def _annotation(func, ann, scope: dict):
    """A parameter's annotation, postponed ones (strings) evaluated in the function's scope."""
    if isinstance(ann, str):
        names = dict(func.__globals__)
        names.update(scope)
        names.update(inspect.getclosurevars(func).nonlocals)
        ann = eval(ann, names)  # noqa: S307 - the kernel's own annotation text
    return ann


def _parameters(func, scope: dict, what: str, site: str) -> list:
    """``(name, annotation, is_tensor)`` per parameter, in order, with pypto's rules on a
    kernel's and a function's signature (parser.py ``_parse_arguments_with_specs``, C-FRONT-02):
    tensor parameters come first and have no default value."""
    params, seen_scalar = [], None
    for param in inspect.signature(func).parameters.values():
        ann = _annotation(func, param.annotation, scope)
        is_tensor = isinstance(ann, Tensor)
        if is_tensor and seen_scalar:
            violation("C-FRONT-02", f"{what} {func.__name__}: tensor parameter {param.name!r} after non-tensor "
                                    f"parameter {seen_scalar!r} (pypto: non-tensor parameters come last)", site)
        if is_tensor and param.default is not inspect.Parameter.empty:
            violation("C-FRONT-02", f"{what} {func.__name__}: tensor parameter {param.name!r} has a default value "
                                    f"(pypto allows defaults on non-tensor parameters only)", site)
        seen_scalar = seen_scalar or (None if is_tensor else param.name)
        params.append((param.name, ann, is_tensor))
    return params


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
        params = _parameters(func, self.scope, "kernel", self.site)
        self.tensor_params = [(name, ann) for name, ann, is_tensor in params if is_tensor]
        self.scalar_params = [(name, ann) for name, ann, is_tensor in params if not is_tensor]
        functools.update_wrapper(self, func)

    def __call__(self, *args, **kwargs):
        n = len(self.tensor_params)
        if len(args) < n:
            raise ArgumentCountError(f"{self.__name__}: expected at least {n} tensor argument(s), got {len(args)}")
        stage = _compile_stage(self.options)
        tensors = args[:n]
        if getattr(stage, "value", stage):
            advise("A-FRONT-02", f"{self.__name__}: host_options compile_stage = {getattr(stage, 'name', stage)}: pypto "
                                 f"compiles up to that stage and runs nothing, so the arguments keep their "
                                 f"values (the interpreter checks the kernel on copies)", self.site)
            tensors = [t.clone() if isinstance(t, torch.Tensor) else t for t in tensors]
        run = KernelRun(self.__name__, vec_tile=runtime.GLOBAL_RUN.vec_tile,
                        cube_tile=runtime.GLOBAL_RUN.cube_tile, options=self.options)
        sanitizer.start(run)
        runtime.push(run)
        try:
            params, write_back = self._bind_tensors(run, tensors)
            scalars = dict(zip((name for name, _ in self.scalar_params), args[n:]))
            scalars.update(kwargs)
            result = self._run(*params, **scalars)
            if run.sanitizer is not None:
                run.sanitizer.finish()
            run.check_outputs(self.site)
            write_back()
            report_pass_verify(self.__name__, self.options, list(args[:n]))
        finally:
            sanitizer.stop(run)
            runtime.pop()
        return _to_torch(result)

    def _bind_tensors(self, run: KernelRun, args):
        """The parameters, and the function that writes what the kernel wrote through
        aliased ones back into the caller's memory (``aliasing``: pypto's copy in, copy out)."""
        device = None
        for (name, spec), arg in zip(self.tensor_params, args):
            if not isinstance(arg, torch.Tensor):
                violation("C-ARG-01", f"{self.__name__}({name}=...): got {type(arg).__name__}, expected torch.Tensor")
            if device is None:
                device = arg.device
            elif arg.device != device:
                violation("C-ARG-02", f"{self.__name__}({name}=...): on {arg.device}, other tensors on {device}")
            if not arg.is_contiguous():
                violation("C-ARG-02", f"{self.__name__}({name}=...): non-contiguous tensor (strides {arg.stride()})")
        run.device = device
        names = [name for name, _ in self.tensor_params]
        aliases = find_aliases(names, list(args))
        copies = private_copies(list(args), aliases)
        params = [self._bind_one(run, name, spec, arg) for (name, spec), arg in zip(self.tensor_params, copies)]
        if run.sanitizer is not None:  # S-RACE-02 in place of A-ALIAS-01
            run.sanitizer.bind_parameters(names, list(args), [param.record for param in params])
        else:
            for index, alias in aliases.items():
                params[index].record.alias = alias
        return params, lambda: copy_back(aliases, list(args), copies)

    def _bind_one(self, run: KernelRun, name: str, spec: Tensor, arg: torch.Tensor) -> Tensor:
        """A parameter shaped like its argument, with the annotation's dynamic axes symbolic.
        The rank rule is pypto's: ``Tensor()`` takes any rank, a list of DYNAMIC/STATIC/ints
        (optionally ending in ``...``) or ``[]`` at least its length, int/symbol shapes exactly."""
        _check_annotation(f"{self.__name__}({name}=...)", spec, list(arg.shape), dtypes.from_torch(arg.dtype),
                          str(arg.dtype), rank_is_advice=True)
        dims = [d for d in spec.shape if d is not Ellipsis]
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
                    violation("C-ARG-01", f"{self.__name__}({name}=...): does not match the shape of its annotation: "
                                          f"axis {axis} is {size}, annotation says {static} (shape "
                                          f"{list(arg.shape)} vs {_fmt_spec(spec.shape)})")
                shape.append(size)
        record = StorageRecord(name, "param", tuple(arg.shape))
        run.records.append(record)
        param = Tensor(shape, dtypes.from_torch(arg.dtype), name, _data=arg, _record=record,
                       _region=tuple(slice(0, n) for n in arg.shape))
        param.owns_storage = True
        return param


def _check_annotation(call: str, spec: Tensor, shape: list, dtype, dtype_shown: str, site: str | None = None,
                      rank_is_advice: bool = False) -> None:
    """C-ARG-01: an argument's dtype and rank against its ``pypto.Tensor`` annotation (a jit
    kernel's torch argument, or a tensor passed to a ``@pypto.frontend.function``).  A jit
    argument's rank is advice (A-ARG-04): pypto compares it only in its CHECKATTR mode."""
    if spec.dtype is not None and dtype is not spec.dtype:
        violation("C-ARG-01", f"{call}: does not match the dtype of its annotation: dtype {dtype_shown}, annotation "
                              f"says {spec.dtype}", site)
    rule = _rank_rule(spec.spec_shape)
    dims = [d for d in spec.shape if d is not Ellipsis]
    if (rule == "exact" and len(dims) != len(shape)) or (rule == "at least" and len(dims) > len(shape)):
        details = (f"{call}: rank {len(shape)} {_fmt_shape(shape)}, annotation {_fmt_spec(spec.shape)} "
                   f"needs rank {'>= ' if rule == 'at least' else ''}{len(dims)}")
        (advise if rank_is_advice else violation)("A-ARG-04" if rank_is_advice else "C-ARG-01", details, site)


def _fmt_shape(shape) -> str:
    return "[" + ", ".join(str(value_of(d)) for d in shape) + "]"


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


def jit(func=None, *, host_options=None, codegen_options=None, pass_options=None, runtime_options=None,
        verify_options=None, debug_options=None, infer_controlflow_shape=None, use_cache=True, **unknown):
    """``@pypto.frontend.jit`` / ``@pypto.frontend.jit(...)`` with pypto 0.2.0's keyword set
    (``**unknown`` only names the refusal: pypto raises TypeError for any other keyword)."""
    site = user_location()
    _refuse_unknown("pypto.frontend.jit", unknown, site)
    options = {name: value for name, value in (
        ("host_options", host_options), ("codegen_options", codegen_options), ("pass_options", pass_options),
        ("runtime_options", runtime_options), ("verify_options", verify_options),
        ("debug_options", debug_options)) if value is not None}
    frame = sys._getframe(1)
    scope = {} if frame.f_locals is frame.f_globals else dict(frame.f_locals)

    def decorate(f):
        if not inspect.isfunction(f):
            violation("C-FRONT-01", f"pypto.frontend.jit applied to {type(f).__name__} {f!r}: the decorator takes "
                                    f"a function (options are keyword arguments)", site)
        return JitKernel(f, options, scope)
    return decorate if func is None else decorate(func)


def _refuse_unknown(what: str, unknown: dict, site: str) -> None:
    if unknown:
        violation("C-FRONT-01", f"{what}() got unexpected keyword argument(s) {sorted(unknown)} (pypto: TypeError)",
                  site)


def function(func=None, **unknown):
    """``@pypto.frontend.function`` / ``@pypto.frontend.function()``: a function whose body is
    inlined where a kernel calls it (pypto 0.2.0 takes no options)."""
    _refuse_unknown("pypto.frontend.function", unknown, user_location())
    return NestedFunction if func is None else NestedFunction(func)


class NestedFunction:
    """A ``@pypto.frontend.function``, called as pypto's parser inlines it
    (parser.py ``_try_nested_call``): every parameter passed positionally, tensors where
    the annotation is a ``pypto.Tensor`` (matching it), anything elsewhere; the body is
    parsed like a kernel's and returns nothing (results go through out parameters)."""

    def __init__(self, func):
        self.func = func
        self._body = None  # checked on the first call, as pypto parses the body where it is called
        functools.update_wrapper(self, func)

    def __call__(self, *args, **kwargs):
        site = user_location()
        name = self.func.__name__
        if kwargs:
            violation("C-FRONT-02", f"{name}(..., {', '.join(f'{k}=...' for k in kwargs)}): keyword arguments in a "
                                    f"call of a @pypto.frontend.function (pypto's parser refuses them)", site)
        if self._body is None:
            definition = _kernel_definition(self.func)
            _check_parser_subset(self.func, definition, kernel=False)
            self._params = _parameters(self.func, {}, "@pypto.frontend.function", site)
            self._body = _with_checked_if_tests(self.func, definition)
        if len(args) + len(kwargs) != len(self._params):
            violation("C-FRONT-02", f"{name}: called with {len(args) + len(kwargs)} argument(s), it has "
                                    f"{len(self._params)} parameter(s) (pypto passes every one, defaults are not "
                                    f"used)", site)
        for (param, ann, is_tensor), value in zip(self._params, args):
            _check_function_argument(name, param, ann, is_tensor, value, site)
        return self._body(*args, **kwargs)


def _check_function_argument(function_name: str, param: str, ann, is_tensor: bool, value, site: str) -> None:
    """A tensor parameter takes a Tensor that matches its annotation; any other takes
    anything (pypto 0.2.0 compares an ``int``/``bool`` parameter's default, not its
    annotation, so those accept any value: measured)."""
    if not is_tensor:
        return
    call = f"{function_name}({param}=...)"
    if not isinstance(value, Tensor):
        violation("C-FRONT-02", f"{call}: got {type(value).__name__} {value!r} for a pypto.Tensor parameter", site)
        return
    _check_annotation(call, ann, value.shape, value.dtype, str(value.dtype), site)
    for axis, (dim, size) in enumerate(zip([d for d in ann.shape if d is not Ellipsis], value.shape)):
        if _is_int(dim) and _is_int(size) and dim != size:
            violation("C-ARG-01", f"{call}: does not match the shape of its annotation: axis {axis} is {size}, "
                                  f"annotation says {dim}", site)


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
         submit_before_loop: bool = False, **ignored):
    """``for i in pypto.loop(stop)`` / ``loop(start, stop[, step])``: i is a symbolic
    index carrying its value.  pypto reads only these keywords and ignores the rest."""
    _advise_ignored("pypto.loop", ignored)
    start, stop, step = (value_of(v) for v in _range(args))
    if step == 0:
        violation("C-LOOP-09", f"pypto.loop({', '.join(_fmt_arg(a) for a in args)}): step 0")
        return
    call = f"pypto.loop({', '.join(_fmt_arg(a) for a in args)})"
    values = _indices(start, stop, step, call)
    _check_trip_count(call, len(values))
    info = LoopInfo(name or "loop", values[0] if values else None, values[-1] if values else None)
    label = idx_name or name or "i"
    yield from _iterations((SymbolicScalar(v, label, loop=info) for v in values), submit_before_loop)


def _indices(start: int, stop: int, step: int, call: str) -> range:
    """The indices a pypto loop runs: ``range(start, stop, step)`` for a positive step.  With
    a negative one pypto 0.2.0 counts upwards from ``start`` while the index is below
    ``stop`` (measured): zero times when ``start >= stop`` (A-LOOP-03), never ending else."""
    if step > 0:
        return range(start, stop, step)
    if start < stop:
        violation("C-LOOP-09", f"{call}: step {step} < 0 with start {start} < stop {stop}: pypto never finishes")
    else:
        advise("A-LOOP-03", f"{call}: step {step} < 0, so pypto runs it zero times "
                            f"(range({start}, {stop}, {step}) would run {len(range(start, stop, step))})")
    return range(0)


def _check_trip_count(call: str, trips: int) -> None:
    """L-LOOP-01: refuse, before its first iteration, a loop the interpreter could not finish."""
    if trips > limit("L-LOOP-01"):
        exceeded("L-LOOP-01", f"{call}: {trips} iterations > {limit('L-LOOP-01')}")


def _advise_ignored(what: str, ignored: dict) -> None:
    if ignored:
        advise("A-FRONT-01", f"{what}(..., {', '.join(f'{k}=...' for k in ignored)}): pypto ignores "
                             f"{'this keyword' if len(ignored) == 1 else 'these keywords'}")


def _iterations(items, submit_before_loop: bool = False):
    """A loop's iterations, counted as loop depth (ops on dynamic shapes need a loop) and
    against the kernel call's L-LOOP-02 budget, each starting from the tile shapes the
    loop started with: pypto records a loop inside a configuration scope of its own
    (``BeginScope``/``EndScope``), so a tile set in the body holds there only (upstream
    ``st/test_options_new_front.py``).  The sanitizer sees each iteration begin and end,
    and ``submit_before_loop``'s barrier before the loop."""
    run = runtime.current()
    budget = limit("L-LOOP-02")
    saved = run.vec_tile, run.cube_tile
    watch = run.sanitizer
    if watch is not None and submit_before_loop:
        watch.submit_barrier()
    run.loop_depth += 1
    outer_body, run.loop_body = run.loop_body, object()  # pypto makes a loop's body a function of its own
    try:
        for item in items:
            run.loop_iterations += 1
            if run.loop_iterations > budget:
                exceeded("L-LOOP-02", f"kernel {run.name}: more than {budget} loop iterations in one call")
            if watch is not None:
                index = item[0] if isinstance(item, tuple) else item
                watch.enter_iteration(index.loop.name, index.expr, index.value)
                yield item
                watch.leave_iteration()
            else:
                yield item
            run.vec_tile, run.cube_tile = saved
    finally:
        run.loop_depth -= 1
        run.loop_body = outer_body
        run.vec_tile, run.cube_tile = saved


def loop_unroll(*args, name: str | None = None, idx_name: str | None = None, unroll_list=(1,),
                submit_before_loop: bool = False, **ignored):
    """Yield ``(index, factor)`` pairs, with pypto's arithmetic: factors largest first
    (1 added), each a sub-loop ``loop(begin, stop - left, step * factor)`` where
    ``left = (stop - start) % (step * factor)`` and the next begins at ``stop - left``.
    ``is_loop_begin``/``is_loop_end`` refer to the first/last index of the sub-loop."""
    _advise_ignored("pypto.loop_unroll", ignored)
    start, stop, step = (value_of(v) for v in _range(args))
    call = f"pypto.loop_unroll({', '.join(_fmt_arg(a) for a in args)}, unroll_list={list(unroll_list)})"
    bad = [f for f in unroll_list if not _is_int(f) or f == 0]
    if bad or step == 0:  # pypto: "integer modulo by zero" (measured), or a loop that never ends
        violation("C-LOOP-09", f"{call}: " + (f"factors {bad} are not non-zero ints" if bad else "step 0"))
        return
    _check_trip_count(call, len(range(start, stop, step)))
    if any(f < 0 for f in unroll_list):  # pypto runs their sub-loops zero times (measured)
        advise("A-LOOP-01", f"{call}: negative factors {[f for f in unroll_list if f < 0]} are ignored")
    factors = sorted(set(unroll_list) | {1}, reverse=True)
    label = idx_name or name or "i"
    plan, begin = [], start
    for factor in factors:
        stride = step * factor
        left = (stop - start) % stride
        plan.append((factor, stride, _indices(begin, stop - left, stride, call) if factor > 0 else range(0)))
        begin = stop - left
    covered = [i + k * step for _, stride, indices in plan for i in indices for k in range(stride // step)]
    if step > 0 and covered != list(range(start, stop, step)):
        advise("A-LOOP-01", f"pypto.loop_unroll({', '.join(_fmt_arg(a) for a in args)}, unroll_list="
                            f"{list(unroll_list)}) runs iterations {covered[:12]}{'...' if len(covered) > 12 else ''}"
                            f" instead of range({start}, {stop}, {step})")
    for factor, stride, indices in plan:  # each factor a pypto.loop of its own, with its own barrier
        if indices:
            info = LoopInfo(f"{name or 'loop_unroll'}_LoopUnroll{factor}", indices[0], indices[-1], stride)
            yield from _iterations(((SymbolicScalar(value, label, loop=info), factor) for value in indices),
                                   submit_before_loop)
        elif submit_before_loop and runtime.current().sanitizer is not None:
            runtime.current().sanitizer.submit_barrier()


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
