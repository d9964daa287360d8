"""Small kernels, one per op form, run both through real pypto 0.2.0 (recorded by
``scripts/record_api_fixtures.py`` into ``tests/fixtures/api_ops.pt``) and through
``ptogym.interp`` (``tests/test_interp_api_ops.py`` compares the two).

A case is a few kernel statements over tensor parameters ``t0, t1, ...`` (inputs)
and ``o0, o1, ...`` (outputs).  ``kernel_source`` writes them into a real module
file, because pypto's parser reads a kernel's source text: the same text then runs
under both namespaces.
"""
import importlib.util
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch

_DTYPES = {"float32": "DT_FP32", "float16": "DT_FP16", "bfloat16": "DT_BF16", "int32": "DT_INT32",
           "int16": "DT_INT16", "int8": "DT_INT8", "int64": "DT_INT64", "bool": "DT_BOOL", "uint8": "DT_UINT8"}


@dataclass
class Case:
    name: str
    code: str                      # kernel statements; without ``o0`` it is the expression written to o0
    inputs: list                   # torch tensors (t0, t1, ...)
    outputs: list                  # per output (o0, o1, ...): (shape, torch dtype), zero-filled, or a
                                   # tensor: its initial content (an in/out parameter)
    tile: tuple = (8, 64)
    helpers: str = ""              # module-level code before the kernel (e.g. an op_wrapper helper)

    def statements(self) -> list:
        code = self.code if "o0" in self.code else f"o0[:] = {self.code}"
        return code.strip().splitlines()

    def output_specs(self) -> list:
        return [(list(o.shape), o.dtype) if isinstance(o, torch.Tensor) else o for o in self.outputs]

    def empty_outputs(self) -> list:
        return [o.clone() if isinstance(o, torch.Tensor) else torch.zeros(o[0], dtype=o[1]) for o in self.outputs]


def _spec(shape, dtype) -> str:
    return f"pypto.Tensor({list(shape)}, pypto.{_DTYPES[str(dtype).replace('torch.', '')]})"


def kernel_source(case: Case) -> str:
    params = [f"t{i}: {_spec(t.shape, t.dtype)}" for i, t in enumerate(case.inputs)]
    params += [f"o{i}: {_spec(shape, dtype)}" for i, (shape, dtype) in enumerate(case.output_specs())]
    body = [f"pypto.set_vec_tile_shapes({', '.join(map(str, case.tile))})"] + case.statements()
    helpers = "".join(f"    {line}\n" for line in case.helpers.strip().splitlines())
    return ("def build(pypto):\n" + helpers +
            "    @pypto.frontend.jit\n"
            f"    def {case.name}({', '.join(params)}):\n"
            + "".join(f"        {line}\n" for line in body)
            + f"    return {case.name}\n")


_module_dir = None


def builder(case: Case):
    """``build(pypto)`` for the case, from a module file written once per process."""
    global _module_dir
    if _module_dir is None:
        _module_dir = Path(tempfile.mkdtemp(prefix="ptogym-api-cases-"))
    path = _module_dir / f"api_case_{case.name}.py"
    path.write_text(kernel_source(case))
    spec = importlib.util.spec_from_file_location(f"api_case_{case.name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.build


# --- inputs ---------------------------------------------------------------------------------
def rand(shape, dtype=torch.float32, seed=0, low=-4.0, high=4.0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_floating_point:
        return (torch.rand(shape, generator=g, dtype=torch.float64) * (high - low) + low).to(dtype)
    return torch.randint(int(low), int(high), shape, generator=g, dtype=torch.int64).to(dtype)


def distinct(shape, dtype=torch.float32, seed=0):
    """Values without ties (sort/topk order is then unique)."""
    g = torch.Generator().manual_seed(seed)
    n = 1
    for s in shape:
        n *= s
    return (torch.randperm(n, generator=g).reshape(shape).to(torch.float64) / 4 - n / 8).to(dtype)


F32, F16, BF16, I32, I16, I8, BOOL = (torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int16,
                                       torch.int8, torch.bool)
S = [8, 64]


# how published model kernels call the scalar division of pypto_impl
SCALAR_DIV = """
@pypto.operation.op_wrapper
def scalar_div(input, other, reverse):
    return pypto.pypto_impl.ScalarDivS(input, pypto.pypto_impl.Element(input.dtype, other), reverse)
"""


def _cases() -> list:
    c = []
    add = c.append
    # logical / predicates
    add(Case("logical_and_bool", "pypto.logical_and(t0, t1)", [rand(S, BOOL, 1), rand(S, BOOL, 2)], [(S, BOOL)]))
    add(Case("logical_and_fp32", "pypto.logical_and(t0, t1)",
             [rand(S, F32, 1).round(), rand(S, F32, 2).round()], [(S, BOOL)]))
    special = torch.tensor([float("inf"), float("-inf"), float("nan"), 0.0, -0.0, 1.5, -2.0, 3e38] * 64).reshape(S)
    add(Case("isfinite_fp32", "pypto.isfinite(t0)", [special], [(S, BOOL)]))
    add(Case("isfinite_fp16", "pypto.isfinite(t0)", [special.to(F16)], [(S, BOOL)]))
    add(Case("signbit_fp32", "pypto.signbit(t0)", [special], [(S, BOOL)]))
    # bitwise
    for op in ("and", "or", "xor"):
        add(Case(f"bitwise_{op}_int32", f"pypto.bitwise_{op}(t0, t1)",
                 [rand(S, I32, 1, -1000, 1000), rand(S, I32, 2, -1000, 1000)], [(S, I32)]))
        add(Case(f"bitwise_{op}_int16_scalar", f"pypto.bitwise_{op}(t0, 6)",
                 [rand(S, I16, 3, -100, 100)], [(S, I16)]))
    add(Case("bitwise_not_int32", "pypto.bitwise_not(t0)", [rand(S, I32, 4, -1000, 1000)], [(S, I32)]))
    add(Case("bitwise_left_shift_int32", "pypto.bitwise_left_shift(t0, t1)",
             [rand(S, I32, 5, -1000, 1000), rand(S, I32, 6, 0, 8)], [(S, I32)]))
    add(Case("bitwise_right_shift_int32", "pypto.bitwise_right_shift(t0, t1)",
             [rand(S, I32, 5, -1000, 1000), rand(S, I32, 6, 0, 8)], [(S, I32)]))
    add(Case("bitwise_right_shift_int16_scalar", "pypto.bitwise_right_shift(t0, 2)",
             [rand(S, I16, 7, -1000, 1000)], [(S, I16)]))
    # arithmetic extras
    add(Case("hypot_fp32", "pypto.hypot(t0, t1)", [rand(S, F32, 1), rand(S, F32, 2)], [(S, F32)]))
    add(Case("copysign_fp32", "pypto.copysign(t0, t1)", [rand(S, F32, 1), rand(S, F32, 2)], [(S, F32)]))
    add(Case("cbrt_fp32", "pypto.cbrt(t0)", [rand(S, F32, 3)], [(S, F32)]))
    add(Case("gcd_int32", "pypto.gcd(t0, t1)", [rand(S, I32, 1, -60, 60), rand(S, I32, 2, -60, 60)], [(S, I32)]))
    add(Case("ceil_div_int32", "pypto.ceil_div(t0, t1)",
             [rand(S, I32, 1, -60, 60), rand(S, I32, 2, 1, 9)], [(S, I32)]))
    add(Case("lrelu_fp32", "pypto.lrelu(t0, 0.2)", [rand(S, F32, 1)], [(S, F32)]))
    add(Case("prelu_fp32", "pypto.prelu(t0, t1)", [rand(S, F32, 1), rand([64], F32, 2, 0, 1)], [(S, F32)]))
    add(Case("var_fp32", "pypto.var(t0, -1)", [rand(S, F32, 1)], [([8], F32)]))
    add(Case("var_fp32_keepdim", "pypto.var(t0, -1, 0, True)", [rand(S, F32, 1)], [([8, 1], F32)]))
    add(Case("expand_exp_dif_fp32", "pypto.expand_exp_dif(t0, t1)",
             [rand(S, F32, 1), rand([8, 1], F32, 2)], [(S, F32)]))
    # scan
    add(Case("cumsum_fp32_dim1", "pypto.cumsum(t0, 1)", [rand(S, F32, 1)], [(S, F32)]))
    add(Case("cumsum_fp32_dim0", "pypto.cumsum(t0, 0)", [rand(S, F32, 1)], [(S, F32)]))
    add(Case("cumsum_int32", "pypto.cumsum(t0, -1)", [rand(S, I32, 1, -50, 50)], [(S, I32)]))
    # sort
    add(Case("topk_fp32", "v, i = pypto.topk(t0, 8, -1, True)\no0[:] = v\no1[:] = i",
             [distinct(S)], [([8, 8], F32), ([8, 8], I32)]))
    add(Case("topk_fp32_smallest", "v, i = pypto.topk(t0, 4, -1, False)\no0[:] = v\no1[:] = i",
             [distinct(S)], [([8, 4], F32), ([8, 4], I32)]))
    add(Case("argsort_fp32", "pypto.argsort(t0, -1, False)", [distinct(S)], [(S, I32)]))
    add(Case("argsort_fp32_desc", "pypto.argsort(t0, -1, True)", [distinct(S)], [(S, I32)]))
    # triangular / pad / one_hot / expand
    add(Case("tril_fp32", "pypto.tril(t0)", [rand([64, 64], F32, 1)], [([64, 64], F32)], tile=(64, 64)))
    add(Case("tril_fp32_diag", "pypto.tril(t0, -3)", [rand(S, F32, 1)], [(S, F32)]))
    add(Case("triu_fp32_diag", "pypto.triu(t0, 2)", [rand(S, F32, 1)], [(S, F32)]))
    add(Case("pad_fp32", "pypto.pad(t0, [0, 8, 0, 2], 'constant', 0.0)", [rand(S, F32, 1)],
             [([10, 72], F32)], tile=(16, 128)))
    add(Case("pad_fp32_neg_inf", "pypto.pad(t0, [0, 8], 'constant', float('-inf'))", [rand(S, F32, 1)],
             [([8, 72], F32)], tile=(8, 128)))
    add(Case("one_hot_int32", "pypto.one_hot(t0, 16)", [rand([8], I32, 1, 0, 16)], [([8, 16], I32)],
             tile=(8, 16)))
    add(Case("expand_clone_fp32", "pypto.expand_clone(t0, [8, 64])", [rand([8, 1], F32, 1)], [(S, F32)]))
    add(Case("expand_clone_row_fp32", "pypto.expand_clone(t0, [8, 64])", [rand([1, 64], F32, 1)], [(S, F32)]))
    # indexing
    rows = torch.tensor([3, 0, 6, 1], dtype=torch.int32)
    add(Case("index_add_fp32", "pypto.index_add(t0, 0, t1, t2)",
             [rand(S, F32, 1), rows, rand([4, 64], F32, 2)], [(S, F32)]))
    add(Case("index_add_alpha_fp32", "pypto.index_add(t0, 0, t1, t2, alpha=2.0)",
             [rand(S, F32, 1), rows, rand([4, 64], F32, 2)], [(S, F32)]))
    add(Case("index_put_fp32", "x = pypto.clone(t0)\npypto.index_put_(x, (t1,), t2)\no0[:] = x",
             [rand(S, F32, 1), rows, rand([4, 64], F32, 2)], [(S, F32)]))
    add(Case("index_put_accumulate_fp32", "x = pypto.clone(t0)\npypto.index_put_(x, (t1,), t2, True)\no0[:] = x",
             [rand(S, F32, 1), rows, rand([4, 64], F32, 2)], [(S, F32)]))
    cols = torch.randint(0, 64, S, generator=torch.Generator().manual_seed(9), dtype=torch.int64).to(I32)
    add(Case("scatter_scalar_fp32", "pypto.scatter(t0, 1, t1, 5.0)", [rand(S, F32, 1), cols], [(S, F32)]))
    add(Case("scatter_tensor_fp32", "pypto.scatter(t0, 1, t1, t2)",
             [rand(S, F32, 1), cols, rand(S, F32, 2)], [(S, F32)]))
    add(Case("scatter_add_fp32", "pypto.scatter(t0, 1, t1, t2, reduce='add')",
             [rand(S, F32, 1), cols, rand(S, F32, 2)], [(S, F32)]))
    add(Case("scatter__fp32", "x = pypto.clone(t0)\npypto.scatter_(x, 1, t1, 2.0)\no0[:] = x",
             [rand(S, F32, 1), cols], [(S, F32)]))
    # pypto_impl scalar helpers used by published kernels
    add(Case("scalar_div_s_fp32", "scalar_div(t0, 3.0, False)", [rand(S, F32, 1)], [(S, F32)], helpers=SCALAR_DIV))
    add(Case("scalar_div_s_reverse_fp32", "scalar_div(t0, 3.0, True)", [rand(S, F32, 1, 0.5, 4)], [(S, F32)],
             helpers=SCALAR_DIV))
    add(Case("rms_norm_fp32", "pypto.rms_norm(t0, t1, 1e-6)", [rand(S, F32, 1), rand([64], F32, 2)], [(S, F32)]))
    # dtype and argument rules (what real pypto accepts or rejects)
    for dt in (I8, I16, torch.uint8):
        add(Case(f"bitwise_left_shift_{str(dt)[6:]}", "pypto.bitwise_left_shift(t0, t1)",
                 [rand(S, dt, 5, 0, 60), rand(S, dt, 6, 0, 4)], [(S, dt)]))
    add(Case("bitwise_and_fp32", "pypto.bitwise_and(t0, t1)", [rand(S, F32, 1), rand(S, F32, 2)], [(S, F32)]))
    add(Case("bitwise_and_int8", "pypto.bitwise_and(t0, t1)", [rand(S, I8, 1, -100, 100), rand(S, I8, 2, -100, 100)],
             [(S, I8)]))
    add(Case("bitwise_not_bool", "pypto.bitwise_not(t0)", [rand(S, BOOL, 1)], [(S, BOOL)]))
    add(Case("logical_and_mixed", "pypto.logical_and(t0, t1)", [rand(S, BOOL, 1), rand(S, F32, 2).round()],
             [(S, BOOL)]))
    add(Case("isfinite_bf16", "pypto.isfinite(t0)", [special.to(BF16)], [(S, BOOL)]))
    add(Case("isfinite_int32", "pypto.isfinite(t0)", [rand(S, I32, 1)], [(S, BOOL)]))
    add(Case("cumsum_fp16", "pypto.cumsum(t0, 1)", [rand(S, F16, 1)], [(S, F16)]))
    add(Case("cumsum_bf16", "pypto.cumsum(t0, 1)", [rand(S, BF16, 1)], [(S, BF16)]))
    add(Case("topk_dim0_fp32", "v, i = pypto.topk(t0, 2, 0)\no0[:] = v\no1[:] = i", [distinct(S)],
             [([2, 64], F32), ([2, 64], I32)]))
    add(Case("topk_fp16", "v, i = pypto.topk(t0, 8)\no0[:] = v\no1[:] = i", [distinct(S, F16)],
             [([8, 8], F16), ([8, 8], I32)]))
    add(Case("topk_ties_fp32", "v, i = pypto.topk(t0, 8)\no0[:] = v\no1[:] = i", [rand(S, F32, 3).round()],
             [([8, 8], F32), ([8, 8], I32)]))
    add(Case("topk_k_too_big", "v, i = pypto.topk(t0, 65)\no0[:] = v\no1[:] = i", [distinct(S)],
             [([8, 65], F32), ([8, 65], I32)], tile=(8, 128)))
    add(Case("argsort_int32", "pypto.argsort(t0)", [distinct(S).to(I32)], [(S, I32)]))
    add(Case("sort32_fp32", "pypto.sort32(t0)", [distinct([4, 32])], [([4, 64], F32)], tile=(4, 64)))
    add(Case("mrgsort_fp32", "pypto.mrgsort(pypto.sort32(t0), 32)", [distinct([4, 64])], [([4, 128], F32)],
             tile=(4, 128)))
    add(Case("tril_int32", "pypto.tril(t0, 1)", [rand(S, I32, 1)], [(S, I32)]))
    add(Case("tril_1d", "pypto.tril(t0)", [rand([64], F32, 1)], [([64], F32)], tile=(64,)))
    add(Case("pad_left_rejected", "pypto.pad(t0, [8, 0], 'constant', 0.0)", [rand(S, F32, 1)], [([8, 72], F32)],
             tile=(8, 128)))
    add(Case("pad_value_one", "pypto.pad(t0, [0, 8, 0, 0], 'constant', 1.0)", [rand(S, F32, 1)], [([8, 72], F32)],
             tile=(8, 128)))
    add(Case("pad_reflect", "pypto.pad(t0, [0, 8, 0, 0], 'reflect')", [rand(S, F32, 1)], [([8, 72], F32)],
             tile=(8, 128)))
    add(Case("pad_3d", "pypto.pad(t0, [0, 8, 0, 0, 0, 1], 'constant', 0.0)", [rand([2, 8, 64], F32, 1)],
             [([3, 8, 72], F32)], tile=(4, 8, 128)))
    add(Case("fillpad_fp32", "v = pypto.view(t0, [8, 64], [0, 0], valid_shape=[5, 40])\n"
             "o0[:] = pypto.fillpad(v, 'constant', float('-inf'))", [rand(S, F32, 1)], [(S, F32)]))
    add(Case("one_hot_zero_classes", "pypto.one_hot(t0, 0)", [rand([8], I32, 1, 0, 16)], [([8, 16], I32)],
             tile=(8, 16)))
    add(Case("one_hot_int64", "pypto.one_hot(t0, 16)", [rand([8], torch.int64, 1, 0, 16)],
             [([8, 16], torch.int64)], tile=(8, 16)))
    add(Case("expand_clone_bad_axis", "pypto.expand_clone(t0, [8, 64])", [rand([8, 2], F32, 1)], [(S, F32)]))
    add(Case("expand_clone_3d", "pypto.expand_clone(t0, [2, 8, 64])", [rand([1, 8, 1], F32, 1)],
             [([2, 8, 64], F32)], tile=(2, 8, 64)))
    add(Case("index_add_dim1_fp32", "pypto.index_add(t0, 1, t1, t2)",
             [rand(S, F32, 1), rows, rand([8, 4], F32, 2)], [(S, F32)]))
    add(Case("index_add__fp32", "x = pypto.clone(t0)\npypto.index_add_(x, 0, t1, t2)\no0[:] = x",
             [rand(S, F32, 1), rows, rand([4, 64], F32, 2)], [(S, F32)]))
    add(Case("index_put_2d_fp32", "x = pypto.clone(t0)\npypto.index_put_(x, (t1, t2), t3)\no0[:] = x",
             [rand(S, F32, 1), rows, torch.tensor([5, 9, 63, 0], dtype=I32), rand([4], F32, 2)], [(S, F32)]))
    add(Case("scatter_multiply_fp32", "pypto.scatter(t0, 1, t1, t2, reduce='multiply')",
             [rand(S, F32, 1), cols, rand(S, F32, 2)], [(S, F32)]))
    add(Case("scatter_dim0_fp32", "pypto.scatter(t0, 0, t1, 1.5)",
             [rand(S, F32, 1), torch.randint(0, 8, S, generator=torch.Generator().manual_seed(3)).to(I32)],
             [(S, F32)]))
    add(Case("gathermask_fp32", "pypto.gathermask(t0, 1)", [rand(S, F32, 1)], [([8, 32], F32)]))
    add(Case("expand_exp_dif_row", "pypto.expand_exp_dif(t0, t1)", [rand(S, F32, 1), rand([1, 64], F32, 2)],
             [(S, F32)]))
    add(Case("var_all_dims", "pypto.var(t0)", [rand(S, F32, 1)], [([1], F32)]))
    add(Case("var_bf16", "pypto.var(t0, -1)", [rand(S, BF16, 1)], [([8], BF16)]))
    add(Case("ceil_div_scalar", "pypto.ceil_div(t0, 4)", [rand(S, I32, 1, -60, 60)], [(S, I32)]))
    add(Case("ceil_div_fp32", "pypto.ceil_div(t0, t1)", [rand(S, F32, 1), rand(S, F32, 2, 1, 4)], [(S, F32)]))
    add(Case("signbit_int32", "pypto.signbit(t0)", [rand(S, I32, 1)], [(S, BOOL)]))
    add(Case("rms_norm_bf16_no_gamma", "pypto.rms_norm(t0)", [rand(S, BF16, 1)], [(S, BF16)]))
    # published-kernel forms: paged-KV gather, transposed batch matmul, operators, methods, controls
    kv = torch.arange(6 * 16, dtype=torch.float32).reshape(6, 16).to(F16)
    add(Case("gather_in_ub_fp16", "pypto.experimental.gather_in_ub(t0, t1, t2, 2, -2)",
             [kv, torch.tensor([[0, 4, 3]], dtype=I32), torch.tensor([[0, 2, 1]], dtype=I32)], [([3, 16], F16)],
             tile=(8, 16)))
    add(Case("transposed_batchmatmul_fp16",
             "pypto.set_cube_tile_shapes([16, 16], [32, 32], [64, 64])\n"
             "o0[:] = pypto.experimental.transposed_batchmatmul(t0, t1, pypto.DT_FP32)",
             [rand([16, 2, 32], F16, 1), rand([2, 32, 64], F16, 2)], [([16, 2, 64], F32)], tile=(16, 2, 64)))
    add(Case("matmul_operator_fp16", "pypto.set_cube_tile_shapes([16, 16], [32, 32], [16, 16])\no0[:] = t0 @ t1",
             [rand([16, 32], F16, 1), rand([32, 16], F16, 2)], [([16, 16], F16)], tile=(16, 16)))
    add(Case("rtruediv_fp32", "3.0 / t0", [rand(S, F32, 1, 0.5, 4)], [(S, F32)]))
    add(Case("floordiv_pow_fp32", "(t0 // t1) + (t0 ** 2.0)",
             [rand(S, F32, 1, 0.5, 4), rand(S, F32, 2, 0.5, 4)], [(S, F32)]))
    add(Case("methods_fp32", "o0[:] = t0.cumsum(1)\no1[:] = t0.var(-1, keepdim=True)", [rand(S, F32, 1)],
             [(S, F32), ([8, 1], F32)]))
    add(Case("fill__clone_fp32", "u = pypto.clone(t0)\nu.fill_(2.0)\no0[:] = u", [rand(S, F32, 1)], [(S, F32)]))
    add(Case("set_matrix_size_fp32", "pypto.set_matrix_size([8, 64])\no0[:] = pypto.exp(t0)", [rand(S, F32, 1)],
             [(S, F32)]))
    add(Case("sort32_two_groups_offset", "pypto.sort32(t0, 100)", [distinct([4, 64])], [([4, 128], F32)],
             tile=(4, 128)))
    add(Case("topk_3d_fp32", "v, i = pypto.topk(t0, 4)\no0[:] = v\no1[:] = i", [distinct([2, 4, 64])],
             [([2, 4, 4], F32), ([2, 4, 4], I32)], tile=(2, 4, 64)))
    add(Case("scatter_element_fp32", "pypto.scatter(t0, 1, t1, pypto.Element(pypto.DT_FP32, -1.5))",
             [rand(S, F32, 1), cols], [(S, F32)]))
    add(Case("cumsum_3d_dim1", "pypto.cumsum(t0, 1)", [rand([2, 8, 64], F32, 1)], [([2, 8, 64], F32)],
             tile=(2, 8, 64)))
    # in place on an in/out parameter (a cache updated by the kernel)
    add(Case("index_put_param_fp32", "pypto.index_put_(o0, (t0,), t1)", [rows, rand([4, 64], F32, 2)],
             [rand(S, F32, 1)]))
    add(Case("scatter__param_fp32", "pypto.scatter_(o0, 1, t0, 2.0)", [cols], [rand(S, F32, 1)]))
    add(Case("index_add__param_fp32", "pypto.index_add_(o0, 0, t0, t1)", [rows, rand([4, 64], F32, 2)],
             [rand(S, F32, 1)]))
    return c


CASES = {case.name: case for case in _cases()}
