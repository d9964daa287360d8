"""Helpers shared by the command-line tests."""
from __future__ import annotations

import signal
import subprocess
import time
from typing import Callable


def assert_stops_on_signal(command: list[str], env: dict, signum: int, ready: Callable[[], bool],
                           cwd=None) -> str:
    """Start *command*, wait for its first progress line ``[1/...`` and for *ready()*
    (60 s at most), send *signum*; assert that it ends within 2 s with [INTERRUPTED],
    exit 130 and no traceback.  Returns its stdout."""
    # a background shell starts jobs with SIGINT ignored, and Python then keeps ignoring
    # it: give the command the default disposition a terminal would
    proc = subprocess.Popen(command, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
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
