"""``arkgpu workload lc|be`` stop early on SIGTERM and still report (PID 1 of a container
must end on the kubelet's SIGTERM, or the pod's deletion waits out its grace period).

Here, not in tests/limiter: the command sets ``LD_PRELOAD`` to the limiter alone, as in a
pod, so it runs against the plain build only (the sanitizer rerun of tests/limiter would
need its runtime preloaded first)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from arkgpu.limiter import native
from arkgpu.limiter.containers import FakeContainer
from arkgpu.limiter.region import Limits, read_usage


@pytest.mark.parametrize(
    "argv",
    [
        ["be", "--seconds", "300", "--kernel-us", "1000"],
        ["lc", "--rates", "50:300", "--seed", "1"],
    ],
    ids=["be", "lc"],
)
def test_a_workload_stopped_by_sigterm_ends_with_its_summary(
    shared_dir: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str]
) -> None:
    """``arkgpu workload be|lc`` for 300 s, SIGTERM once it has run a while: exit 0 within
    the bound, with its JSON summary saying it stopped (without the handler: killed, -15)."""
    monkeypatch.setenv(native.NATIVE_DIR_ENV, str(shared_dir / "native"))
    box = FakeContainer.create(shared_dir / "region", shared_dir / "fakegpu", Limits((None,), 5000))
    env = box.env(preload=False)
    command = [sys.executable, "-m", "arkgpu", "workload", *argv]
    work = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)  # fmt: skip
    deadline = time.monotonic() + 120.0  # the command's start on a loaded machine
    while not read_usage(box.region).busy_ns[0]:  # its kernels run: its handler is in place
        assert work.poll() is None, work.communicate()
        assert time.monotonic() < deadline, "no kernel ran"
        time.sleep(0.2)
    work.send_signal(signal.SIGTERM)
    out, err = work.communicate(timeout=60)
    assert work.returncode == 0, err
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["stopped"] is True
    assert summary.get("iterations", summary.get("served", 0)) > 0, summary
