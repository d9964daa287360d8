"""The hand-written differential corpus: every implemented op x dtype x edge.

``CASES`` maps a case name to its spec (``programs.py`` explains the format).  Names
are stable: they are the fixture file names.  ``BOUNDS`` gives the documented
tolerance of a case that is not held to bitwise equality; ``KNOWN`` lists the known
differences from real pypto, each with its reason (docs/fidelity.md).
"""
import zlib

FLOATS = ("DT_FP32", "DT_FP16", "DT_BF16")
ROWS, COLS = 16, 64  # small 2-D shape; 64 x 2 B = 128 B keeps fp16/bf16 rows 32-byte aligned

CASES: dict = {}


def inp(shape, dtype="DT_FP32", fill="normal", **extra) -> dict:
    return {"shape": list(shape), "dtype": dtype, "fill": fill, **extra}


def add(name: str, steps, inputs, out_shape, out_dtype, vec_tile, **extra) -> None:
    """Register a chain case; steps may be one step or a list of them."""
    if isinstance(steps[0], str):
        steps = [steps]
    assert name not in CASES, name
    CASES[name] = {"inputs": inputs, "outputs": [{"shape": list(out_shape), "dtype": out_dtype}],
                   "vec_tile": list(vec_tile), "steps": [list(s) for s in steps], **extra}


def idx(shape, high, dtype="DT_INT32") -> dict:
    """Indices drawn from [0, high)."""
    return inp(shape, dtype, "index", high=high)


def step(op, *args, **kwargs) -> list:
    return [op, list(args), kwargs]


def dt_name(dtype: str) -> str:
    return dtype[3:].lower()


TILE = (8, COLS)
SHAPE = (ROWS, COLS)

# ---------------------------------------------------------------- binary, tensor x tensor
for op in ("add", "sub", "mul", "div", "maximum", "minimum", "pow", "fmod", "remainder"):
    for dt in FLOATS:
        fill = "positive" if op == "pow" else "normal"
        add(f"{op}_{dt_name(dt)}", step(op, "$0", "$1"), [inp(SHAPE, dt, fill), inp(SHAPE, dt)], SHAPE, dt, TILE)
for op in ("add", "sub", "mul", "maximum", "minimum"):
    add(f"{op}_int32", step(op, "$0", "$1"), [inp(SHAPE, "DT_INT32"), inp(SHAPE, "DT_INT32")], SHAPE, "DT_INT32",
        TILE)
for op in ("add", "mul", "div", "maximum"):
    add(f"{op}_special_fp32", step(op, "$0", "$1"), [inp(SHAPE, fill="special"), inp(SHAPE, fill="special")],
        SHAPE, "DT_FP32", TILE)
    add(f"{op}_special_fp16", step(op, "$0", "$1"),
        [inp(SHAPE, "DT_FP16", "special"), inp(SHAPE, "DT_FP16", "special")], SHAPE, "DT_FP16", TILE)
add("add_alpha_fp32", step("add", "$0", "$1", alpha=2.5), [inp(SHAPE), inp(SHAPE)], SHAPE, "DT_FP32", TILE)
add("sub_alpha_bf16", step("sub", "$0", "$1", alpha=0.5), [inp(SHAPE, "DT_BF16"), inp(SHAPE, "DT_BF16")], SHAPE,
    "DT_BF16", TILE)

# integer arithmetic at the limits: int8/int16 wrap, int32 division
add("add_int8_wrap", step("add", "$0", "$1"), [inp(SHAPE, "DT_INT8", "int", range=[60, 128]),
                                               inp(SHAPE, "DT_INT8", "int", range=[60, 128])], SHAPE, "DT_INT8", TILE)
add("mul_int16_wrap", step("mul", "$0", "$1"), [inp(SHAPE, "DT_INT16", "int", range=[-400, 400]),
                                                inp(SHAPE, "DT_INT16", "int", range=[-400, 400])], SHAPE, "DT_INT16",
    TILE)
add("sub_int32_wrap", step("sub", "$0", "$1"), [inp(SHAPE, "DT_INT32", "int", range=[-2**31, -2**31 + 100]),
                                                inp(SHAPE, "DT_INT32", "int", range=[0, 1000])], SHAPE, "DT_INT32",
    TILE)
add("div_int32", step("div", "$0", "$1"), [inp(SHAPE, "DT_INT32", "int", range=[-1000, 1000]),
                                           inp(SHAPE, "DT_INT32", "int", range=[1, 50])], SHAPE, "DT_INT32", TILE)
add("div_scalar_int32", step("div", "$0", 4), [inp(SHAPE, "DT_INT32", "int", range=[-1000, 1000])], SHAPE,
    "DT_INT32", TILE)
add("maximum_int8", step("maximum", "$0", "$1"), [inp(SHAPE, "DT_INT8"), inp(SHAPE, "DT_INT8")], SHAPE, "DT_INT8",
    TILE)
add("where_int32", step("where", "$0", "$1", "$2"), [inp(SHAPE, "DT_BOOL"), inp(SHAPE, "DT_INT32"),
                                                     inp(SHAPE, "DT_INT32")], SHAPE, "DT_INT32", TILE)
add("lt_bf16", step("lt", "$0", "$1"), [inp(SHAPE, "DT_BF16", "special"), inp(SHAPE, "DT_BF16", "special")], SHAPE,
    "DT_BOOL", TILE)
add("div_scalar_zero_fp32", step("div", "$0", 0.0), [inp(SHAPE, fill="special")], SHAPE, "DT_FP32", TILE)
add("pow_special_fp32", step("pow", "$0", "$1"), [inp(SHAPE, fill="special"), inp(SHAPE, fill="special")], SHAPE,
    "DT_FP32", TILE)

# ---------------------------------------------------------------- binary, tensor x scalar
for op in ("add", "sub", "mul", "div", "maximum", "minimum"):
    for dt in FLOATS:
        add(f"{op}_scalar_{dt_name(dt)}", step(op, "$0", 2.5), [inp(SHAPE, dt)], SHAPE, dt, TILE)
for dt in ("DT_FP32", "DT_FP16"):
    add(f"add_scalar_inf_{dt_name(dt)}", step("add", "$0", "inf"), [inp(SHAPE, dt)], SHAPE, dt, TILE)
    add(f"mul_scalar_huge_{dt_name(dt)}", step("mul", "$0", 1e39), [inp(SHAPE, dt)], SHAPE, dt, TILE)
add("pow_scalar_fp32", step("pow", "$0", 3), [inp(SHAPE)], SHAPE, "DT_FP32", TILE)
add("pow_scalar_half_fp32", step("pow", "$0", 0.5), [inp(SHAPE, fill="positive")], SHAPE, "DT_FP32", TILE)
add("add_scalar_int32", step("add", "$0", 7), [inp(SHAPE, "DT_INT32")], SHAPE, "DT_INT32", TILE)
add("mul_scalar_first_fp32", step("mul", 3.0, "$0"), [inp(SHAPE)], SHAPE, "DT_FP32", TILE)

for dt, value in (("DT_FP16", 2.5), ("DT_BF16", -0.375), ("DT_FP32", 1e39)):
    add(f"mul_element_{dt_name(dt)}", step("mul", "$0", {"element": [dt, value]}), [inp(SHAPE, dt)], SHAPE, dt, TILE)
add("add_element_int32", step("add", "$0", {"element": ["DT_INT32", -7]}), [inp(SHAPE, "DT_INT32")], SHAPE,
    "DT_INT32", TILE)

# ---------------------------------------------------------------- creation
for dt, value in (("DT_FP32", 2.5), ("DT_FP16", -1.25), ("DT_BF16", 3.0), ("DT_INT32", 7)):
    add(f"full_add_{dt_name(dt)}", [step("full", list(SHAPE), value, dt), step("add", "$0", "$1")], [inp(SHAPE, dt)],
        SHAPE, dt, TILE)
add("full_element_fp16", [step("full", list(SHAPE), {"element": ["DT_FP16", 0.5]}, "DT_FP16"), step("mul", "$0", "$1")],
    [inp(SHAPE, "DT_FP16")], SHAPE, "DT_FP16", TILE)
add("zeros_sub_fp32", [step("zeros", ROWS, COLS, dtype="DT_FP32"), step("sub", "$1", "$0")], [inp(SHAPE)], SHAPE,
    "DT_FP32", TILE)
add("ones_div_bf16", [step("ones", [ROWS, COLS], dtype="DT_BF16"), step("div", "$1", "$0")], [inp(SHAPE, "DT_BF16")],
    SHAPE, "DT_BF16", TILE)
add("arange_int32", [step("arange", COLS), step("add", "$0", "$1")], [inp((COLS,), "DT_INT32")], (COLS,), "DT_INT32",
    (COLS,))
add("arange_start_step_fp32", [step("arange", 0.5, 32.5, 0.5), step("mul", "$0", "$1")], [inp((COLS,))], (COLS,),
    "DT_FP32", (COLS,))

# ---------------------------------------------------------------- comparisons, where, clip
for op in ("eq", "ne", "lt", "le", "gt", "ge"):
    for dt in ("DT_FP32", "DT_FP16", "DT_INT32"):
        fill = "int" if dt == "DT_INT32" else "special"
        ins = [inp(SHAPE, dt, fill, range=[-3, 4]), inp(SHAPE, dt, fill, range=[-3, 4])]
        add(f"{op}_{dt_name(dt)}", step(op, "$0", "$1"), ins, SHAPE, "DT_BOOL", TILE)
    add(f"{op}_scalar_fp32", step(op, "$0", 0.5), [inp(SHAPE)], SHAPE, "DT_BOOL", TILE)
for dt in FLOATS:
    add(f"where_{dt_name(dt)}", step("where", "$0", "$1", "$2"),
        [inp(SHAPE, "DT_BOOL"), inp(SHAPE, dt), inp(SHAPE, dt)], SHAPE, dt, TILE)
add("where_scalar_other_fp32", step("where", "$0", "$1", 0.0), [inp(SHAPE, "DT_BOOL"), inp(SHAPE)], SHAPE,
    "DT_FP32", TILE)
add("where_from_compare_fp32", [step("gt", "$0", "$1"), step("where", "$2", "$0", "$1")], [inp(SHAPE), inp(SHAPE)],
    SHAPE, "DT_FP32", TILE)
for dt in FLOATS:
    add(f"clip_{dt_name(dt)}", step("clip", "$0", -0.5, 0.75), [inp(SHAPE, dt, "special")], SHAPE, dt, TILE)
add("clip_min_only_fp32", step("clip", "$0", min=0.0), [inp(SHAPE)], SHAPE, "DT_FP32", TILE)

# ---------------------------------------------------------------- unary
UNARY_POSITIVE = ("log", "log2", "log10", "log1p", "sqrt", "rsqrt")
UNARY = ("exp", "exp2", "expm1", "reciprocal", "abs", "neg", "relu", "sigmoid", "sin", "cos", "ceil", "floor", "trunc",
         "round", "sign", "clone") + UNARY_POSITIVE
for op in UNARY:
    for dt in FLOATS:
        fill = "positive" if op in UNARY_POSITIVE else "normal"
        add(f"{op}_{dt_name(dt)}", step(op, "$0"), [inp(SHAPE, dt, fill, scale=3.0)], SHAPE, dt, TILE)
    add(f"{op}_special_fp32", step(op, "$0"), [inp(SHAPE, fill="special")], SHAPE, "DT_FP32", TILE)
add("round_decimals_fp32", step("round", "$0", 2), [inp(SHAPE, scale=10.0)], SHAPE, "DT_FP32", TILE)
add("logical_not_bool", step("logical_not", "$0"), [inp(SHAPE, "DT_BOOL")], SHAPE, "DT_BOOL", TILE)
add("abs_int32", step("abs", "$0"), [inp(SHAPE, "DT_INT32")], SHAPE, "DT_INT32", TILE)
for dt in FLOATS:
    add(f"softmax_{dt_name(dt)}", step("softmax", "$0", -1), [inp(SHAPE, dt, scale=4.0)], SHAPE, dt, TILE)

# ---------------------------------------------------------------- reductions
for op in ("sum", "amax", "amin", "prod"):
    for dt in FLOATS:
        scale = 0.5 if op == "prod" else 1.0
        add(f"{op}_last_keepdim_{dt_name(dt)}", step(op, "$0", -1, True), [inp(SHAPE, dt, scale=scale)],
            (ROWS, 1), dt, TILE)
    add(f"{op}_first_keepdim_fp32", step(op, "$0", 0, True), [inp(SHAPE)], (1, COLS), "DT_FP32", TILE)
    add(f"{op}_last_drop_fp32", step(op, "$0", -1), [inp((ROWS, 8, COLS))], (ROWS, 8), "DT_FP32", (4, 8, COLS))
    add(f"{op}_special_fp32", step(op, "$0", -1, True), [inp(SHAPE, fill="special")], (ROWS, 1), "DT_FP32", TILE)
for op in ("max", "min"):  # pypto.max/min take two scalars only: rejected
    add(f"{op}_tensor_form_fp32", step(op, "$0", -1, True), [inp(SHAPE)], (ROWS, 1), "DT_FP32", TILE)
add("greater_fp32", step("greater", "$0", "$1"), [inp(SHAPE), inp(SHAPE)], SHAPE, "DT_BOOL", TILE)
add("sum_4d_axis1_fp32", step("sum", "$0", 1, True), [inp((2, 4, 4, 32))], (2, 1, 4, 32), "DT_FP32", (1, 4, 4, 32))
add("amin_3d_first_drop_bf16", step("amin", "$0", 0), [inp((4, 8, 32), "DT_BF16")], (8, 32), "DT_BF16", (4, 8, 32))
add("softmax_dim0_fp32", step("softmax", "$0", 0), [inp(SHAPE, scale=3.0)], SHAPE, "DT_FP32", TILE)
add("round_decimals_bf16", step("round", "$0", 1), [inp(SHAPE, "DT_BF16", scale=10.0)], SHAPE, "DT_BF16", TILE)
add("sum_tiled_axis_fp32", step("sum", "$0", -1, True), [inp((8, 256))], (8, 1), "DT_FP32", (8, 64))
add("amax_tiled_axis_fp32", step("amax", "$0", -1, True), [inp((8, 256))], (8, 1), "DT_FP32", (8, 64))
add("sum_int32", step("sum", "$0", -1, True), [inp(SHAPE, "DT_INT32")], (ROWS, 1), "DT_INT32", TILE)
add("amax_int32", step("amax", "$0", -1, True), [inp(SHAPE, "DT_INT32")], (ROWS, 1), "DT_INT32", TILE)
add("sum_3d_mid_fp32", step("sum", "$0", 1, True), [inp((4, 8, 32))], (4, 1, 32), "DT_FP32", (2, 8, 32))
add("rmsnorm_fp32", [step("mul", "$0", "$0"), step("sum", "$1", -1, True), step("mul", "$2", 1.0 / COLS),
                     step("add", "$3", 1e-6), step("rsqrt", "$4"), step("mul", "$0", "$5")],
    [inp(SHAPE)], SHAPE, "DT_FP32", TILE)
add("rmsnorm_bf16_via_fp32", [step("cast", "$0", "DT_FP32"), step("mul", "$1", "$1"), step("sum", "$2", -1, True),
                              step("mul", "$3", 1.0 / COLS), step("add", "$4", 1e-6), step("rsqrt", "$5"),
                              step("mul", "$1", "$6"), step("cast", "$7", "DT_BF16")],
    [inp(SHAPE, "DT_BF16")], SHAPE, "DT_BF16", TILE)

# ---------------------------------------------------------------- casts at the limits
MODES = ("CAST_NONE", "CAST_RINT", "CAST_ROUND", "CAST_FLOOR", "CAST_CEIL", "CAST_TRUNC", "CAST_ODD")
for target in ("DT_FP16", "DT_BF16", "DT_INT8", "DT_INT16", "DT_INT32"):
    for mode in MODES:
        add(f"cast_fp32_{dt_name(target)}_{mode[5:].lower()}", step("cast", "$0", target, f"CastMode.{mode}"),
            [inp(SHAPE, fill="special")], SHAPE, target, TILE)
for target in ("DT_INT8", "DT_INT16"):
    add(f"cast_fp32_{dt_name(target)}_saturate", step("cast", "$0", target, "CastMode.CAST_NONE", "SaturationMode.ON"),
        [inp(SHAPE, fill="special")], SHAPE, target, TILE)
    add(f"cast_int32_{dt_name(target)}_wrap", step("cast", "$0", target), [inp(SHAPE, "DT_INT32", "int",
                                                                                  range=[-70000, 70000])],
        SHAPE, target, TILE)
    add(f"cast_int32_{dt_name(target)}_saturate", step("cast", "$0", target, "CastMode.CAST_NONE", "SaturationMode.ON"),
        [inp(SHAPE, "DT_INT32", "int", range=[-70000, 70000])], SHAPE, target, TILE)
for mode in ("CAST_ROUND", "CAST_FLOOR", "CAST_CEIL", "CAST_TRUNC", "CAST_RINT"):
    add(f"cast_fp32_fp32_{mode[5:].lower()}", step("cast", "$0", "DT_FP32", f"CastMode.{mode}"),
        [inp(SHAPE, fill="special")], SHAPE, "DT_FP32", TILE)
for src in ("DT_FP16", "DT_BF16"):
    add(f"cast_{dt_name(src)}_fp32", step("cast", "$0", "DT_FP32"), [inp(SHAPE, src, "special")], SHAPE, "DT_FP32",
        TILE)
    add(f"cast_{dt_name(src)}_int32", step("cast", "$0", "DT_INT32"), [inp(SHAPE, src, "special")], SHAPE,
        "DT_INT32", TILE)
add("cast_fp16_int8", step("cast", "$0", "DT_INT8"), [inp(SHAPE, "DT_FP16", "special")], SHAPE, "DT_INT8", TILE)
add("cast_bf16_int16_floor", step("cast", "$0", "DT_INT16", "CastMode.CAST_FLOOR"), [inp(SHAPE, "DT_BF16", "special")],
    SHAPE, "DT_INT16", TILE)
add("cast_fp16_bf16", step("cast", "$0", "DT_BF16"), [inp(SHAPE, "DT_FP16", "special")], SHAPE, "DT_BF16", TILE)
add("cast_bf16_fp16", step("cast", "$0", "DT_FP16"), [inp(SHAPE, "DT_BF16", "special")], SHAPE, "DT_FP16", TILE)
add("cast_int32_fp32", step("cast", "$0", "DT_FP32"), [inp(SHAPE, "DT_INT32", "int", range=[-2**30, 2**30])],
    SHAPE, "DT_FP32", TILE)
add("cast_int32_fp16", step("cast", "$0", "DT_FP16"), [inp(SHAPE, "DT_INT32", "int", range=[-70000, 70000])],
    SHAPE, "DT_FP16", TILE)
add("cast_int8_fp16", step("cast", "$0", "DT_FP16"), [inp(SHAPE, "DT_INT8")], SHAPE, "DT_FP16", TILE)
add("cast_bool_fp32", step("cast", "$0", "DT_FP32"), [inp(SHAPE, "DT_BOOL")], SHAPE, "DT_FP32", TILE)
add("cast_fp32_bool", step("cast", "$0", "DT_BOOL"), [inp(SHAPE, fill="special")], SHAPE, "DT_BOOL", TILE)

# ---------------------------------------------------------------- broadcasting
for dt in FLOATS:
    add(f"add_bcast_row_{dt_name(dt)}", step("add", "$0", "$1"), [inp(SHAPE, dt), inp((1, COLS), dt)], SHAPE, dt,
        TILE)
    add(f"mul_bcast_col_{dt_name(dt)}", step("mul", "$0", "$1"), [inp(SHAPE, dt), inp((ROWS, 1), dt)], SHAPE, dt,
        TILE)
add("sub_bcast_both_fp32", step("sub", "$0", "$1"), [inp((ROWS, 1)), inp((1, COLS))], SHAPE, "DT_FP32", TILE)
add("add_bcast_rank1_fp32", step("add", "$0", "$1"), [inp(SHAPE), inp((COLS,))], SHAPE, "DT_FP32", TILE)
add("mul_bcast_rank2_to_3_fp32", step("mul", "$0", "$1"), [inp((4, 8, 32)), inp((8, 32))], (4, 8, 32), "DT_FP32",
    (2, 8, 32))
add("add_bcast_3d_mid_fp32", step("add", "$0", "$1"), [inp((4, 8, 32)), inp((4, 1, 32))], (4, 8, 32), "DT_FP32",
    (2, 8, 32))
add("sub_rowmax_bcast_fp32", [step("amax", "$0", -1, True), step("sub", "$0", "$1"), step("exp", "$2")],
    [inp(SHAPE)], SHAPE, "DT_FP32", TILE)

# ---------------------------------------------------------------- ranks and tiles
add("add_3d_fp32", step("add", "$0", "$1"), [inp((4, 8, 32)), inp((4, 8, 32))], (4, 8, 32), "DT_FP32", (2, 4, 32))
add("exp_4d_bf16", step("exp", "$0"), [inp((2, 3, 8, 32), "DT_BF16")], (2, 3, 8, 32), "DT_BF16", (1, 2, 8, 32))
add("mul_4d_fp16", step("mul", "$0", "$1"), [inp((2, 2, 4, 32), "DT_FP16"), inp((2, 2, 4, 32), "DT_FP16")],
    (2, 2, 4, 32), "DT_FP16", (1, 1, 4, 32))
add("add_tile_ragged_fp32", step("add", "$0", "$1"), [inp((37, 72)), inp((37, 72))], (37, 72), "DT_FP32", (8, 16))
add("add_tile_bigger_than_tensor_fp32", step("add", "$0", "$1"), [inp((4, 8)), inp((4, 8))], (4, 8), "DT_FP32",
    (8, 64))
add("add_tile_small_last_fp16", step("add", "$0", "$1"), [inp((4, 8), "DT_FP16"), inp((4, 8), "DT_FP16")], (4, 8),
    "DT_FP16", (4, 8))
add("add_tile_rank_mismatch_fp32", step("add", "$0", "$1"), [inp((4, 8, 32)), inp((4, 8, 32))], (4, 8, 32),
    "DT_FP32", (8, 32))
add("exp_tile_misaligned_fp32", step("exp", "$0"), [inp((8, 12))], (8, 12), "DT_FP32", (8, 6))
add("add_tile_ub_overflow_fp32", step("add", "$0", "$1"), [inp((64, 1024)), inp((64, 1024))], (64, 1024), "DT_FP32",
    (64, 1024))
add("sum_buffer_overflow_fp32", step("sum", "$0", -1, True), [inp((32, 1024))], (32, 1), "DT_FP32", (32, 1024))

# ---------------------------------------------------------------- loops: tails, dynamic axes, clipping
for dt in FLOATS:
    add(f"exp_loop_tail_{dt_name(dt)}", step("exp", "$0"), [inp((37, 32), dt)], (37, 32), dt, (8, 32), loop=8)
    add(f"add_loop_dynamic_{dt_name(dt)}", step("add", "$0", "$1"), [inp((37, 32), dt), inp((37, 32), dt)], (37, 32),
        dt, (8, 32), loop=8, dynamic=True)
add("exp_loop_clip_fp32", step("exp", "$0"), [inp((37, 32))], (37, 32), "DT_FP32", (8, 32), loop=8, clip=True)
add("exp_loop_clip_dynamic_fp32", step("exp", "$0"), [inp((37, 32))], (37, 32), "DT_FP32", (8, 32), loop=8,
    clip=True, dynamic=True)
add("rmsnorm_loop_dynamic_fp32", [step("mul", "$0", "$0"), step("sum", "$2", -1, True), step("mul", "$3", 1.0 / 32),
                                  step("add", "$4", 1e-6), step("rsqrt", "$5"), step("mul", "$0", "$6"),
                                  step("mul", "$7", "$1")],
    [inp((21, 32)), inp((1, 32), tiled=False)], (21, 32), "DT_FP32", (4, 32), loop=4, dynamic=True)
add("softmax_loop_tail_fp32", step("softmax", "$0", -1), [inp((13, 64), scale=3.0)], (13, 64), "DT_FP32", (4, 64),
    loop=4)
add("cast_loop_dynamic_bf16_fp32", step("cast", "$0", "DT_FP32"), [inp((19, 32), "DT_BF16")], (19, 32), "DT_FP32",
    (8, 32), loop=8, dynamic=True)
add("sum_loop_tail_keepdim_fp32", step("sum", "$0", -1, True), [inp((13, 64))], (13, 1), "DT_FP32", (4, 64), loop=4)
add("whole_dynamic_rejected_fp32", step("exp", "$0"), [inp((16, 32))], (16, 32), "DT_FP32", (8, 32), dynamic=True)

# ---------------------------------------------------------------- layout
for dt in FLOATS:
    add(f"transpose_2d_{dt_name(dt)}", step("transpose", "$0", 0, 1), [inp((32, 64), dt)], (64, 32), dt, (32, 32))
add("transpose_3d_fp32", step("transpose", "$0", 1, 2), [inp((2, 16, 32))], (2, 32, 16), "DT_FP32", (1, 16, 16))
add("transpose_3d_outer_fp32", step("transpose", "$0", 0, 1), [inp((4, 8, 32))], (8, 4, 32), "DT_FP32", (4, 4, 32))
for dim, out in ((0, (2 * ROWS, COLS)), (1, (ROWS, 2 * COLS))):
    for dt in ("DT_FP32", "DT_BF16"):
        add(f"concat_dim{dim}_{dt_name(dt)}", step("concat", ["$0", "$1"], dim), [inp(SHAPE, dt), inp(SHAPE, dt)],
            out, dt, TILE)
add("transpose_in_loop_out_of_bounds_rejected", step("transpose", "$0", 0, 1), [inp((32, 32))], (32, 32), "DT_FP32", (8, 32), loop=8)
add("concat_in_loop_dynamic_fp32", step("concat", ["$0", "$1"], 1), [inp((20, 32)), inp((20, 32))], (20, 64),
    "DT_FP32", (4, 32), loop=4, dynamic=True)
add("concat_three_uneven_fp32", step("concat", ["$0", "$1", "$2"], 0), [inp((8, 32)), inp((4, 32)), inp((12, 32))],
    (24, 32), "DT_FP32", (8, 32))
add("unsqueeze_add_fp32", [step("unsqueeze", "$1", 0), step("add", "$0", "$2")], [inp((4, 8, 32)), inp((8, 32))],
    (4, 8, 32), "DT_FP32", (2, 8, 32))

# ---------------------------------------------------------------- indexing
for dt in ("DT_FP32", "DT_FP16", "DT_INT32"):
    add(f"index_select_rows_{dt_name(dt)}", step("index_select", "$0", 0, "$1"),
        [inp((32, 64), dt), idx((8,), 32, "DT_INT32")], (8, 64), dt, (8, 64))
add("index_select_cols_fp32", step("index_select", "$0", 1, "$1"), [inp((16, 64)), idx((8,), 64, "DT_INT32")],
    (16, 8), "DT_FP32", (16, 8))
add("index_select_int64_index_fp32", step("index_select", "$0", 0, "$1"),
    [inp((32, 64)), idx((8,), 32, "DT_INT64")], (8, 64), "DT_FP32", (8, 64))
add("gather_dim1_fp32", step("gather", "$0", 1, "$1"), [inp((16, 64)), idx((16, 8,), 64, "DT_INT32")],
    (16, 8), "DT_FP32", (16, 8))
add("gather_dim0_fp32", step("gather", "$0", 0, "$1"), [inp((32, 64)), idx((8, 64,), 32, "DT_INT32")],
    (8, 64), "DT_FP32", (8, 64))
add("scatter_update_rows_fp32", step("scatter_update", "$0", -2, "$1", "$2"),
    [inp((32, 64)), inp((8, 1), "DT_INT32", "int", range=[0, 8]), inp((8, 64))], (32, 64), "DT_FP32", (8, 64))
add("scatter_update_distinct_bf16", step("scatter_update", "$0", -2, "$1", "$2"),
    [inp((32, 64), "DT_BF16"), inp((4, 1), "DT_INT32", "int", range=[20, 24]), inp((4, 64), "DT_BF16")], (32, 64),
    "DT_BF16", (8, 64))

# ---------------------------------------------------------------- matmul
CUBE = [[16, 16], [32, 32], [32, 32]]
for dt, out_dt in (("DT_FP16", "DT_FP32"), ("DT_FP16", "DT_FP16"), ("DT_BF16", "DT_FP32"), ("DT_BF16", "DT_BF16"),
                   ("DT_FP32", "DT_FP32"), ("DT_INT8", "DT_INT32")):
    add(f"matmul_{dt_name(dt)}_{dt_name(out_dt)}", step("matmul", "$0", "$1", out_dt),
        [inp((32, 64), dt), inp((64, 32), dt)], (32, 32), out_dt, (16, 32), cube_tile=CUBE)
add("matmul_a_trans_fp16", step("matmul", "$0", "$1", "DT_FP32", a_trans=True),
    [inp((64, 32), "DT_FP16"), inp((64, 32), "DT_FP16")], (32, 32), "DT_FP32", (16, 32), cube_tile=CUBE)
add("matmul_b_trans_bf16", step("matmul", "$0", "$1", "DT_FP32", b_trans=True),
    [inp((32, 64), "DT_BF16"), inp((32, 64), "DT_BF16")], (32, 32), "DT_FP32", (16, 32), cube_tile=CUBE)
add("matmul_both_trans_fp32", step("matmul", "$0", "$1", "DT_FP32", a_trans=True, b_trans=True),
    [inp((64, 32)), inp((32, 64))], (32, 32), "DT_FP32", (16, 32), cube_tile=CUBE)
add("matmul_batched_3d_fp16", step("matmul", "$0", "$1", "DT_FP32"),
    [inp((2, 32, 64), "DT_FP16"), inp((2, 64, 32), "DT_FP16")], (2, 32, 32), "DT_FP32", (1, 16, 32), cube_tile=CUBE)
add("matmul_4d_fp16", step("matmul", "$0", "$1", "DT_FP32"),
    [inp((2, 2, 16, 32), "DT_FP16"), inp((2, 2, 32, 16), "DT_FP16")], (2, 2, 16, 16), "DT_FP32", (1, 1, 16, 16),
    cube_tile=[[16, 16], [32, 32], [16, 16]])
add("matmul_int8_overflow", step("matmul", "$0", "$1", "DT_INT32"),
    [inp((16, 64), "DT_INT8", "int", range=[127, 128]), inp((64, 16), "DT_INT8", "int", range=[127, 128])],
    (16, 16), "DT_INT32", (16, 16), cube_tile=[[16, 16], [32, 32], [16, 16]])
add("matmul_int8_overflow_n32", step("matmul", "$0", "$1", "DT_INT32"),
    [inp((16, 64), "DT_INT8", "int", range=[100, 128]), inp((64, 32), "DT_INT8", "int", range=[-128, -100])],
    (16, 32), "DT_INT32", (16, 32), cube_tile=CUBE)
add("matmul_then_bias_relu_fp16", [step("matmul", "$0", "$1", "DT_FP32"), step("add", "$3", "$2"),
                                   step("relu", "$4")],
    [inp((32, 64), "DT_FP16"), inp((64, 32), "DT_FP16"), inp((1, 32))], (32, 32), "DT_FP32", (16, 32),
    cube_tile=CUBE)
add("matmul_mixed_dtypes_rejected", step("matmul", "$0", "$1", "DT_FP32"),
    [inp((32, 64), "DT_FP16"), inp((64, 32), "DT_BF16")], (32, 32), "DT_FP32", (16, 32), cube_tile=CUBE)

# ---------------------------------------------------------------- rejections pypto makes
add("add_mixed_dtypes_rejected", step("add", "$0", "$1"), [inp(SHAPE), inp(SHAPE, "DT_FP16")], SHAPE, "DT_FP32",
    TILE)
add("add_shapes_mismatch_rejected", step("add", "$0", "$1"), [inp((16, 64)), inp((16, 32))], SHAPE, "DT_FP32", TILE)

# ---------------------------------------------------------------- hand-written kernels
CASES["accumulate_column_blocks_fp32"] = {
    "kernel": "accumulate", "inputs": [inp((8, 128))], "outputs": [{"shape": [8, 1], "dtype": "DT_FP32"}],
    "block": 32}
CASES["accumulate_column_blocks_bf16"] = {
    "kernel": "accumulate", "inputs": [inp((8, 128), "DT_BF16")], "outputs": [{"shape": [8, 1], "dtype": "DT_BF16"}],
    "block": 32}
CASES["tiles_2d_symbolic_offsets_fp32"] = {
    "kernel": "tiles_2d", "inputs": [inp((24, 96)), inp((24, 96))], "outputs": [{"shape": [24, 96], "dtype": "DT_FP32"}],
    "tile": [8, 32]}
CASES["tiles_2d_dynamic_tail_fp16"] = {
    "kernel": "tiles_2d", "inputs": [inp((21, 96), "DT_FP16"), inp((21, 96), "DT_FP16")],
    "outputs": [{"shape": [21, 96], "dtype": "DT_FP16"}], "tile": [8, 32], "dynamic": True}
CASES["unroll_rows_fp32"] = {
    "kernel": "unroll", "inputs": [inp((22, 32))], "outputs": [{"shape": [22, 32], "dtype": "DT_FP32"}],
    "unroll": [4, 2, 1]}

for name, spec in CASES.items():
    spec.setdefault("seed", zlib.crc32(name.encode()) % 100003)  # stable per name

# Cases held to a bound rather than bitwise equality (see docs/fidelity.md); matmuls are
# bitwise since the interpreter sums K in pypto's steps (2026-12-04)
TRANSCENDENTAL_BOUND = {"ulp": 2}
BOUNDS: dict = {f"{op}_fp32": TRANSCENDENTAL_BOUND for op in ("sin", "cos", "log1p")}

_SIM_GAP = ("pypto-sim cannot run opcode {}: its cost model has no pipe for it (F92001), and the run fails before "
            "pypto's interpreter computes anything, so there is no reference result")

# Known differences from real pypto 0.2.0: name -> reason (docs/fidelity.md lists them).
KNOWN: dict = {
    **{f"fmod_{dt_name(d)}": _SIM_GAP.format("MOD") for d in FLOATS},
    **{f"remainder_{dt_name(d)}": _SIM_GAP.format("REM") for d in FLOATS},
    **{f"exp2_{dt_name(d)}": _SIM_GAP.format("EXP2") for d in FLOATS},
    "exp2_special_fp32": _SIM_GAP.format("EXP2"),
    **{f"prod_last_keepdim_{dt_name(d)}": _SIM_GAP.format("ROWPROD_SINGLE") for d in FLOATS},
    "prod_last_drop_fp32": _SIM_GAP.format("ROWPROD_SINGLE"),
    "prod_special_fp32": _SIM_GAP.format("ROWPROD_SINGLE"),
    "prod_first_keepdim_fp32": _SIM_GAP.format("PAIRPROD"),
    "sin_special_fp32": "pypto's sin is an fp32 range reduction + polynomial (pypto/operator.py) that returns NaN for "
                        "|x| >= ~1e30 and +-3e38; the interpreter uses torch.sin (finite); finite inputs agree within 2 ulp",
    "cos_special_fp32": "pypto's cos is an fp32 range reduction + polynomial (pypto/operator.py) that returns NaN for "
                        "|x| >= ~1e30 and +-3e38; the interpreter uses torch.cos (finite); finite inputs agree within 2 ulp",
    "log1p_special_fp32": "pypto's log1p gives NaN for +inf (the interpreter: inf, as torch and IEEE); the other "
                          "special values agree within 2 ulp",
    **{f"cast_{src}_{dt}_saturate": "pypto 0.2.0's interpreter ignores SaturationMode (calc_torch.cpp Cast takes no "
                                    "satmode) and wraps; the interpreter clamps, as pypto documents SaturationMode.ON"
       for src in ("fp32", "int32") for dt in ("int8", "int16")},
    "cast_fp32_fp32_rint": "pypto 0.2.0 leaves the output unwritten (zeros) for a same-dtype cast with CAST_RINT; the "
                           "interpreter returns the input, already integral-free of change (a pypto bug)",
}

