"""InplaceAddRmsNorm as a PyPTO kernel.

Maths, per row r of the [rows, H] input (all in fp32, results in the input dtype):

    x_add[r] = x1[r] + x2[r]
    rstd[r]  = 1 / sqrt(sum(x_add[r]^2) * (1/H) + eps)
    y[r]     = x_add[r] * gamma * rstd[r]

Each block of rows reads its x1/x2 rows, computes, and assembles y, x_add and rstd;
because a block is fully read before its results are written, the caller may pass x1
and x2 themselves as the y and x_add outputs: the operator is in place without
scratch buffers or a copy back.

Schedule (default, ``schedule="waves"``).  The B*S rows are one dynamic axis, but
every task the compiler makes has a static size, and pypto's cost model (A2/A3: 48
vector cores) charges a task for its static tile count whatever its valid_shape.
What it costs, measured for H=7168 bf16 (cycles @1.8 GHz):

* a task of r rows runs ~3300 + 2711*r cycles (r >= 6; 2 rows: 6600, 4: 11600).
  It is bound by the MTE_IN pipe: every GM->UB copy pays ~1400 cycles of latency
  (x1 and x2 are one copy each per (2, H) tile), and with more than two tiles in a
  task the compiler's scheduler runs ahead and spills fp32 x_add tiles to GM;
* a core waits ~3.6k cycles between two tasks;
* the runtime hands the cost model the loop iterations (root function calls) in
  device tasks of 128 calls each ("stitch" batches; the jit/config option
  ``stitch_function_num_initial`` does not change this in SIM mode), and a batch
  starts only when the previous one has drained (loops inside one batch overlap).
  128 calls are 2.67 waves of 48, so a batch of equal tasks leaves 16 cores idle
  for its last third.

So the kernel makes few, large, equal tasks in whole waves of 48, and as few
calls as it can (<= 128 where possible, one batch).  It walks a ladder of static
task sizes ``WAVE_LADDER`` (341, 170, 85, 42, 21, then 16 ... 1 rows), largest
first; for each size s a loop runs ``48 * floor(left / (48 * s))`` tasks of s rows
(zero when fewer rows are left), and the last size 1 takes what remains (< 96
rows).  The halving top of the ladder is one wave per power-of-two row count:
2 waves of 341 rows + 32 single rows are 32768 rows in 128 calls, 170 covers 8192,
42 covers 2048 and 21 covers 1024 in one wave each.  Every loop body is one task:
``sg_set_scope`` keeps a body in one subgraph and gamma is cast inside it, so there
is no separate gamma task (upstream's hoisted gamma cast is a task that starts the
clock ~6000 cycles before the first row task can start).  ``combine_axis``
broadcasts rstd/gamma inside the multiply instead of materialising (2, H) copies.
``schedule="unroll"`` is upstream's ``loop_unroll`` with nbuffer-merged (2, H)
tiles (see ``VARIANTS``).

Measured with pypto 0.2.0's cost model, H=7168 bf16, µs (upstream -> default):
128 rows 32.9 -> 11.2 (2.9x), 144 rows 33.3 -> 6.76 (4.9x), 1024: 65.3 -> 41.6
(1.57x), 2048: 99.0 -> 72.0 (1.37x), 8192: 395.6 -> 263.9 (1.50x), 32768: 1443 ->
1043 (1.38x).  The previous ladder (48, 40, 32, 24, 16, 12, 8, 6, 4, 3, 2, 1) gave
47.9 / 76.1 / 316.5 / 1238 for 1024 / 2048 / 8192 / 32768 rows: its 272 and 800
calls at 8192 and 32768 rows split into 3 and 7 batches with idle cores in each.
The price is compile time: a 341-row task is 171 tiles, and a pypto-sim launch
takes ~35-75 s and up to ~8 GB (32768 rows; H=16384 ~110 s) instead of ~15 s.
Shapes above 32768 rows run several 128-call batches again: 65536 rows (4 waves
of 341, 192 calls) take 2594 µs, upstream 2841, the previous ladder 2480.

The operator reads these build parameters from its tuned table (``tuned.json``, per
token band; ``TUNING`` below is what ``ptogym tune`` may change).  Its default is the
wave schedule above; for 17-128 rows the table holds ``ptogym tune``'s winner (issue
25): ``loop_unroll`` blocks of (4, 2, 1) rows, one task each - 128 rows are 32 tasks of
4 rows, one wave with cores to spare, 7.20 µs against the waves' 11.21 (kernel 10.79
against 13.28).

Vector tile rule (``vec_tile_rows``): the tile is (rows, H); rows is the largest
count such that (a) one fp32 tile fits pypto.sum's 64 KB reduction buffer and
(b) the widest op - an fp32 binary op, three fp32 tiles - fits the 192 KB UB of
DAV_2201, capped at 64 rows and at the largest task size.  H=7168 gives 2 rows,
H=256 gives 64.
H itself must keep a row 32-byte aligned and one fp32 row within 64 KB (H <= 16384).
The ladder is in rows and does not depend on H or the dtype.

This module never imports torch: ``build`` receives the ``pypto`` namespace (the
real package or ``ptogym.interp``) so one source serves every backend.
"""

from ptogym.tune.space import Param, Tuning, token_band

SUM_BUFFER_BYTES = 64 * 1024
UB_BYTES = 192 * 1024
FP32_BYTES = 4
WIDEST_OP_TILES = 3  # an fp32 binary op holds two operands and its result in UB
VECTOR_CORES = 48  # DAV_2201 (Ascend 910B): AIV cores one wave of tasks fills
WAVE_LADDER = (341, 170, 85, 42, 21, 16, 12, 8, 6, 4, 3, 2, 1)  # static task sizes, rows
UNROLL_FACTORS = (64, 16, 4, 2, 1)  # upstream's loop_unroll factors
MAX_HIDDEN = SUM_BUFFER_BYTES // FP32_BYTES

#: Build kwargs of other configurations, simulated side by side by the benchmarks.
VARIANTS = {
    # upstream: loop_unroll [64, 16, 4, 2, 1], (2, H) tiles merged 8 to a task, gamma
    # cast once before the loop, y = (x_add * rstd) * gamma, broadcasts expanded.
    "upstream": {"schedule": "unroll", "unroll": UNROLL_FACTORS, "hoist_gamma": True,
                 "one_task_per_block": False, "combine_axis": False, "gamma_first": False},
}


def _ladders(shape) -> tuple:
    """Wave ladders: the hand-tuned one, the previous one, and halving ladders from
    smaller tops (fewer, smaller static tasks: quicker compiles)."""
    tail = (16, 12, 8, 6, 4, 3, 2, 1)
    tops = [(341, 170, 85, 42, 21), (170, 85, 42, 21), (85, 42, 21), (42, 21), (21,), ()]
    return (WAVE_LADDER, (48, 40, 32, 24, 16, 12, 8, 6, 4, 3, 2, 1), *(top + tail for top in tops[1:]),
            (8, 4, 2, 1), (4, 2, 1), (2, 1))


def _tile_rows(shape) -> tuple:
    """None (``vec_tile_rows``' choice) or any smaller power of two."""
    widest = vec_tile_rows(shape["hidden"])
    return (None, *(rows for rows in (1, 2, 4, 8, 16, 32, 64) if rows < widest))


def _tile_within_tasks(params, shape):
    """A vector tile taller than the largest task would hold rows no task has."""
    sizes = params["ladder"] if params["schedule"] == "waves" else params["unroll"]
    if params["tile_rows"] and params["tile_rows"] > max(sizes):
        return f"tile_rows={params['tile_rows']} > the largest task size {max(sizes)}"
    return None


#: what ``ptogym tune`` may change (``ptogym.tune.space``); the values the operator runs
#: are in ``tuned.json`` beside this file, per token band and row-width class (``row_bands``)
TUNING = Tuning(
    params={
        "schedule": Param(("waves", "unroll")),
        "ladder": Param(_ladders, when={"schedule": "waves"}),
        "cores": Param((48, 24, 96), when={"schedule": "waves"}),
        "unroll": Param((UNROLL_FACTORS, (16, 4, 2, 1), (8, 4, 2, 1), (4, 2, 1), (2, 1)), when={"schedule": "unroll"}),
        "tile_rows": Param(_tile_rows),
        "hoist_gamma": Param((False, True)),
        "one_task_per_block": Param((True, False)),
        "combine_axis": Param((True, False)),
        "gamma_first": Param((True, False)),
    },
    band=lambda rows, hidden, dtype: row_bands(rows, hidden),
    constraints=(_tile_within_tasks,),
    plain=VARIANTS["upstream"],
)


def vec_tile_rows(hidden: int, max_rows: int = 64) -> int:
    """Rows per vector tile for a row length of ``hidden`` (see module docstring)."""
    row_bytes = hidden * FP32_BYTES
    rows = min(SUM_BUFFER_BYTES // row_bytes, UB_BYTES // (WIDEST_OP_TILES * row_bytes), max_rows)
    if rows < 1:
        raise ValueError(f"hidden={hidden}: one fp32 row needs {row_bytes} B > {SUM_BUFFER_BYTES} B sum buffer")
    return rows


def row_bands(rows: int, width: int) -> tuple:
    """A row kernel's tuned-table bands: its token band, then that band narrowed to the
    row widths whose vector tile holds the same number of rows (they share
    ``tile_rows_below``, so a winner measured at one of them builds at all)."""
    tokens = token_band(rows)
    return tokens, f"{tokens}/tile_rows<={vec_tile_rows(width)}"


def build(pypto, *, hidden: int, dtype: str, schedule: str = "waves", ladder=WAVE_LADDER,
          unroll=UNROLL_FACTORS, cores: int = VECTOR_CORES, tile_rows=None, hoist_gamma: bool = False,
          one_task_per_block: bool = True, combine_axis: bool = True, gamma_first: bool = True):
    """The jit kernel for rows of ``hidden`` elements of ``dtype`` ("DT_BF16", ...).

    Call: kernel(x1, x2, gamma, y_out, x_add_out, rstd_out, eps) with x1, x2, y_out,
    x_add_out: [rows, hidden]; gamma: [1, hidden]; rstd_out: [rows, 1].

    schedule="waves" walks ``ladder`` in whole waves of ``cores`` tasks; "unroll" is
    ``loop_unroll(unroll_list=unroll)``.  hoist_gamma casts gamma once before the
    loops (a task of its own); one_task_per_block makes each loop body one task
    (sg_set_scope) instead of nbuffer-merging its tiles 8 at a time; combine_axis
    broadcasts inline; gamma_first computes (x_add * gamma) * rstd.
    """
    if schedule not in ("waves", "unroll"):
        raise ValueError(f"schedule: {schedule!r} is not 'waves' or 'unroll'")
    dt = getattr(pypto, dtype)
    waves = schedule == "waves"
    sizes = sorted(set(ladder if waves else unroll) | {1}, reverse=True)
    rows_per_tile = tile_rows or vec_tile_rows(hidden, sizes[0])
    unroll_list = list(sizes)
    inv_hidden = 1.0 / hidden
    scope = 1 if one_task_per_block else -1

    def rows_block(x1, x2, gamma, gamma_hoisted, y_out, x_add_out, rstd_out, eps, row, size):
        """Normalise rows [row, row + size) (a static size) and write the three outputs."""
        if hoist_gamma:
            gamma_fp32 = gamma_hoisted
        else:
            gamma_fp32 = pypto.cast(gamma, pypto.DT_FP32)
        x1_fp32 = pypto.cast(pypto.view(x1, [size, hidden], [row, 0]), pypto.DT_FP32)
        x2_fp32 = pypto.cast(pypto.view(x2, [size, hidden], [row, 0]), pypto.DT_FP32)
        x_add = pypto.add(x1_fp32, x2_fp32)
        square_sum = pypto.sum(pypto.mul(x_add, x_add), -1, keepdim=True)
        rstd = pypto.rsqrt(pypto.add(pypto.mul(square_sum, inv_hidden), eps))
        if gamma_first:
            y = pypto.mul(pypto.mul(x_add, gamma_fp32), rstd)
        else:
            y = pypto.mul(pypto.mul(x_add, rstd), gamma_fp32)
        pypto.assemble(pypto.cast(y, dt), [row, 0], y_out)
        pypto.assemble(pypto.cast(x_add, dt), [row, 0], x_add_out)
        pypto.assemble(pypto.cast(rstd, dt), [row, 0], rstd_out)

    @pypto.frontend.jit(pass_options={"vec_nbuffer_setting": {-2: 1, -1: 8}})
    def inplace_add_rms_norm_kernel(
        x1: pypto.Tensor([pypto.DYNAMIC, hidden], dt),
        x2: pypto.Tensor([pypto.DYNAMIC, hidden], dt),
        gamma: pypto.Tensor([1, hidden], dt),
        y_out: pypto.Tensor([pypto.DYNAMIC, hidden], dt),
        x_add_out: pypto.Tensor([pypto.DYNAMIC, hidden], dt),
        rstd_out: pypto.Tensor([pypto.DYNAMIC, 1], dt),
        eps: float,
    ):
        if combine_axis:
            pypto.experimental.set_operation_options(combine_axis=True)
        gamma_hoisted = gamma
        if hoist_gamma:
            pypto.set_vec_tile_shapes(1, hidden)
            gamma_hoisted = pypto.cast(gamma, pypto.DT_FP32)
        pypto.set_vec_tile_shapes(rows_per_tile, hidden)
        n_rows = x1.shape[0]

        if waves:
            start = n_rows * 0  # first row of the current size's loop: a runtime value from the start
            for size in sizes:  # ptogym: noqa OL57 a build-time tuple: pypto's parser unrolls for over a list/tuple
                if size == 1:
                    count = n_rows - start
                else:
                    count = (n_rows - start) // (cores * size) * cores
                for i in pypto.loop(0, count, 1, name=f"LOOP_ROWS_{size}", idx_name=f"block_{size}"):
                    pypto.set_pass_options(sg_set_scope=scope)
                    rows_block(x1, x2, gamma, gamma_hoisted, y_out, x_add_out, rstd_out, eps, start + i * size, size)
                start = start + count * size
        else:
            for row, factor in pypto.loop_unroll(0, n_rows, 1, name="LOOP_ROWS", idx_name="row",
                                                 unroll_list=unroll_list):
                pypto.set_pass_options(sg_set_scope=scope)
                rows_block(x1, x2, gamma, gamma_hoisted, y_out, x_add_out, rstd_out, eps, row, factor)

    return inplace_add_rms_norm_kernel
