"""Plumbing shared by the two backends that run the real ``pypto`` package.

``pypto-sim`` (cost model on a CPU) and ``npu`` (an Ascend device) both need to

* import ``pypto`` lazily, after routing the places it writes to into a cache
  directory (``TILE_FWK_OUTPUT_DIR``, ``PYPTO_HOME``, ``ASCEND_PROCESS_LOG_PATH``
  and, for the simulator, ``TILEFWK_CONFIG_PATH``; pypto reads the last three
  only once, when it is imported),
* keep its console chatter - including what its C++ libraries print - out of
  the user's terminal, and
* clean up the per-call run directories.

Nothing here imports ``pypto`` at module import time.  See ``docs/pypto-sim.md``
for what was measured to arrive at these choices.
"""
from __future__ import annotations

import ast
import atexit
import configparser
import contextlib
import ctypes
import hashlib
import importlib.machinery
import inspect
import itertools
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from . import BackendUnavailable
from .base import BackendBase, LaunchReport

INSTALL_HINT = "pip install 'ptogym[pypto]'"

#: The cost model's cycle counter is converted to microseconds at 1.8 GHz: pypto's
#: own swimlane summary divides by ``--time_convert_denominator=1800`` (a constant
#: in ``libtile_fwk_simulation.so``), so we do the same.
SIM_CLOCK_MHZ = 1800

# Compiled-in latency model of the A2/A3 pipe simulator (PipeSimulatorFast with the
# A2A3 coefficient table; not in any shipped config file).  For a tile of S bytes:
#   COPY_IN  (GM -> UB/L1): 1400 + int((2.613e-6 * S * 2 + 0.00240884) * 2000) + 1 cycles
#   COPY_OUT (UB/L0C -> GM): 300 + int((3.2883e-6 * S * 2 + 0.00195) * 2000) + 1 cycles
# Checked against pypto 0.2.0 (see tests/test_backend_pypto_sim.py::test_platform_model_*).
COPY_IN_LATENCY_CYCLES = 1400
COPY_OUT_LATENCY_CYCLES = 300
COPY_IN_CYCLES_PER_BYTE = 2.613e-6 * 2 * 2000
COPY_OUT_CYCLES_PER_BYTE = 3.2883e-6 * 2 * 2000

ENV_CACHE = "PTOGYM_CACHE_DIR"
ENV_KEEP = "PTOGYM_KEEP_ARTIFACTS"
ENV_VERBOSE = "PTOGYM_VERBOSE"
ENV_FULL_BUILD = "PTOGYM_FULL_BUILD"
ENV_NO_CACHE = "PTOGYM_NO_CACHE"


# --------------------------------------------------------------------------- paths


def env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


def cache_root() -> Path:
    """``$PTOGYM_CACHE_DIR``, else ``$XDG_CACHE_HOME/ptogym``, else ``~/.cache/ptogym``."""
    if os.environ.get(ENV_CACHE):
        return Path(os.environ[ENV_CACHE]).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "ptogym"


def pypto_package_dir() -> Path | None:
    """Where the real ``pypto`` is installed, found on sys.path without importing it
    (and without trusting ``sys.modules``, where ``ptogym interp`` may alias it)."""
    spec = importlib.machinery.PathFinder.find_spec("pypto")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


# --------------------------------------------------------------------------- quiet


class Capture:
    """Redirect fd 1/2 (C++ prints included) and ``sys.stdout/err`` into a file."""

    def __init__(self, path: Path, enabled: bool = True):
        self.path = Path(path)
        self.enabled = enabled

    def __enter__(self):
        if not self.enabled:
            return self
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        self._file = open(self.path, "ab", buffering=0)
        self._saved = []
        for fd in (1, 2):
            try:
                self._saved.append((fd, os.dup(fd)))
                os.dup2(self._file.fileno(), fd)
            except OSError:
                pass
        self._text = open(self.path, "a", buffering=1, encoding="utf-8", errors="replace")
        self._redirects = contextlib.ExitStack()
        self._redirects.enter_context(contextlib.redirect_stdout(self._text))
        self._redirects.enter_context(contextlib.redirect_stderr(self._text))
        return self

    def __exit__(self, *exc):
        if not self.enabled:
            return False
        self._redirects.close()
        self._text.close()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        for fd, saved in self._saved:
            os.dup2(saved, fd)
            os.close(saved)
        self._file.close()
        return False

    def tail(self, lines: int = 40) -> str:
        try:
            text = self.path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        kept = [ln for ln in text.splitlines() if ln.strip()]
        return "\n".join(kept[-lines:])


class PyptoRunError(RuntimeError):
    """A real-pypto compile/launch failed; the message ends with pypto's log tail."""


def native_errors(log_root: Path, since: float, lines: int = 6) -> str:
    """The ``[ERROR]`` lines pypto's C++ side wrote to its own logs (the plog under
    ``ASCEND_PROCESS_LOG_PATH``) since ``since``: where a compile pass names what it
    rejected, while Python sees only "Errcode: FFFFFF! Run pass failed" (measured:
    index_select before any vec tile, "ExpandFunction failed: Tile shape size 0 ...")."""
    found = []
    paths = [path for path in log_root.rglob("*.log") if path.stat().st_mtime >= since] if log_root.is_dir() else []
    for path in sorted(paths, key=lambda path: path.stat().st_mtime):
        with contextlib.suppress(OSError):
            found += [line.strip() for line in path.read_text(errors="replace").splitlines()
                      if line.startswith("[ERROR]")]
    return "\n".join(found[-lines:])


# --------------------------------------------------------------------------- session


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class Session:
    """One per process: the directories pypto is pointed at, removed at exit."""

    root: Path
    dir: Path
    owns_env: bool
    calls: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    @property
    def out(self) -> Path:
        return self.dir / "out"

    @property
    def log(self) -> Path:
        return self.dir / "pypto.log"

    @property
    def artifacts(self) -> Path:
        return self.root / "artifacts"

    def cleanup(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


_session: Session | None = None
_pypto = None


def _remove_stale_sessions(runs: Path) -> None:
    if not runs.is_dir():
        return
    for entry in runs.iterdir():
        parts = entry.name.split("-")
        if len(parts) >= 2 and parts[0] == "run" and parts[1].isdigit():
            if int(parts[1]) != os.getpid() and not _pid_alive(int(parts[1])):
                shutil.rmtree(entry, ignore_errors=True)


def _write_sim_config(pkg: Path, target: Path) -> None:
    """pypto's tile_fwk_config.json with the swimlane PNG/dot drawing switched off.

    The cost model draws PNGs (three ``python3`` subprocesses, matplotlib if
    importable, ~4 s) whenever the run took fewer cycles than
    ``Model.drawPngThresholdCycle`` (default 500000); threshold 0 disables them.
    """
    src = pkg / "lib" / "configs" / "tile_fwk_config.json"
    cfg = json.loads(src.read_text())
    sim = cfg.setdefault("global", {}).setdefault("simulation", {})
    args = [a for a in sim.get("args", []) if not a.startswith("Model.drawPngThresholdCycle")]
    sim["args"] = args + ["Model.drawPngThresholdCycle=0"]
    sim["draw_function_graph"] = False
    target.write_text(json.dumps(cfg, indent=1))


def session() -> Session:
    """Create the per-process session directory and point pypto's env vars at it.

    Must run before ``import pypto`` to be fully effective.
    """
    global _session
    if _session is not None:
        return _session
    root = cache_root()
    runs = root / "pypto-runs"
    _remove_stale_sessions(runs)
    runs.mkdir(parents=True, exist_ok=True)
    sdir = Path(tempfile.mkdtemp(prefix=f"run-{os.getpid()}-", dir=runs))
    owns_env = "pypto" not in sys.modules
    sess = Session(root=root, dir=sdir, owns_env=owns_env)
    (sess.out).mkdir()
    os.environ["TILE_FWK_OUTPUT_DIR"] = str(sess.out)  # re-read by pypto on every run
    if owns_env:
        os.environ["PYPTO_HOME"] = str(sdir / "home")
        os.environ["ASCEND_PROCESS_LOG_PATH"] = str(sdir / "ascend-log")
        pkg = pypto_package_dir()
        if pkg is not None and not os.environ.get("TILEFWK_CONFIG_PATH"):
            cfg = sdir / "tile_fwk_config.json"
            with contextlib.suppress(OSError, ValueError):
                _write_sim_config(pkg, cfg)
                os.environ["TILEFWK_CONFIG_PATH"] = str(cfg)
    atexit.register(sess.cleanup)
    _session = sess
    return sess


def end_session() -> None:
    """Remove this process's run directory now (processes that skip atexit)."""
    if _session is not None:
        _session.cleanup()


def import_pypto(verbose: bool = False):
    """Import ``pypto`` with the session env in place; raise BackendUnavailable."""
    global _pypto
    if _pypto is not None:
        return _pypto
    if pypto_package_dir() is None:
        raise BackendUnavailable(f"the real pypto package is not installed; {INSTALL_HINT}")
    sess = session()
    if not sess.owns_env:
        warnings.warn(
            "pypto was imported before ptogym's pypto backends: PYPTO_HOME, "
            "ASCEND_PROCESS_LOG_PATH and TILEFWK_CONFIG_PATH could not be redirected, so "
            "pypto may write under $HOME and draw swimlane PNGs",
            RuntimeWarning,
            stacklevel=3,
        )
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        with Capture(sess.log, enabled=not verbose):
            import pypto  # noqa: WPS433 (lazy on purpose)
    except ImportError as exc:  # broken install, missing shared libs ...
        raise BackendUnavailable(f"pypto could not be imported ({exc}); {INSTALL_HINT}") from exc
    finally:
        # pypto runs logging.basicConfig(level=DEBUG) on import: undo it, or every library's
        # debug logging floods the console (and writes to the closed capture stream)
        root.handlers[:], root.level = handlers, level
    if not hasattr(pypto, "pypto_impl"):
        raise BackendUnavailable(
            f"'import pypto' gives {getattr(pypto, '__name__', pypto)!r} in this process (the "
            "interpreter bound as pypto?), not the real package")
    _pypto = pypto
    return pypto


# --------------------------------------------------------------------------- results


def parse_swim(path: Path) -> dict:
    """Summarise a cost-model ``_simulate.swim.json`` (one entry per core).

    Same convention as pypto's own "AICore End-to-End Time": AIC/AIV lanes only,
    (last task end - first task start) cycles / 1800 = microseconds.
    """
    lanes = json.loads(Path(path).read_text())
    first = last = None
    tasks = cores = lanes_seen = 0
    busy = {"AIC": 0, "AIV": 0}
    for lane in lanes:
        kind = str(lane.get("coreType", ""))
        if not kind.startswith(("AIC", "AIV")):
            continue
        lanes_seen += 1
        used = False
        for task in lane.get("tasks", []):
            start, end = int(task.get("execStart", 0)), int(task.get("execEnd", 0))
            if end < start:
                continue
            tasks += 1
            used = True
            busy[kind[:3]] += end - start
            first = start if first is None else min(first, start)
            last = end if last is None else max(last, end)
        cores += used
    cycles = 0 if first is None else last - first
    return {
        "cycles": cycles,
        "simulated_us": cycles / SIM_CLOCK_MHZ,
        "tasks": tasks,
        "cores": cores,
        "lanes": lanes_seen,
        "utilization": sum(busy.values()) / (lanes_seen * cycles) if cycles and lanes_seen else 0.0,
        # task time summed per core type (core-µs): where a kernel's work is, cube or vector
        "cube_busy_us": busy["AIC"] / SIM_CLOCK_MHZ,
        "vector_busy_us": busy["AIV"] / SIM_CLOCK_MHZ,
    }


def parse_total_cycles(path: Path) -> int | None:
    """The cost model's whole-kernel time from its ``_simulate.stat.report.txt``: the
    MachineModel report's first "Total Cycles", counted from the device's start (the AICPU
    scheduler's start-up before the first task included) to its end (the closing
    scheduler work after the last task included).  None when the report has no such line."""
    match = re.search(r"^Total Cycles\.*:\s*(\d+)", Path(path).read_text(errors="replace"), re.MULTILINE)
    return int(match.group(1)) if match else None


# --------------------------------------------------------------------------- interpreter


def _calculator_key(pkg: Path) -> str:
    import torch

    try:
        from importlib.metadata import version

        pypto_version = version("pypto")
    except Exception:  # pragma: no cover
        pypto_version = "?"
    parts = [pypto_version, str(pkg), torch.__version__, str(Path(torch.__file__).parent),
             str(int(torch._C._GLIBCXX_USE_CXX11_ABI)), sys.version]
    return hashlib.sha1("|".join(parts).encode()).hexdigest()[:16]


def _build_calculator(pkg: Path, dest: Path, log: Path) -> Path:
    """Build pypto's host-side op calculator (what its interpreter computes with)."""
    import torch

    cmake = shutil.which("cmake")
    if cmake is None:
        raise PyptoRunError("pypto's interpreter needs cmake and a C++17 compiler (to build its "
                            "op calculator once); install them or set max_compute_elements=0")
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="calc-", dir=dest.parent) as tmp:
        build, install = Path(tmp, "build"), Path(tmp, "install")
        defs = [
            "-DCMAKE_BUILD_TYPE=Release",
            f"-DCMAKE_INSTALL_PREFIX={install}",
            f"-DPY3_MOD_TORCH_VERSION={torch.__version__}",
            f"-DPY3_MOD_TORCH_ROOT_PATH={Path(torch.__file__).parent}",
            f"-DPY3_MOD_TORCH_C_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
        ]
        steps = [
            [cmake, "-S", str(pkg / "lib" / "calculator"), "-B", str(build), *defs],
            [cmake, "--build", str(build), "-j", str(max(1, min(8, os.cpu_count() or 1)))],
            [cmake, "--install", str(build)],
        ]
        for cmd in steps:
            proc = subprocess.run(cmd, capture_output=True, text=True)
            with open(log, "a", encoding="utf-8") as fh:
                fh.write(proc.stdout + proc.stderr)
            if proc.returncode != 0:
                tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-30:])
                raise PyptoRunError(f"building pypto's op calculator failed: {' '.join(cmd)}\n{tail}")
        built = next(install.rglob("libtile_fwk_calculator.so"))
        staged = Path(tmp, "lib")
        staged.mkdir()
        shutil.copy2(built, staged / built.name)
        with contextlib.suppress(OSError):  # another process may have won the race
            os.replace(staged, dest)
    return dest / "libtile_fwk_calculator.so"


_calculator_loaded = False


def ensure_calculator(pypto, sess: Session) -> None:
    """Load pypto's op calculator, building it once per (pypto, torch) into the cache.

    pypto itself rebuilds it with cmake in a temporary directory in every new
    process (~25 s); the cached copy makes that a one-off.
    """
    global _calculator_loaded
    if _calculator_loaded:
        return
    from pypto._utils import BuildOnlineManager

    manager = BuildOnlineManager()
    if not getattr(manager, "calculator_loaded", False):
        pkg = pypto_package_dir()
        dest = sess.root / "pypto-calculator" / _calculator_key(pkg)
        lib = dest / "libtile_fwk_calculator.so"
        if not lib.exists():
            lib = _build_calculator(pkg, dest, sess.log)
        ctypes.CDLL(str(lib), mode=ctypes.RTLD_GLOBAL)
        manager.calculator_loaded = True
    _calculator_loaded = True


def _register_caller_buffers(pypto):
    """Replacement for pypto's verify-data staging: hand its interpreter the caller's
    own CPU buffers (pypto copies them through a host copy that is a no-op without
    CANN, so its interpreter would otherwise run on zeros and write nothing back)."""
    impl = pypto.pypto_impl

    def setup(pto_tensors):
        if not pypto.get_verify_options().get("enable_pass_verify"):
            return
        datas = [impl.DeviceTensorData(t.dtype, t.data_ptr, list(t.ori_shape)) for t in pto_tensors]
        impl.SetVerifyData(datas, [], [])

    return staticmethod(setup)


@contextlib.contextmanager
def pypto_interpreter(pypto, enabled: bool) -> Iterator[None]:
    """Run pypto's graph-level interpreter on the caller's buffers during a SIM call.

    ``pass_verify_pass_filter=[]`` becomes ``["no_verify"]`` inside pypto: no real
    pass is verified, only the tensor-graph interpretation runs.
    """
    from pypto.frontend.parser import entry

    wrapper_cls = entry.JitCallableWrapper
    original = wrapper_cls.__dict__.get("_setup_verify_data")
    previous = pypto.get_verify_options()
    wrapper_cls._setup_verify_data = _register_caller_buffers(pypto)
    try:
        if enabled:
            pypto.set_verify_options(enable_pass_verify=True, pass_verify_pass_filter=[],
                                     pass_verify_save_tensor=False)
        else:
            pypto.set_verify_options(enable_pass_verify=False)
        yield
    finally:
        if original is not None:
            wrapper_cls._setup_verify_data = original
        pypto.set_verify_options(
            enable_pass_verify=bool(previous.get("enable_pass_verify", False)),
            pass_verify_pass_filter=list(previous.get("pass_verify_pass_filter") or []) or None,
        )


def recover(pypto) -> None:
    """Leave pypto usable after a failed compile (it otherwise reports
    'function nested is not allowed' on every later kernel)."""
    with contextlib.suppress(Exception):
        pypto._controller.Controller.end_function()
    with contextlib.suppress(Exception):
        pypto.pypto_impl.Reset()


def force_run_mode(kernel, mode: int) -> None:
    """The backend, not the kernel source, decides where a kernel runs."""
    options = getattr(kernel, "_runtime_options", None)
    if isinstance(options, dict):
        options["run_mode"] = int(mode)


# --------------------------------------------------------------------------- reduced builds

_SHAPE_DIM = re.compile(r"RUNTIME_GetInputShapeDim\(ARG_(\w+),(\d+)\)")
_INTEGER_ARITHMETIC = re.compile(r"[0-9+\-*/%() ]*")


def _evaluate(node: ast.AST) -> int:
    """An integer expression of non-negative operands, as pypto's symbolic scalars print
    them (``/`` is integer division); ValueError for anything else."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_evaluate(node.operand)
    if isinstance(node, ast.BinOp):
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Add):
            return left + right
        if isinstance(node.op, ast.Sub):
            return left - right
        if isinstance(node.op, ast.Mult):
            return left * right
        if isinstance(node.op, (ast.Div, ast.Mod)) and left >= 0 and right > 0:  # C++ and Python agree here
            return left // right if isinstance(node.op, ast.Div) else left % right
    raise ValueError(f"not an expression of non-negative integers: {ast.dump(node)[:80]}")


def concrete_int(value, shapes: dict[str, tuple]) -> int | None:
    """``value`` (an int or a pypto ``SymbolicScalar``) evaluated on the call's input
    shapes (``shapes``: kernel parameter name -> shape); None when it depends on anything
    else (a loop index, a scalar argument) or is not plain integer arithmetic."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value

    def dim(match):
        shape = shapes.get(match.group(1))
        if shape is None or int(match.group(2)) >= len(shape):
            raise KeyError(match.group(0))
        return str(int(shape[int(match.group(2))]))

    try:
        text = _SHAPE_DIM.sub(dim, str(value))
        if not _INTEGER_ARITHMETIC.fullmatch(text):
            return None
        return _evaluate(ast.parse(text, mode="eval").body)
    except (KeyError, SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _loop_range(args: tuple) -> tuple:
    """(start, stop, step) of ``pypto.loop``'s positional arguments."""
    return {1: lambda: (0, args[0], 1), 2: lambda: (*args, 1), 3: lambda: args}.get(len(args), lambda: (0, 0, 0))()


@contextlib.contextmanager
def call_loops_only(pypto, kernel, tensors: list) -> Iterator[list]:
    """Compile only the loops the call runs: while a call of ``kernel`` on ``tensors``
    parses, a ``pypto.loop`` (``loop_unroll``'s branches are such loops) whose trip count,
    evaluated on the call's shapes, is zero is not emitted.  Its body would run no
    iteration, so the simulated tasks are the same (tests/test_backend_pypto_sim.py checks
    µs, tasks and outputs against full builds) while the compile skips, e.g., the
    ``loop_unroll`` branches for block sizes the call's token count never reaches.  Yields
    the names of the loops left out; a loop whose bounds cannot be evaluated is kept."""
    function = getattr(kernel, "_original_func", None)
    if function is None:  # not a jit wrapper: nothing known about its parameters
        yield []
        return
    controller = pypto._controller
    original = controller.loop
    names = list(inspect.signature(function).parameters)
    shapes = {name: tuple(tensor.shape) for name, tensor in zip(names, tensors)}
    skipped: list[str] = []

    def loop(*args, **kwargs):
        start, stop, step = (concrete_int(bound, shapes) for bound in _loop_range(args))
        if None not in (start, stop, step) and step > 0 and start >= stop:
            skipped.append(str(kwargs.get("name", "loop")))
            return
        yield from original(*args, **kwargs)

    controller.loop = pypto.loop = loop
    try:
        yield skipped
    finally:
        controller.loop = pypto.loop = original


@contextlib.contextmanager
def reported_phases(kernel, report_phase) -> Iterator[None]:
    """Tell ``report_phase`` when a call of ``kernel`` moves from compiling to running."""
    if not all(hasattr(kernel, name) for name in ("compile", "_run_with_cpu")):
        yield
        return

    def announcing(phase: str, method):
        def run(*args, **kwargs):
            report_phase(phase)
            return method(*args, **kwargs)
        return run

    kernel.compile = announcing(f"compiling {getattr(kernel, '__name__', 'kernel')} (pypto passes)", kernel.compile)
    kernel._run_with_cpu = announcing("simulating (cost model)", kernel._run_with_cpu)
    try:
        yield
    finally:
        del kernel.compile, kernel._run_with_cpu


# --------------------------------------------------------------------------- platform


def _a2a3_ini(pkg: Path) -> configparser.ConfigParser:
    ini = configparser.ConfigParser(strict=False, interpolation=None)
    ini.read(pkg / "lib" / "configs" / "A2A3.ini")
    return ini


def platform_model() -> dict:
    """The Ascend 910B (A2/A3, DAV_2201) machine that pypto's cost model simulates.

    Core counts, UB size and the platform's nominal DDR rate come from pypto's shipped
    ``lib/configs/A2A3.ini``; the cost model itself has no single GM/HBM bandwidth
    figure - every COPY_IN/COPY_OUT tile op costs a fixed latency plus a per-byte
    term on the issuing core's MTE pipe, with no contention between cores.  The
    ceiling returned as ``hbm_gbps`` is therefore

        vector_cores x (1 / COPY_IN cycles-per-byte) x 1.8 GHz

    i.e. every vector core streaming GM reads back to back (a core runs its pipes one
    task at a time, and COPY_IN is its fastest GM path, so no kernel's total GM
    traffic on the vector cores can exceed it).  See docs/pypto-sim.md.
    """
    pkg = pypto_package_dir()
    if pkg is None:
        raise BackendUnavailable(f"the real pypto package is not installed; {INSTALL_HINT}")
    ini = _a2a3_ini(pkg)
    soc, spec, rates = ini["SoCInfo"], ini["AICoreSpec"], ini["AICoreMemoryRates"]
    sim_cfg = json.loads((pkg / "lib" / "configs" / "tile_fwk_config.json").read_text())
    clock_ghz = SIM_CLOCK_MHZ / 1000.0
    vec, cube = int(soc["vector_core_cnt"]), int(soc["cube_core_cnt"])
    read_bpc = 1.0 / COPY_IN_CYCLES_PER_BYTE
    write_bpc = 1.0 / COPY_OUT_CYCLES_PER_BYTE
    return {
        "source": str(pkg / "lib" / "configs" / "A2A3.ini"),
        "soc_version": ini["version"]["SoC_version"],
        "npu_arch": ini["version"].get("NpuArch"),
        "device_platform": sim_cfg["global"]["platform"].get("device_platform"),
        "ai_cores": int(soc["ai_core_cnt"]),
        "cube_cores": cube,
        "vector_cores": vec,
        "aicpus": int(soc["ai_cpu_cnt"]),
        "ub_bytes": int(spec["ub_size"]),
        "l1_bytes": int(spec["l1_size"]),
        "l2_bytes": int(soc["l2_size"]),
        "clock_ghz": clock_ghz,
        "cube_freq_mhz": int(spec["cube_freq"]),
        "ddr_rate_bytes_per_cycle": float(rates["ddr_rate"]),
        "platform_ddr_gbps": float(rates["ddr_rate"]) * int(soc["ai_core_cnt"]) * clock_ghz,
        "copy_in_latency_cycles": COPY_IN_LATENCY_CYCLES,
        "copy_out_latency_cycles": COPY_OUT_LATENCY_CYCLES,
        "copy_in_bytes_per_cycle": read_bpc,
        "copy_out_bytes_per_cycle": write_bpc,
        "hbm_read_gbps": vec * read_bpc * clock_ghz,
        "hbm_write_gbps": vec * write_bpc * clock_ghz,
        "hbm_gbps": vec * read_bpc * clock_ghz,
    }


def copy_tile_cycles(tile_bytes: int, direction: str = "in") -> int:
    """Cycles the cost model charges one GM<->UB copy of ``tile_bytes`` (one tile)."""
    if direction == "in":
        return COPY_IN_LATENCY_CYCLES + int((2.613 * tile_bytes * 2 * 1e-6 + 0.00240884) * 2000) + 1
    return COPY_OUT_LATENCY_CYCLES + int((3.2883 * tile_bytes * 2 * 1e-6 + 0.00195) * 2000) + 1


# --------------------------------------------------------------------------- backend base


@dataclass(frozen=True)
class _InWorker:
    """What ``compile`` returns for an isolated backend: built and run in the worker."""

    builder: Any
    static: dict


class RealPyptoBackend(BackendBase):
    """Builds kernels against the real ``pypto`` and runs one call at a time.

    ``isolated`` backends run every launch in a child process (``_pypto_worker``) so
    that an interrupt stops a compile at once; this process never imports pypto.
    """

    name = "real-pypto"
    run_mode = 1  # pypto.RunMode.SIM
    isolated = False
    reduces_builds = False  # whether a call compiles only the loops it runs (unless full_build)
    caches_results = False  # whether cost-only launches are answered from the simulation cache

    def __init__(self):
        super().__init__()
        self.keep_artifacts = env_flag(ENV_KEEP)
        self.verbose = env_flag(ENV_VERBOSE)
        self.full_build = env_flag(ENV_FULL_BUILD)
        self.no_cache = env_flag(ENV_NO_CACHE)
        self._pending: dict[str, Any] = {}

    def report_phase(self, phase: str) -> None:
        """Where a launch is (the worker forwards it to the waiting parent's progress line)."""

    @property
    def build_kind(self) -> str:
        """"reduced" (only the loops a call runs) or "full" (every branch: a device binary)."""
        return "reduced" if self.reduces_builds and not self.full_build else "full"

    @property
    def pypto(self):
        self.check_available()
        return import_pypto(self.verbose)

    def check_available(self) -> None:
        if pypto_package_dir() is None:
            raise BackendUnavailable(
                f"backend {self.name!r} needs the real pypto package, which is not installed; "
                f"{INSTALL_HINT}")

    def compile(self, builder, **static):
        from ._pypto_worker import can_run

        if self.isolated and can_run(builder):  # (a builder in a script's __main__ runs here)
            self.check_available()
            return _InWorker(builder, static)
        return super().compile(builder, **static)

    def _cache_entry(self, kernel: _InWorker, tensors, scalars, computes: bool):
        """The cache entry of a cost-only launch (None when it computes numbers, keeps
        artifacts, or the cache is off): the cost model reads no values, only shapes."""
        if computes or self.no_cache or self.keep_artifacts or not self.caches_results:
            return None
        from ._sim_cache import Entry

        return Entry(cache_root() / "sim-results", self.name, self.build_kind, kernel.builder, kernel.static,
                     tensors, scalars)

    # hooks -----------------------------------------------------------------
    def _computes_outputs(self, tensors) -> bool:
        """Whether a launch on *tensors* computes their values (else only shapes matter)."""
        return True

    def _prepare(self, pypto, kernel, tensors) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()

    def _finish(self, pypto, run_dir: Path, report: dict) -> None:
        pass

    # the call ---------------------------------------------------------------
    def _call(self, kernel, tensors, scalars):
        if isinstance(kernel, _InWorker):
            from ._pypto_worker import launch_in_worker

            computes = self._computes_outputs(tensors)
            entry = self._cache_entry(kernel, tensors, scalars, computes)
            fields = entry.load() if entry else None
            if fields is not None:
                fields["extra"]["cache"] = "hit"
            else:
                fields = launch_in_worker(self, kernel.builder, kernel.static, tensors, scalars, computes)
                if entry:
                    entry.store({**fields, "extra": {k: v for k, v in fields["extra"].items()
                                                     if k != "worker_peak_rss_bytes"}})
                fields["extra"]["cache"] = "miss" if entry else "off"
            self._pending = {**fields["extra"], **{key: fields[key] for key in (
                "outputs_valid", "simulated_us", "tasks", "cores", "artifacts")}}
            return
        pypto = self.pypto
        sess = session()
        call_dir = sess.out / f"call-{next(sess.calls):05d}"
        call_dir.mkdir(parents=True, exist_ok=True)
        os.environ["TILE_FWK_OUTPUT_DIR"] = str(call_dir)
        log = call_dir.parent / f"{call_dir.name}.log"
        force_run_mode(kernel, self.run_mode)
        report: dict[str, Any] = {}
        capture = Capture(log, enabled=not self.verbose)
        start, logs_since = time.perf_counter(), time.time()
        build = self.build_kind
        while True:
            try:
                with self._prepare(pypto, kernel, tensors) as extra:
                    report.update(extra or {})
                    with capture, reported_phases(kernel, self.report_phase), contextlib.ExitStack() as stack:
                        skipped = (stack.enter_context(call_loops_only(pypto, kernel, tensors))
                                   if build == "reduced" else [])
                        kernel(*tensors, **scalars)
                break
            except Exception as exc:
                recover(pypto)
                if build == "reduced" and not report.get("outputs_valid"):  # nothing written: build it all
                    report["reduced_build_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
                    build = "full"
                    continue
                tail = capture.tail() if not self.verbose else "(verbose: see the console)"
                native = native_errors(sess.dir / "ascend-log", logs_since)
                if native:
                    tail += f"\n--- pypto's native log ([ERROR] lines) ---\n{native}"
                shutil.rmtree(call_dir, ignore_errors=True)
                with contextlib.suppress(OSError):
                    log.unlink()
                hint = " (a reduced build: --full-build compiles every loop)" if build == "reduced" else ""
                raise PyptoRunError(
                    f"{self.name}: kernel {getattr(kernel, '__name__', kernel)!r} failed{hint}: "
                    f"{type(exc).__name__}: {exc}\n--- pypto log (tail) ---\n{tail}") from exc
        report["call_s"] = time.perf_counter() - start
        report["build"], report["loops_skipped"] = build, len(skipped)
        try:
            self._finish(pypto, call_dir, report)
            if self.keep_artifacts:
                report["artifacts"] = str(self._keep(sess, call_dir, log, kernel))
        finally:
            shutil.rmtree(call_dir, ignore_errors=True)
            with contextlib.suppress(OSError):
                log.unlink()
        self._pending = report

    def _keep(self, sess: Session, call_dir: Path, log: Path, kernel) -> Path:
        name = getattr(kernel, "__name__", "kernel")
        stamp = time.strftime("%Y%m%d-%H%M%S")
        dest = sess.artifacts / f"{name}-{stamp}-{os.getpid()}-{call_dir.name.split('-')[-1]}"
        dest.mkdir(parents=True, exist_ok=True)
        wanted = ("_simulate.pefetto.trace.json", "_simulate.swim.json", "merged_swimlane.json",
                  "_simulate.stat.report.txt", "_simulate.pipe.swim.json")
        for path in call_dir.rglob("*"):
            if path.name in wanted and path.is_file():
                shutil.copy2(path, dest / path.name)
        if log.exists():
            shutil.copy2(log, dest / "pypto.log")
        return dest

    def _report(self, wall_s: float) -> LaunchReport:
        info, self._pending = self._pending, {}
        return LaunchReport(
            backend=self.name,
            wall_s=wall_s,
            outputs_valid=info.pop("outputs_valid", True),
            simulated_us=info.pop("simulated_us", None),
            tasks=info.pop("tasks", None),
            cores=info.pop("cores", None),
            artifacts=info.pop("artifacts", None),
            extra=info,
        )
