"""Op forms whose result dtype and shape real pypto 0.2.0 infers while it builds the graph.

Each form is an expression over inputs ``t0, t1, ...``; the inputs marked ``vary`` take
every dtype of ``DTYPES`` (every combination when several vary), the others keep theirs
(an index stays DT_INT32).  ``scripts/record_result_dtypes.py`` traces each combination
through real pypto (no compile: the graph is recorded, the op's dtype rules run) and
writes the result's dtype and shape, or the error, to
``tests/fixtures/result_dtypes_pypto.json``; ``tests/test_result_dtypes.py`` runs the
same expressions through ``ptogym.interp`` and compares.

``--compiled`` goes further: every combination the graph builder accepts becomes a kernel
(``kernel_source``) that real pypto compiles and runs, so the rules of its compiler passes and
the values of its CPU run are recorded too (``fixtures/result_dtypes_compiled_pypto.json``);
the test runs the same kernel source on the interpreter.
"""
from dataclasses import dataclass
from itertools import product

DTYPES = ("DT_FP32", "DT_FP16", "DT_BF16", "DT_INT8", "DT_INT16", "DT_INT32", "DT_INT64", "DT_UINT8", "DT_BOOL")
S = [8, 64]


@dataclass(frozen=True)
class Form:
    name: str
    expression: str           # over t0, t1, ...; ``pypto`` is the namespace
    shapes: tuple             # one per input
    vary: tuple               # per input: True (takes every dtype) or its fixed dtype

    def combinations(self) -> list:
        varying = [i for i, v in enumerate(self.vary) if v is True]
        combos = []
        for chosen in product(DTYPES, repeat=len(varying)):
            dts = [v if v is not True else None for v in self.vary]
            for i, dt in zip(varying, chosen):
                dts[i] = dt
            combos.append(tuple(dts))
        return combos


def key(form: Form, dts: tuple) -> str:
    return f"{form.name}|{','.join(dts)}"


TORCH_DTYPES = {"DT_FP32": "float32", "DT_FP16": "float16", "DT_BF16": "bfloat16", "DT_INT8": "int8",
                "DT_INT16": "int16", "DT_INT32": "int32", "DT_INT64": "int64", "DT_UINT8": "uint8", "DT_BOOL": "bool"}


def kernel_source(form, dts: tuple, result: list) -> str:
    """Source of a module whose ``build(pypto)`` returns a jit kernel computing the form into
    ``out`` of the ``result`` [dtype, shape] (pypto's parser reads the source: the annotations
    are literals), for real pypto and the interpreter alike."""
    params = [f"t{i}: pypto.Tensor({list(shape)}, pypto.{dt})" for i, (shape, dt) in enumerate(zip(form.shapes, dts))]
    dtype, shape = result
    rank = max(len(shape), *(len(s) for s in form.shapes))  # a tile of rank >= every operand's
    tile = {1: "64", 2: "16, 64", 3: "1, 16, 64"}[rank]
    return (f"def build(pypto):\n"
            f"    @pypto.frontend.jit\n"
            f"    def kernel({', '.join(params)}, out: pypto.Tensor({shape}, pypto.{dtype})):\n"
            f"        pypto.set_vec_tile_shapes({tile})\n"
            f"        pypto.set_cube_tile_shapes([16, 16], [32, 32], [16, 16])\n"
            f"        out[:] = {form.expression}\n"
            f"    return kernel\n")


def load_kernel_module(source: str, path):
    """The module of ``source``, written to ``path`` (a file: pypto's parser and the
    interpreter read a kernel's source through ``inspect``)."""
    import importlib.util

    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def input_values(form: Form, dts: tuple) -> list:
    """The combination's input tensors, the same for real pypto and the interpreter: small
    positive integers (no division by zero, valid indices, no domain errors), bools mixed."""
    import torch

    tensors = []
    for seed, (shape, dt) in enumerate(zip(form.shapes, dts)):
        g = torch.Generator().manual_seed(seed)
        low = 0 if dt == "DT_BOOL" else 1
        high = 2 if dt == "DT_BOOL" else 5
        tensors.append(torch.randint(low, high, shape, generator=g).to(getattr(torch, TORCH_DTYPES[dt])))
    return tensors


UNARY = ["abs", "ceil", "cos", "exp", "exp2", "expm1", "floor", "log", "log1p", "log2", "log10", "logical_not",
         "neg", "reciprocal", "relu", "round", "rsqrt", "sigmoid", "sign", "sin", "sqrt", "trunc", "clone",
         "isfinite", "signbit", "bitwise_not", "cbrt"]
BINARY = ["add", "sub", "mul", "div", "maximum", "minimum", "fmod", "remainder", "pow", "eq", "ne", "lt", "le",
          "gt", "ge", "logical_and", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift",
          "bitwise_right_shift", "hypot", "copysign", "gcd", "ceil_div"]
WITH_SCALAR = ["add", "sub", "mul", "div", "maximum", "minimum", "fmod", "remainder", "pow", "eq", "ne", "lt", "le",
               "gt", "ge", "bitwise_and", "bitwise_or", "bitwise_xor"]
REDUCTIONS = ["sum", "amax", "amin", "prod"]


def _forms() -> list:
    forms = []
    for op in UNARY:
        forms.append(Form(op, f"pypto.{op}(t0)", (S,), (True,)))
    for op in BINARY:
        forms.append(Form(op, f"pypto.{op}(t0, t1)", (S, S), (True, True)))
    for op in WITH_SCALAR:
        forms.append(Form(f"{op}_int_scalar", f"pypto.{op}(t0, 2)", (S,), (True,)))
        forms.append(Form(f"{op}_float_scalar", f"pypto.{op}(t0, 2.5)", (S,), (True,)))
    for op in REDUCTIONS:
        forms.append(Form(op, f"pypto.{op}(t0, -1)", (S,), (True,)))
        forms.append(Form(f"{op}_keepdim", f"pypto.{op}(t0, -1, keepdim=True)", (S,), (True,)))
    for target in DTYPES:
        forms.append(Form(f"cast_to_{target}", f"pypto.cast(t0, pypto.{target})", (S,), (True,)))
    for out in ("DT_FP32", "DT_FP16", "DT_BF16", "DT_INT32"):
        forms.append(Form(f"matmul_to_{out}", f"pypto.matmul(t0, t1, pypto.{out})", ([16, 32], [32, 16]),
                          (True, True)))
    forms += [
        Form("where", "pypto.where(t0, t1, t2)", (S, S, S), (True, "DT_FP32", "DT_FP32")),
        Form("where_values", "pypto.where(t0, t1, t2)", (S, S, S), ("DT_BOOL", True, True)),
        Form("where_scalar", "pypto.where(t0, t1, 0.0)", (S, S), ("DT_BOOL", True)),
        Form("softmax", "pypto.softmax(t0, -1)", (S,), (True,)),
        Form("cumsum", "pypto.cumsum(t0, -1)", (S,), (True,)),
        Form("tril", "pypto.tril(t0)", (S,), (True,)),
        Form("transpose", "pypto.transpose(t0, 0, 1)", (S,), (True,)),
        Form("unsqueeze", "pypto.unsqueeze(t0, 0)", (S,), (True,)),
        Form("concat", "pypto.concat([t0, t1], 0)", (S, S), (True, True)),
        Form("expand_clone", "pypto.expand_clone(t0, [8, 64])", ([8, 1],), (True,)),
        Form("var", "pypto.var(t0, -1)", (S,), (True,)),
        Form("clip", "pypto.clip(t0, 0, 1)", (S,), (True,)),
        Form("lrelu", "pypto.lrelu(t0, 0.2)", (S,), (True,)),
        Form("gather", "pypto.gather(t0, 1, t1)", (S, [8, 8]), (True, "DT_INT32")),
        Form("index_select", "pypto.index_select(t0, 0, t1)", (S, [4]), (True, "DT_INT32")),
        Form("argsort", "pypto.argsort(t0, -1, False)", (S,), (True,)),
        Form("one_hot", "pypto.one_hot(t0, 16)", ([8],), (True,)),
    ]
    return forms


FORMS = {form.name: form for form in _forms()}
