"""``arkgpu-cubench load`` stops early on SIGTERM and still reports (PID 1 of a container
must end on the kubelet's SIGTERM, or the pod's deletion waits out its grace period;
``arkgpu workload lc|be``: tests/node/test_workload_stop.py)."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Callable

import pytest

from arkgpu.limiter.benchmarking import start_load
from arkgpu.limiter.containers import FakeContainer
from arkgpu.limiter.region import Limits, read_usage


def _wait_running(box: FakeContainer, proc: subprocess.Popen[str]) -> None:
    """Until the process's kernels run on the fake GPU (its handler is in place by then)."""
    deadline = time.monotonic() + 120.0  # a start on a loaded machine
    while not read_usage(box.region).busy_ns[0]:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no kernel ran"
        time.sleep(0.2)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_load_stopped_by_a_signal_ends_at_once_with_its_report(
    make_container: Callable[[Limits], FakeContainer], sig: signal.Signals
) -> None:
    """A 300 s load signalled after it has run a while: exit 0 within the bound, with the
    JSON report of what it ran and ``stopped`` 1 (without the handler the signal kills it)."""
    box = make_container(Limits((None,), 5000))
    load = start_load(box, 300, 1000)
    _wait_running(box, load)
    load.send_signal(sig)
    out, err = load.communicate(timeout=60)
    assert load.returncode == 0, err
    report = json.loads(out)
    assert report["stopped"] == 1
    assert report["error"] == 0
    assert report["t_ns"], "no launch before the signal"
    assert report["wall_ns"] < 60e9
