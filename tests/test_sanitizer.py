"""The sanitizer (S-RACE-01, S-RACE-02, S-UNINIT-01): fixture twins, shipped operators, the
command lines, and the race rule against a brute-force element-by-element reference."""

import importlib
import itertools
import random
import sys
import warnings
from pathlib import Path

import pytest
import torch

import ptogym.interp as pypto
from ptogym import ops
from ptogym.backends import get_backend
from ptogym.interp import checks, sanitizer
from ptogym.verify.cases import load_cases
from ptogym.verify.runner import PASS, run_case

KERNELS = Path(__file__).parent / "sanitizer_kernels"
FIXTURES = sorted(path.stem for path in KERNELS.glob("[a-z]*.py"))
sys.path.insert(0, str(KERNELS))


def _marked_line(module, marker: str) -> int:
    lines = Path(module.__file__).read_text().splitlines()
    racy = lines.index("def racy(pypto):")
    return next(number for number, line in enumerate(lines, 1) if number > racy and f"# {marker}" in line)


@pytest.mark.parametrize("name", FIXTURES)
def test_a_racy_fixture_gives_one_finding_with_its_id_and_both_sites(name):
    module = importlib.import_module(name)
    with pytest.warns(checks.ConstraintWarning), sanitizer.sanitize("warn") as found:
        module.racy(pypto)
    assert [f.check_id for f in found] == [module.EXPECT], [f.describe() for f in found]
    finding = found[0]
    assert finding.first.location == f"{module.__file__}:{_marked_line(module, 'first')}"
    assert finding.second.location == f"{module.__file__}:{_marked_line(module, 'second')}"
    assert finding.count >= 1 and finding.occurrences >= 1 and all(isinstance(i, int) for i in finding.element)
    assert finding.second.iteration != "outside any loop"


@pytest.mark.parametrize("name", FIXTURES)
def test_a_racy_fixture_raises_its_id_in_error_mode(name):
    module = importlib.import_module(name)
    with pytest.raises(checks.ConstraintViolation) as raised, sanitizer.sanitize():
        module.racy(pypto)
    assert raised.value.check_id == module.EXPECT
    assert raised.value.location.endswith(f":{_marked_line(module, 'second')}")


@pytest.mark.parametrize("name", FIXTURES)
def test_the_race_free_twin_gives_no_finding(name):
    with warnings.catch_warnings():
        warnings.simplefilter("error", checks.ConstraintWarning)
        with sanitizer.sanitize() as found:
            importlib.import_module(name).free(pypto)
    assert found == []


def test_the_finding_names_element_iterations_and_count():
    module = importlib.import_module("inplace_shifted_rows")
    with pytest.warns(checks.ConstraintWarning), sanitizer.sanitize("warn") as found:
        module.racy(pypto)
    (finding,) = found
    # iteration i reads rows [8i + 8, 8i + 16) through x; iteration i + 1 writes rows [8i + 8, 8i + 16) through y
    assert (finding.first.tensor, finding.first.kind, finding.first.iteration) == ("x", "read", "LOOP_ROWS i=0")
    assert (finding.second.tensor, finding.second.kind, finding.second.iteration) == ("y", "write", "LOOP_ROWS i=1")
    assert finding.element == [8, 0] and finding.count == 3 * 8 * 64 and finding.occurrences == 3


def test_without_sanitize_the_same_kernels_run_as_before():
    """Off (the default), the racy write/write kernel runs and the alias one gets advice A-ALIAS-01
    (pypto accepts it and its CPU run reads the caller's values)."""
    importlib.import_module("rows_overwritten").racy(pypto)
    with pytest.warns(checks.ConstraintWarning, match=r"\[A-ALIAS-01\]"):
        importlib.import_module("inplace_shifted_rows").racy(pypto)


def test_warn_mode_is_no_plain_verdict():
    with checks.watching_leniency() as leniency, pytest.warns(checks.ConstraintWarning, match=r"\[S-RACE-01\]"):
        with sanitizer.sanitize("warn"):
            importlib.import_module("rows_overwritten").racy(pypto)
    assert leniency.lenient and leniency.downgraded == 1


def test_the_environment_variable_turns_it_on_and_is_validated(monkeypatch):
    monkeypatch.setenv("PTOGYM_SANITIZE", "1")
    with pytest.raises(checks.ConstraintViolation, match=r"\[S-RACE-01\]"):
        importlib.import_module("rows_overwritten").racy(pypto)
    with sanitizer.sanitize(False):  # sanitize(False) wins over the variable
        importlib.import_module("rows_overwritten").racy(pypto)
    monkeypatch.setenv("PTOGYM_SANITIZE", "maybe")
    with pytest.raises(ValueError, match="PTOGYM_SANITIZE"):
        sanitizer.mode_from_env()
    with pytest.raises(ValueError, match="mode"):
        with sanitizer.sanitize("loud"):
            pass


def test_workspaces_are_poisoned_so_a_missed_read_shows():
    """In warn mode the kernel carries on: the unwritten accumulator's NaN reaches the output,
    and an int32 workspace holds int32's minimum."""
    seen = {}

    @pypto.frontend.jit()
    def kernel(x: pypto.Tensor([8, 64], pypto.DT_INT32), out: pypto.Tensor([8, 64], pypto.DT_INT32)):
        pypto.set_vec_tile_shapes(8, 64)
        scratch = pypto.tensor([8, 64], pypto.DT_INT32, "scratch")
        seen["data"] = scratch.data.clone()
        out[:] = x

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with sanitizer.sanitize("warn"):
            kernel(torch.zeros(8, 64, dtype=torch.int32), torch.empty(8, 64, dtype=torch.int32))
            out = torch.empty(8, 64)

            @pypto.frontend.jit()
            def accumulate(x: pypto.Tensor([32, 64], pypto.DT_FP32), y: pypto.Tensor([8, 64], pypto.DT_FP32)):
                pypto.set_vec_tile_shapes(8, 64)
                acc = pypto.tensor([8, 64], pypto.DT_FP32, "acc")
                for i in pypto.loop(4):
                    acc[:] = acc + pypto.view(x, [8, 64], [i * 8, 0])
                y[:] = acc

            accumulate(torch.randn(32, 64), out)
    assert bool((seen["data"] == torch.iinfo(torch.int32).min).all())
    assert bool(out.isnan().all())


# --- the race rule against a brute-force reference -------------------------------------------
def _reference_conflicts(shape, writes) -> int:
    """Elements a write touches that another iteration wrote last: one Python dict entry per element."""
    last, conflicts = {}, 0
    for iteration, (r0, r1, c0, c1) in writes:
        for element in itertools.product(range(r0, r1), range(c0, c1)):
            if last.get(element, iteration) != iteration:
                conflicts += 1
            last[element] = iteration
    return conflicts


@pytest.mark.parametrize("seed", range(6))
def test_write_write_conflicts_match_an_element_by_element_reference(seed):
    """Random boxes, one per iteration, some overlapping: with a value per iteration the sanitizer's
    S-RACE-01 count (its units refined as boxes cut them) equals the reference's, no finding when
    none overlap; with one value for all, no finding (a write of the value already there)."""
    rng = random.Random(seed)
    rows, cols = 12, 24
    boxes = []
    for _ in range(6):
        r0, c0 = rng.randrange(rows), rng.randrange(cols)
        boxes.append((r0, rng.randrange(r0 + 1, rows + 1), c0, rng.randrange(c0 + 1, cols + 1)))
    shapes = [(r1 - r0, c1 - c0) for r0, r1, c0, c1 in boxes]
    fills = [0.0] * len(boxes)  # the value iteration i writes

    @pypto.frontend.jit()
    def kernel(y: pypto.Tensor([rows, cols], pypto.DT_FP32)):
        for i in pypto.loop(len(boxes), name="LOOP_BOXES", idx_name="i"):
            r0, _, c0, _ = boxes[i.value]
            pypto.set_vec_tile_shapes(*shapes[i.value])
            y[r0:r0 + shapes[i.value][0], c0:c0 + shapes[i.value][1]] = pypto.full(list(shapes[i.value]),
                                                                                 fills[i.value], pypto.DT_FP32)

    expected = _reference_conflicts((rows, cols), list(enumerate(boxes)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for distinct in (True, False):
            fills[:] = [float(k + 1) if distinct else 1.0 for k in range(len(boxes))]
            with sanitizer.sanitize("warn") as found:
                kernel(torch.empty(rows, cols))
            if distinct:
                assert sum(f.count for f in found if f.check_id == "S-RACE-01") == expected
                assert (expected == 0) == (found == [])
            else:  # every iteration writes the same value: the result does not depend on their order
                assert found == []


def _random_box(rng, rows, cols):
    """(r0, r1, c0, c1): whole rows half the time (contiguous units), else any columns (strided)."""
    r0 = rng.randrange(rows)
    r1 = rng.randrange(r0 + 1, rows + 1)
    if rng.random() < 0.5:
        return r0, r1, 0, cols
    c0 = rng.randrange(cols)
    return r0, r1, c0, rng.randrange(c0 + 1, cols + 1)


def _elements(box):
    r0, r1, c0, c1 = box
    return set(itertools.product(range(r0, r1), range(c0, c1)))


def _reference_read_write_conflicts(steps) -> int:
    """Elements written by a step that another step wrote last, that this step did not read first and
    whose last writer this step does not follow (it read, directly or through earlier steps, what that
    one wrote): one Python dict entry per element, as docs/sanitizer.md states the rules."""
    last, follows, conflicts = {}, {}, 0
    for step, (read, write) in enumerate(steps):
        writers = {last[element] for element in read if element in last}
        follows[step] = writers.union(*(follows[writer] for writer in writers))
        for element in write - read:
            if element in last and last[element] not in follows[step]:
                conflicts += 1
        for element in write:
            last[element] = step
    return conflicts


@pytest.mark.parametrize("seed", range(8))
def test_read_modify_write_conflicts_match_an_element_by_element_reference(seed):
    """Per iteration a read of one random box of a workspace and a write of another: inside the box
    read (a read-modify-write), an earlier iteration's box again (units one iteration wrote whole),
    or anywhere; the S-RACE-01 count equals the reference's (reads of unwritten elements are
    S-UNINIT-01 findings besides)."""
    rng = random.Random(seed)
    rows, cols = 10, 16
    steps = []
    for _ in range(8):
        read = _random_box(rng, rows, cols)
        choice = rng.randrange(3)
        if choice == 0:
            r0, r1, c0, c1 = read
            write = (r0, rng.randrange(r0 + 1, r1 + 1), c0, c1)
        elif choice == 1 and steps:
            write = rng.choice(steps)[1]
        else:
            write = _random_box(rng, rows, cols)
        steps.append((read, write))

    @pypto.frontend.jit()
    def kernel(y: pypto.Tensor([1, 1], pypto.DT_FP32)):
        scratch = pypto.tensor([rows, cols], pypto.DT_FP32, "scratch")
        for i in pypto.loop(len(steps), name="LOOP_STEPS", idx_name="i"):
            (a0, a1, b0, b1), (r0, r1, c0, c1) = steps[i.value]
            pypto.view(scratch, [a1 - a0, b1 - b0], [a0, b0])
            pypto.set_vec_tile_shapes(r1 - r0, c1 - c0)
            scratch[r0:r1, c0:c1] = pypto.full([r1 - r0, c1 - c0], float(i.value + 1), pypto.DT_FP32)
        pypto.set_vec_tile_shapes(1, 1)
        y[:] = pypto.full([1, 1], 0.0, pypto.DT_FP32)

    expected = _reference_read_write_conflicts([(_elements(read), _elements(write)) for read, write in steps])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with sanitizer.sanitize("warn") as found:
            kernel(torch.empty(1, 1))
    assert sum(f.count for f in found if f.check_id == "S-RACE-01") == expected
    assert {f.check_id for f in found} <= {"S-RACE-01", "S-UNINIT-01"}


def _reference_aliased_conflicts(steps, barrier: int) -> int:
    """S-RACE-02 elements, one Python dict entry per element, as docs/sanitizer.md states the rule:
    a read of an element another parameter wrote last, or a write of one another parameter read
    in another step since its last write; steps before the barrier (from step ``barrier`` on) are
    ordered before the later ones."""
    last, readers, conflicts = {}, {}, 0
    for step, (reader, read, writer, write) in enumerate(steps):
        first = barrier if step >= barrier else 0
        for element in read:
            if element in last and last[element][1] != reader and last[element][0] >= first:
                conflicts += 1
            readers.setdefault(element, set()).add((step, reader))
        for element in write:
            for slot in {slot for earlier, slot in readers.get(element, ()) if slot != writer and earlier != step
                         and earlier >= first}:
                conflicts += 1
            readers[element] = set()
            last[element] = (step, writer)
    return conflicts


@pytest.mark.parametrize("seed", range(10))
def test_aliased_read_write_conflicts_match_an_element_by_element_reference(seed):
    """Four parameters over one memory, two that read (x, w) and two that write (y, v): per iteration
    a read of a random box through one and a write of another through one, in two loops, the second
    behind a submit_before_loop barrier or not. The S-RACE-02 count equals the reference's,
    whichever parameter read an element first and whether that read lay before the barrier."""
    rng = random.Random(seed)
    rows, cols, first_loop = 10, 16, rng.randrange(2, 5)
    barrier = rng.random() < 0.5
    steps = [(rng.choice("xw"), _random_box(rng, rows, cols), rng.choice("yv"), _random_box(rng, rows, cols))
             for _ in range(8)]

    def step(params, index):
        reader, (a0, a1, b0, b1), writer, (r0, r1, c0, c1) = steps[index]
        pypto.view(params[reader], [a1 - a0, b1 - b0], [a0, b0])
        pypto.set_vec_tile_shapes(r1 - r0, c1 - c0)
        params[writer][r0:r1, c0:c1] = pypto.full([r1 - r0, c1 - c0], float(index + 1), pypto.DT_FP32)

    @pypto.frontend.jit()
    def kernel(x: pypto.Tensor([rows, cols], pypto.DT_FP32), w: pypto.Tensor([rows, cols], pypto.DT_FP32),
               y: pypto.Tensor([rows, cols], pypto.DT_FP32), v: pypto.Tensor([rows, cols], pypto.DT_FP32)):
        params = {"x": x, "w": w, "y": y, "v": v}
        for i in pypto.loop(first_loop, name="FIRST", idx_name="i"):
            step(params, i.value)
        for j in pypto.loop(len(steps) - first_loop, name="SECOND", idx_name="j", submit_before_loop=barrier):
            step(params, first_loop + j.value)

    expected = _reference_aliased_conflicts(
        [(reader, _elements(read), writer, _elements(write)) for reader, read, writer, write in steps],
        first_loop if barrier else 0)
    data = torch.zeros(rows, cols)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with sanitizer.sanitize("warn") as found:
            kernel(data, data, data, data)
    assert sum(f.count for f in found if f.check_id == "S-RACE-02") == expected
    assert {f.check_id for f in found} <= {"S-RACE-01", "S-RACE-02"}


# --- shipped operators ----------------------------------------------------------------------
_IN_PLACE_AND_STATEFUL = [("inplace_add_rms_norm", "level0"), ("inplace_add_rms_norm", "level1"),
                          ("cache_scatter", "level0"), ("cache_scatter", "level1"), ("paged_attention", "level0"),
                          ("moe_experts", "level0"), ("flash_attention", "level0")]


def _levels(slow: bool):
    for name in ops.OP_NAMES:
        spec = ops.get_op(name)
        for case in load_cases(spec.cases_path, spec):
            if not case.is_slow and ((name, case.id) in _IN_PLACE_AND_STATEFUL) != slow:
                yield pytest.param(name, case.id, id=f"{name}-{case.id}",
                                   marks=[pytest.mark.slow] if slow else [])


def _sanitized_case(name: str, level: str):
    spec = ops.get_op(name)
    case = next(c for c in load_cases(spec.cases_path, spec) if c.id == level)
    with warnings.catch_warnings():
        warnings.simplefilter("error", checks.ConstraintWarning)
        with sanitizer.sanitize() as found:
            result = run_case(spec, case, get_backend("interp"))
    return result, found


@pytest.mark.parametrize("name, level", [*_levels(slow=False), *_levels(slow=True)])
def test_a_shipped_operator_level_has_no_finding(name, level):
    """In-place row-wise read-then-write (inplace_add_rms_norm, cache_scatter) and the attention
    accumulators are race-free; every other non-slow level runs in the slow suite."""
    result, found = _sanitized_case(name, level)
    assert found == [] and result.status == PASS, (result.reason, [f.describe() for f in found])


@pytest.mark.parametrize("params", [{"kv_splits": 5}, {"kv_splits": 2, "blocks_per_step": 3}])
def test_split_kv_paged_attention_has_no_finding(params):
    """Split-KV's partial states: written by one loop, merged by the next (ordered through the
    workspaces), empty splits included (the 5-key sequence); with several blocks a step, the
    state workspaces are carried from the block-group loop into the single-block one."""
    from test_paged_attention import make

    from ptogym.ops.paged_attention import kernel
    from ptogym.tune.table import override

    args = make(3, 16, 4, 128, 128, [300, 5, 1000], seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", checks.ConstraintWarning)
        with override(kernel, params), sanitizer.sanitize() as found:
            ops.paged_attention(*args, backend="interp")
    assert found == []


def test_the_in_place_operator_is_followed_through_one_storage_per_pair(monkeypatch):
    """inplace_add_rms_norm passes x1 as y and x2 as x_add: the sanitizer sees two shared storages
    (so the zero findings above were judged, not skipped), its shadow a row per unit."""
    seen = []
    finish = sanitizer.Sanitizer.finish
    monkeypatch.setattr(sanitizer.Sanitizer, "finish", lambda run: (seen.append(run), finish(run)))
    _sanitized_case("inplace_add_rms_norm", "level1")
    shared = sorted(tuple(s.names) for s in seen[0].storages if s.aliased)
    assert len(shared) == 2 and all(len(names) == 2 for names in shared), shared
    assert all(s.unit == 7168 * 2 for s in seen[0].storages if s.aliased)


# --- command lines --------------------------------------------------------------------------
@pytest.fixture
def launched(monkeypatch):
    """ptogym interp in this process: what a launch changes process-wide is put back."""
    names = ["pypto", *pypto.PYPTO_MODULES, "_script"]
    saved = {name: sys.modules[name] for name in names if name in sys.modules}
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.setattr(sys, "path", list(sys.path))
    from ptogym.interp import launcher

    yield launcher.main
    for name in names:
        sys.modules.pop(name, None)
    sys.modules.update(saved)


def test_interp_sanitize_fails_a_racy_script_and_passes_its_twin(launched, capsys):
    script = str(KERNELS / "rows_overwritten.py")
    assert launched(["--sanitize", script]) == 1
    assert "[S-RACE-01]" in capsys.readouterr().err
    with pytest.warns(checks.ConstraintWarning, match=r"\[S-RACE-01\]"):
        assert launched(["--sanitize=warn", script]) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error", checks.ConstraintWarning)
        assert launched(["--sanitize", script, "free"]) == 0
    assert launched(["--sanitize=loud", script]) == 2
    captured = capsys.readouterr()
    assert captured.out.strip().splitlines()[-1] == "[RUN_ERROR]" and "--sanitize=loud" in captured.err


def test_run_sanitize_passes_an_operator_and_refuses_other_backends(capsys):
    from ptogym.cli import main

    assert main(["run", "rms_norm", "level0", "--sanitize"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == "[PRECISION_PASS]"
    assert main(["run", "rms_norm", "level0", "--sanitize=warn", "--backend", "pypto-sim"]) == 2
    captured = capsys.readouterr()
    assert "only the interp backend" in captured.err and captured.out.strip().splitlines()[-1] == "[RUN_ERROR]"


def test_stage_and_bisect_sanitize_judge_an_operator_and_the_log_says_so(tmp_path, capsys):
    import json

    from ptogym.cli import main

    assert main(["new", "sanitized_demo", "--modules", "2", "--dir", str(tmp_path)]) == 0
    package, logs = str(tmp_path / "sanitized_demo"), tmp_path / "logs"
    capsys.readouterr()
    assert main(["stage", package, "--sanitize", "--log-dir", str(logs)]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("[STAGE_PASS]")
    modules = json.loads((logs / "stage_log.json").read_text())["modules"]
    assert [m["sanitize"] for m in modules] == ["error", "error"]  # a plain run does not reuse them as its own
    assert main(["stage", package, "--from", "2", "--log-dir", str(logs)]) == 0
    assert "re-run despite --from 2: the previous entry was earned on another sanitize 'error' -> None" in \
        capsys.readouterr().out
    assert main(["bisect", package, "--sanitize=warn"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("[BISECT_CLEAN]")
