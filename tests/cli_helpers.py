"""Helpers shared by the command-line tests."""
from __future__ import annotations

import subprocess
import time
from typing import Callable


def assert_stops_on_signal(command: list[str], env: dict, signum: int, ready: Callable[[], bool],
                           cwd=None) -> str:
    """Start *command*, wait for its first progress line ``[1/...`` and for *ready()*
    (60 s at most), send *signum*; assert that it ends within 2 s with [INTERRUPTED],
    exit 130 and no traceback.  Returns its stdout."""
    proc = subprocess.Popen(command, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().startswith("[1/")  # a case is running
        deadline = time.monotonic() + 60
        while not ready() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert ready(), "the command never reached the point to interrupt"
        start = time.monotonic()
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=30)
        stopped_after = time.monotonic() - start
    finally:
        proc.kill()
    assert proc.returncode == 130, (out, err)
    assert out.splitlines()[-1] == "[INTERRUPTED]" and "Traceback" not in err
    assert stopped_after < 2.0
    return out
