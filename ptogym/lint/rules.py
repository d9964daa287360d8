"""The OLxx rules: upstream pypto-gym's lint ids, severities and stages, checked from
the AST of one file.

Severities: S0 fatal, S1 error, S2 warning, S3 info.  Stages (the upstream
development pipeline): 4 design, 5 implementation, 6 structural verification,
7 performance tuning; a rule runs only at the stages it lists.  Targets: the file
kinds of ``source.file_kind`` (impl, golden, test, host).

Upstream rules that need artefacts other than the source (SPEC.md, DESIGN.md,
MEMORY.md, orchestrator state, NPU environment) are listed in ``NOT_CHECKED``
with the reason, so ``ptogym lint --rules`` shows the whole id space.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Callable, Iterator

from .pypto_names import known_names
from .source import LOOP_CALLS, TILE_SETTERS, Source, dotted, walk_body

SEVERITIES = ("S0", "S1", "S2", "S3")
IMPL_STAGES = (5, 6, 7)
Hit = tuple  # (ast node, message)


@dataclass(frozen=True)
class Rule:
    id: str
    severity: str
    stages: tuple
    targets: tuple
    title: str
    fix: str
    check: Callable[[Source], Iterator[Hit]]


RULES: dict[str, Rule] = {}


def rule(rule_id, severity, stages, targets, title, fix):
    def register(check):
        RULES[rule_id] = Rule(rule_id, severity, tuple(stages), tuple(targets), title, fix, check)
        return check
    return register


def _jit_params(function: ast.FunctionDef) -> list[ast.arg]:
    return [*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs]


def _is_tensor_annotation(source: Source, annotation) -> bool:
    target = annotation.func if isinstance(annotation, ast.Call) else annotation
    target = target.value if isinstance(target, ast.Subscript) else target
    return source.pypto_attr(target) == "Tensor"


def _imported(node: ast.AST) -> list[str]:
    """Modules an import statement names (``from a import b`` also gives a.b); [] otherwise."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom):
        module = node.module or ""
        return [module] + [f"{module}.{a.name}".lstrip(".") for a in node.names]
    return []


def _names_in(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


# ------------------------------------------------------------------ kernel structure
@rule("OL01", "S0", IMPL_STAGES, ("impl",), "an impl file holds exactly one @pypto.frontend.jit kernel",
      "keep one jit entry per file; move other kernels to their own files")
def _one_jit(source):
    jits = source.jit_functions
    if not jits:
        yield source.tree, "no @pypto.frontend.jit function in this kernel file"
    for extra in jits[1:]:
        yield extra, f"second jit function {extra.name!r} (first: {jits[0].name!r} line {jits[0].lineno})"


@rule("OL02", "S1", IMPL_STAGES, ("impl",), "outputs are written with out[:] =, out.move() or pypto.assemble(), "
      "never by rebinding the parameter",
      "write `out[:] = value`, `out.move(value)` or `pypto.assemble(value, offsets, out)`")
def _output_rebound(source):
    for jit in source.jit_functions:
        params = {a.arg for a in _jit_params(jit)}
        for node in walk_body(jit):
            if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and node.target.id in params:
                yield node, (f"parameter {node.target.id!r} rebound with an augmented assignment; "
                             "the caller's tensor is not written")
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    # x = pypto.cast(x, ...) transforms an input; out = expr (out unused on the right) loses a write
                    if isinstance(target, ast.Name) and target.id in params and target.id not in _names_in(node.value):
                        yield node, (f"parameter {target.id!r} rebound with '=': only a local name changes, "
                                     "the caller's tensor is not written")


@rule("OL03", "S1", IMPL_STAGES, ("impl",), "a jit kernel has no return statement",
      "write results into output parameters and drop the return")
def _jit_return(source):
    for jit in source.jit_functions:
        for node in walk_body(jit):
            if isinstance(node, ast.Return):
                yield node, f"return in jit kernel {jit.name!r}"


@rule("OL04", "S1", IMPL_STAGES, ("impl",), "the jit kernel or a helper it calls sets tile shapes",
      "call pypto.set_vec_tile_shapes(...) / set_cube_tile_shapes(...) before the first compute op")
def _no_tile_shapes(source):
    for jit in source.jit_functions:
        if not any(source.calls(f, *TILE_SETTERS) for f in source.graph(jit)):
            yield jit, f"jit kernel {jit.name!r} never sets vector or cube tile shapes"


@rule("OL05", "S1", IMPL_STAGES, ("impl",), "every jit parameter is annotated (pypto.Tensor(...) for tensors)",
      "annotate tensors as pypto.Tensor([dims...], pypto.DT_...) and scalars with their Python type")
def _unannotated(source):
    for jit in source.jit_functions:
        for arg in _jit_params(jit):
            if arg.annotation is None:
                yield arg, f"parameter {arg.arg!r} of jit kernel {jit.name!r} has no annotation"


@rule("OL06", "S1", IMPL_STAGES, ("impl",), "no Python builtin min()/max() on runtime values in kernel code",
      "use SymbolicScalar .min()/.max() for scalars or pypto.minimum/pypto.maximum for tensors")
def _builtin_minmax(source):
    for jit in source.jit_functions:
        tainted = _tainted_names(source, jit)
        for function in source.graph(jit):
            for node in walk_body(function):
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("min", "max")
                        and any(_is_runtime(source, arg, tainted) for arg in node.args)):
                    yield node, (f"builtin {node.func.id}() on a runtime value in kernel code ({function.name}); "
                                 "symbolic values lose their runtime value")


@rule("OL07", "S0", IMPL_STAGES, ("impl",), "pypto is imported only as `import pypto` (no alias, no from-import)",
      "write `import pypto` and spell every call pypto.<name>")
def _import_form(source):
    for node in ast.walk(source.tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "pypto" and (alias.asname or "." in alias.name):
                    yield node, f"`import {alias.name}{' as ' + alias.asname if alias.asname else ''}`"
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "pypto":
            yield node, f"`from {node.module} import ...`"


@rule("OL08", "S1", IMPL_STAGES, ("impl",), "a staged file <op>_module<k>_impl.py exports <op>_module<k>_wrapper "
      "(<op>_impl.py: <op>_wrapper)", "name the host wrapper <op>_module<k>_wrapper, defined at module level")
def _wrapper_name(source):
    staged = source.staged_name()
    if staged is not None:
        top_level = {n.name for n in source.tree.body if isinstance(n, ast.FunctionDef)}
        if staged[1] not in top_level:
            yield source.tree, f"{source.path.name} defines no module-level {staged[1]}()"
    for wrapper in source.wrappers:
        if wrapper.name.startswith("_"):
            yield wrapper, f"wrapper {wrapper.name!r} is private; the stage runner imports it"


# ------------------------------------------------------------------ file separation
@rule("OL15", "S1", (2, 3, 4, 5, 6), ("golden",), "the golden is plain torch: no pypto import, no .T / .t()",
      "import torch only; transpose with torch.transpose(x, d0, d1)")
def _golden_purity(source):
    for node in ast.walk(source.tree):
        module = next((m for m in _imported(node) if m.split(".")[0] == "pypto" or m.startswith("ptogym.interp")), None)
        if module is not None:
            yield node, f"golden imports {module}"
        if isinstance(node, ast.Attribute) and node.attr == "T":
            yield node, "`.T` in the golden"
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "t"
                and not node.args):
            yield node, "`.t()` in the golden"


@rule("OL16", "S1", IMPL_STAGES, ("impl",), "an impl file does not import the golden",
      "keep the kernel independent of the reference; compare in tests or `ptogym stage`")
def _impl_imports_golden(source):
    for node in ast.walk(source.tree):
        if any(n.split(".")[-1] == "golden" or n.endswith("_golden") for n in _imported(node) if n):
            yield node, "impl imports the golden module"


@rule("OL17", "S1", (5, 6), ("test",), "a test file holds no kernel implementation",
      "move the @pypto.frontend.jit function into the impl file and import it")
def _kernel_in_test(source):
    for jit in source.jit_functions:
        yield jit, f"jit kernel {jit.name!r} defined in a test file"


@rule("OL19", "S1", (5, 6), ("test",), "tests judge precision with detailed_tensor_compare / assert_allclose",
      "use ptogym.verify.detailed_tensor_compare(actual, expected) and assert its all_close")
def _hand_written_tolerance(source):
    for node in ast.walk(source.tree):
        if isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare):
            methods = {c.func.attr for c in ast.walk(node.test.left)
                       if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)}
            if {"abs", "max"} <= methods:
                yield node, "hand-written `assert (a - b).abs().max() < tol`"


@rule("OL22", "S2", (5, 6), ("test",), "tests seed their random inputs",
      "pass generator=torch.Generator().manual_seed(seed) or call torch.manual_seed(seed)")
def _unseeded(source):
    seeded = any(isinstance(n, ast.Call) and dotted(n.func) in ("torch.manual_seed", "manual_seed")
                 for n in ast.walk(source.tree))
    if seeded:
        return
    for node in ast.walk(source.tree):
        if (isinstance(node, ast.Call) and dotted(node.func) in ("torch.randn", "torch.rand", "torch.randint")
                and not any(k.arg == "generator" for k in node.keywords)):
            yield node, f"{dotted(node.func)}() without a generator in a file that never seeds torch"


@rule("OL42", "S1", (5, 6), ("test",), "tests do not hard-code pypto's sim run mode",
      "take the backend from --backend / PTOGYM_BACKEND instead of run_mode='sim'")
def _hard_coded_sim(source):
    for node in ast.walk(source.tree):
        if (isinstance(node, ast.keyword) and node.arg in ("run_mode", "default")
                and isinstance(node.value, ast.Constant) and node.value.value == "sim"):
            yield node.value, f"{node.arg}='sim' hard-coded"


# ------------------------------------------------------------------ annotations and signatures
@rule("OL25", "S1", IMPL_STAGES, ("impl",), "no empty tensor annotation (pypto.Tensor() / pypto.Tensor([], dt))",
      "declare every dim: static ints, pypto.DYNAMIC for runtime dims, and the dtype")
def _empty_annotation(source):
    for jit in source.jit_functions:
        for arg in _jit_params(jit):
            note = arg.annotation
            if isinstance(note, ast.Call) and _is_tensor_annotation(source, note):
                shape = note.args[0] if note.args else next((k.value for k in note.keywords if k.arg == "shape"), None)
                if shape is None or (isinstance(shape, (ast.List, ast.Tuple)) and not shape.elts):
                    yield arg, f"parameter {arg.arg!r}: empty pypto.Tensor annotation"


@rule("OL26", "S1", IMPL_STAGES, ("impl",), "tensor parameters come before non-tensor parameters in a jit signature",
      "move scalar parameters (eps, flags) after the last tensor")
def _param_order(source):
    for jit in source.jit_functions:
        scalar_seen = None
        for arg in _jit_params(jit):
            if arg.annotation is None:
                continue
            if _is_tensor_annotation(source, arg.annotation):
                if scalar_seen:
                    yield arg, f"tensor parameter {arg.arg!r} after non-tensor parameter {scalar_seen!r}"
            else:
                scalar_seen = scalar_seen or arg.arg


@rule("OL29", "S2", (5, 6), ("impl",), "tensor annotations declare the dynamic dims (pypto.DYNAMIC / pypto.DYN)",
      "mark runtime-sized dims pypto.DYNAMIC so one compiled kernel serves every size")
def _no_dynamic_dim(source):
    for jit in source.jit_functions:
        notes = [a.annotation for a in _jit_params(jit) if a.annotation is not None
                 and _is_tensor_annotation(source, a.annotation)]
        dynamic = any(source.pypto_attr(n) in ("DYNAMIC", "DYN") for note in notes for n in ast.walk(note))
        if notes and not dynamic:
            yield jit, f"no tensor of jit kernel {jit.name!r} has a dynamic dim"


# ------------------------------------------------------------------ loops
def _loop_calls(source, function):
    return [n for n in walk_body(function) if source.pypto_call(n, *LOOP_CALLS)]


@rule("OL23", "S2", (5, 6), ("impl",), "the kernel says whether it loops: a jit graph without pypto.loop is flagged",
      "iterate the dynamic axis with pypto.loop(...) (or note why the kernel needs no loop)")
def _no_loop(source):
    for jit in source.jit_functions:
        if not any(_loop_calls(source, f) for f in source.graph(jit)):
            yield jit, f"jit kernel {jit.name!r} has no pypto.loop / loop_unroll"


def _is_loop_of_one(source, call) -> bool:
    values = [a.value for a in call.args if isinstance(a, ast.Constant)]
    return source.pypto_call(call, "loop") and len(values) == len(call.args) and values in ([1], [0, 1], [0, 1, 1])


@rule("OL46", "S2", (5, 6), ("impl",), "pypto.loop(1) only where no other pypto.loop exists in the same function",
      "drop the redundant pypto.loop(1); the real loop already gives the layout check its loop")
def _redundant_loop_one(source):
    for function in source.graph_functions:
        loops = _loop_calls(source, function)
        ones = [c for c in loops if _is_loop_of_one(source, c)]
        if ones and len(loops) > len(ones):
            for call in ones:
                yield call, "pypto.loop(1) next to a real pypto.loop in the same function"


@rule("OL49", "S1", IMPL_STAGES, ("impl",), "unroll_list only on the innermost pypto.loop",
      "move unroll_list to the loop whose body holds no other pypto.loop")
def _outer_unroll(source):
    for node in ast.walk(source.tree):
        if isinstance(node, ast.For) and source.pypto_call(node.iter, *LOOP_CALLS):
            if any(k.arg == "unroll_list" for k in node.iter.keywords):
                inner = [n for stmt in node.body for n in ast.walk(stmt) if source.pypto_call(n, *LOOP_CALLS)]
                if inner:
                    yield node.iter, f"unroll_list on a loop that contains another pypto loop (line {inner[0].lineno})"


@rule("OL56", "S0", (4, 5, 6), ("impl",), "unroll_list has a single value before the tuning stage (7)",
      "use one factor (default [1]) until stage 7; several factors multiply compile paths")
def _multi_unroll(source):
    assignments = source.constant_assignments()
    for node in ast.walk(source.tree):
        if source.pypto_call(node, *LOOP_CALLS):
            for keyword in node.keywords:
                value = keyword.value
                if keyword.arg == "unroll_list" and isinstance(value, ast.Name):
                    value = assignments.get(value.id, value)
                literal = isinstance(value, (ast.List, ast.Tuple, ast.Set))
                if keyword.arg == "unroll_list" and literal and len(value.elts) > 1:
                    yield keyword.value, f"unroll_list with {len(value.elts)} values"


@rule("OL57", "S0", IMPL_STAGES, ("impl",), "kernel code loops only with pypto.loop / loop_unroll / for-in-range "
      "(pypto 0.2.0's parser rejects while; it also unrolls for over a list/tuple, which the upstream gate forbids)",
      "iterate with pypto.loop(...) (submit_before_loop=True for dependent iterations) or for i in range(n)")
def _python_loops(source):
    for function in source.graph_functions:
        for node in walk_body(function):
            if isinstance(node, ast.While):
                yield node, f"while loop in kernel code ({function.name}); pypto's parser has no while"
            elif isinstance(node, ast.For):
                allowed = (isinstance(node.iter, ast.Call) and dotted(node.iter.func) == "range") or \
                    source.pypto_call(node.iter, *LOOP_CALLS)
                if not allowed:
                    yield node, f"for over {ast.unparse(node.iter)!r} in kernel code ({function.name})"
            elif isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
                if any(source.pypto_call(n) for n in ast.walk(node)):
                    yield node, f"comprehension with pypto ops in kernel code ({function.name})"


# ------------------------------------------------------------------ tiles
def _tainted_names(source, jit) -> set[str]:
    """Names holding runtime values in a jit graph: jit parameters, loop indices, anything
    computed from them, from .shape or from a pypto call (SymbolicScalar), and helper
    parameters some call passes such a value to.  Builder arguments and constants stay clean.
    (One name space for the whole graph: a name tainted in one function is tainted in all.)"""
    tainted = {a.arg for a in _jit_params(jit)}
    functions = source.graph(jit)
    changed = True
    while changed:
        before = len(tainted)
        for function in functions:
            for node in walk_body(function):
                if isinstance(node, ast.For) and source.pypto_call(node.iter, *LOOP_CALLS):
                    tainted |= _names_in(_runtime_loop_target(source, node))
                elif isinstance(node, ast.Assign) and _is_runtime(source, node.value, tainted):
                    tainted |= {n for t in node.targets for n in _names_in(t)}
                elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                    tainted |= _runtime_params(source, node, tainted)
        changed = len(tainted) > before
    return tainted


def _runtime_loop_target(source, loop: ast.For) -> ast.AST:
    """What a pypto loop binds at run time: the index.  ``loop_unroll`` also yields the
    unroll factor, a Python int fixed while the kernel is built."""
    target = loop.target
    if source.pypto_call(loop.iter, "loop_unroll") and isinstance(target, ast.Tuple) and target.elts:
        return target.elts[0]
    return target


def _runtime_params(source, call, tainted) -> set[str]:
    """Parameters of the same-file function ``call`` calls that receive a runtime value."""
    names = set()
    for callee in source.functions.get(call.func.id, ()):
        params = [a.arg for a in _jit_params(callee)]
        passed = list(zip(params, call.args)) + [(k.arg, k.value) for k in call.keywords if k.arg]
        names |= {param for param, value in passed if _is_runtime(source, value, tainted)}
    return names


def _is_runtime(source, node, tainted) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id in tainted:
            return True
        if isinstance(sub, ast.Attribute) and sub.attr in ("shape", "valid_shape"):
            return True
        if source.pypto_call(sub):
            return True
    return False


@rule("OL48", "S0", IMPL_STAGES, ("impl",), "tile shapes are compile-time ints (never a kernel parameter, "
      ".shape, SymbolicScalar or loop index); cube axes are [L0, L1] with 0 < L0 <= L1, L1 % L0 == 0",
      "use int literals or constants (builder arguments are constants); derive tiles on the host")
def _runtime_tiles(source):
    for jit in source.jit_functions:
        tainted = _tainted_names(source, jit)
        for function in source.graph(jit):
            for call in source.calls(function, *TILE_SETTERS):
                for arg in [*call.args, *(k.value for k in call.keywords)]:
                    if _is_runtime(source, arg, tainted):
                        yield arg, f"{call.func.attr} argument {ast.unparse(arg)!r} is a runtime value"
                if source.pypto_call(call, "set_cube_tile_shapes"):
                    yield from _cube_axes(call)


def _cube_axes(call):
    for axis, arg in zip("mkn", call.args[:3]):
        if isinstance(arg, (ast.Name, ast.Call, ast.Starred, ast.Subscript, ast.Attribute)):
            continue  # computed while the kernel is built: not decidable from the source
        if not isinstance(arg, (ast.List, ast.Tuple)) or len(arg.elts) != 2:
            yield arg, f"set_cube_tile_shapes {axis} axis {ast.unparse(arg)} is not a 2-element [L0, L1]"
            continue
        values = [e.value for e in arg.elts if isinstance(e, ast.Constant) and isinstance(e.value, int)]
        if len(values) == 2 and not (0 < values[0] <= values[1] and values[1] % values[0] == 0):
            yield arg, f"set_cube_tile_shapes {axis} axis {values}: needs 0 < L0 <= L1 and L1 % L0 == 0"


@rule("OL47", "S3", (5, 6), ("impl",), "a function calling 2+ compute helpers sets tiles inside each helper, "
      "not once at its top", "move set_*_tile_shapes into each helper that needs its own tile")
def _global_tiles(source):
    for function in source.graph_functions:
        top_setters = [s.value for s in function.body
                       if isinstance(s, ast.Expr) and source.pypto_call(s.value, *TILE_SETTERS)]
        helpers = {id(f): f for f in source.callees(function) if source.calls(f)}.values()
        if len(top_setters) == 1 and len(helpers) >= 2 and not any(source.calls(h, *TILE_SETTERS) for h in helpers):
            names = ", ".join(sorted(h.name for h in helpers))
            yield top_setters[0], f"one tile shape at the top of {function.name} for helpers {names}"


@rule("OL52", "S1", IMPL_STAGES, ("impl",), "pypto.view's shape, offsets and valid_shape have the same rank",
      "give shape, offsets and valid_shape one entry per dim (view is not reshape)")
def _view_rank(source):
    for node in ast.walk(source.tree):
        if source.pypto_call(node, "view"):
            named = {k.arg: k.value for k in node.keywords}
            lists = {name: named.get(name, node.args[i] if len(node.args) > i else None)
                     for i, name in ((1, "shape"), (2, "offsets"), (3, "valid_shape"))}
            ranks = {name: len(v.elts) for name, v in lists.items() if isinstance(v, (ast.List, ast.Tuple))}
            if len(set(ranks.values())) > 1:
                yield node, "pypto.view ranks differ: " + ", ".join(f"{k} {v}" for k, v in ranks.items())


# ------------------------------------------------------------------ names and host side
@rule("OL55", "S0", (4, 5, 6, 7), ("impl", "host", "test"), "every pypto.<name> exists in pypto 0.2.0",
      "use the pypto 0.2.0 name (see `ptogym lint --rules` for where the list comes from)")
def _unknown_names(source):
    names, _ = known_names()
    top, sub = set(names["top"]), names["sub"]
    inner = {id(n.value) for n in ast.walk(source.tree) if isinstance(n, ast.Attribute)}
    for node in ast.walk(source.tree):
        if not isinstance(node, ast.Attribute) or id(node) in inner:
            continue  # judge each chain once, from its full spelling
        attr = source.pypto_attr(node)
        if attr is None:
            continue
        parts = attr.split(".")
        if parts[0] not in top:
            yield node, f"pypto.{parts[0]} does not exist in pypto {names['version']}"
        elif len(parts) > 1 and parts[0] in sub and parts[1] not in sub[parts[0]]:
            yield node, f"pypto.{parts[0]}.{parts[1]} does not exist in pypto {names['version']}"


_CREATION = ("zeros", "empty", "ones", "full", "tensor", "zeros_like", "empty_like", "ones_like", "full_like")


@rule("OL58", "S0", IMPL_STAGES, ("impl", "host"), "a host wrapper allocates outputs with torch, not pypto",
      "allocate with torch.empty/zeros(..., dtype=, device=) and pass the tensor to the jit entry")
def _pypto_alloc_on_host(source):
    for wrapper in source.wrappers:
        for call in source.calls(wrapper):
            if call.func.attr in _CREATION:
                yield call, f"pypto.{call.func.attr} in host wrapper {wrapper.name!r}"


@rule("OL45", "S0", IMPL_STAGES, ("impl", "host"),
      "a host wrapper calls the kernel once; no Python loop driving it per chunk",
      "iterate chunks inside the kernel with pypto.loop + pypto.view offsets")
def _host_loop(source):
    jit_names = {f.name for f in source.jit_functions}
    for wrapper in source.wrappers:
        for loop in (n for n in walk_body(wrapper) if isinstance(n, (ast.For, ast.While))):
            for call in (n for n in ast.walk(loop) if isinstance(n, ast.Call)):
                name = dotted(call.func) or ""
                if name.split(".")[-1] in jit_names or "kernel" in name or name.endswith("launch"):
                    yield loop, f"host wrapper {wrapper.name!r} calls {name}() inside a Python loop"
                    break


_TORCH_ALLOWED = {"empty", "zeros", "ones", "full", "empty_like", "zeros_like", "ones_like", "full_like",
                  "tensor", "as_tensor", "device", "dtype", "Size", "Generator", "manual_seed", "Tensor",
                  "empty_strided", "from_numpy", "no_grad", "inference_mode", "is_tensor", "finfo", "iinfo"}


@rule("OL62", "S0", IMPL_STAGES, ("impl",), "impl files use torch for layout/allocation only; ptogym kernel.py "
      "builders do not import torch",
      "compute with pypto ops inside the jit graph; keep torch to allocation and layout")
def _torch_math(source):
    for node in ast.walk(source.tree):
        if source.path.name == "kernel.py" and any(m.split(".")[0] == "torch" for m in _imported(node)):
            yield node, "kernel.py imports torch; a kernel builder receives only the pypto namespace"
        if isinstance(node, ast.Call):
            name = dotted(node.func) or ""
            parts = name.split(".")
            if parts[0] in ("torch", "F") and len(parts) > 1 and parts[-1] not in _TORCH_ALLOWED \
                    and not name.startswith(("torch.cuda", "torch.npu")):
                yield node, f"{name}() computes on the host"
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            yield node, "`@` matmul on the host"


# ------------------------------------------------------------------ upstream ids not decided from source
NOT_CHECKED = {
    "OL09": "SPEC.md structure (gate: not a source property)",
    "OL10": "API_REPORT.md structure (gate)",
    "OL11": "golden importable at stage 2 (ptogym stage imports it)",
    "OL12": "DESIGN.md structure (gate)",
    "OL13": "deliverable files present (gate)",
    "OL14": "stage ordering (orchestrator state)",
    "OL18": "test imports impl and golden (ptogym tests reach both through the OpSpec registry)",
    "OL20": "TILE_FWK_DEVICE_ID handling (NPU test harness; ptogym tests pick a backend)",
    "OL21": "level 0/1 test functions (ptogym levels live in cases.json)",
    "OL24": "orchestrator state file (gate)",
    "OL28": "sigmoid/softmax/sin/cos dtype (needs dtypes: the interpreter checks at run time)",
    "OL30": "spec dtypes covered by tests (gate)",
    "OL31": "DESIGN.md dynamic axes vs annotations (gate)",
    "OL32": "spec tolerances vs tests (gate)",
    "OL33": "golden vs wrapper arity (cross-file)",
    "OL34": "spec P0 shapes covered by tests (gate)",
    "OL37": "DESIGN.md names traceable in impl (gate)",
    "OL39": "front matter present (gate)",
    "OL40": "front matter fields (gate)",
    "OL41": "lint output pasted into code (gate)",
    "OL43": "DESIGN.md dynamic axes need a real pypto.loop (gate; OL23 warns without DESIGN.md)",
    "OL44": "staged file set present (ptogym stage checks the chain)",
    "OL50": "wrapper parameters vs module_interfaces.yaml (gate)",
    "OL51": "outputs written vs module_interfaces.yaml (gate; the interpreter's C-OUT-01 checks writes)",
    "OL53": "golden inventory in MEMORY.md (ptogym stage checks golden.py's inventory)",
    "OL54": "MEMORY.md self-review (gate)",
    "OL59": "golden performance report (gate)",
    "OL60": "test entry reaches a jit (cross-file)",
    "OL61": "MEMORY.md experience preflight (gate)",
}
