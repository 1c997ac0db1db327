"""The demo waits for the runtime's start line, however long a loaded machine makes it,
instead of a fixed time (issue 31: at a load of 8 the runtime took about 9 s)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from arkgpu.node.demo import STARTED_LINE, Demo, DemoConfig


def _fake_runtime(demo: Demo, script: str) -> None:
    """A stand-in for ``arkgpu node run`` writing to the runtime's log as it would."""
    demo.runtime_log = demo.work / "runtime-1.log"
    with demo.runtime_log.open("w") as sink:
        demo.runtime = subprocess.Popen([sys.executable, "-c", script], stderr=sink, text=True)


def test_waits_past_a_slow_start_until_the_start_line(tmp_path: Path) -> None:
    """A runtime that needs 3 s (more than the old fixed 2 s) is waited for."""
    demo = Demo(DemoConfig(), tmp_path)
    script = (
        "import sys, time; time.sleep(3)\n"
        f"print({STARTED_LINE!r} + '1 GPU(s)', file=sys.stderr, flush=True); time.sleep(60)"
    )
    _fake_runtime(demo, script)
    began = time.monotonic()
    try:
        assert not demo.runtime_started()
        demo.wait_for_runtime(timeout_s=120)
        assert time.monotonic() - began >= 3.0
        assert demo.runtime_started()
    finally:
        demo.stop()


def test_a_runtime_that_ends_or_stays_silent_is_an_error_with_its_log(tmp_path: Path) -> None:
    """It exits before its start line: RuntimeError with its exit status and log; it never
    prints the line: RuntimeError once the timeout has passed."""
    demo = Demo(DemoConfig(), tmp_path)
    _fake_runtime(demo, "import sys; print('no GPU here', file=sys.stderr); sys.exit(1)")
    with pytest.raises(RuntimeError, match=r"exited with 1: no GPU here"):
        demo.wait_for_runtime(timeout_s=120)
    _fake_runtime(demo, "import time; time.sleep(60)")
    try:
        with pytest.raises(RuntimeError, match=r"silent for 1 s"):
            demo.wait_for_runtime(timeout_s=1)
    finally:
        demo.stop()
