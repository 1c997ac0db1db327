"""The limiter under PyTorch on a real NVIDIA GPU (run by tests/gpu/run.sh).

Each check runs a child Python process with the interception library in
LD_PRELOAD and its own region; the child process must not be able to write
the limits file, so when the tests run as root the child runs as nobody (the
Python interpreter and this checkout must then be readable by nobody), else
the limits file is made read-only for its owner.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from arkgpu.client import LatencyReporter
from arkgpu.limiter import Limits, link_lender, native
from arkgpu.limiter.containers import FakeContainer, container_user, make_world_readable

GiB = 1 << 30

CHILD = r"""
import json, sys, time, torch
mode = sys.argv[1]
if mode == "oom":
    cap = int(sys.argv[2])
    a = torch.empty(int(cap * 0.6), dtype=torch.uint8, device="cuda")
    try:
        b = torch.empty(int(cap * 0.6), dtype=torch.uint8, device="cuda")
        print(json.dumps({"second": "ok"}))
    except torch.cuda.OutOfMemoryError:
        print(json.dumps({"second": "oom"}))
else:
    seconds = float(sys.argv[2])
    x = torch.randn(2048, 2048, device="cuda")
    torch.cuda.synchronize()
    stamps = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for _ in range(4):
            x = torch.mm(x, x).clamp_(-1, 1)
        torch.cuda.synchronize()
        stamps.append(time.monotonic_ns())
    print(json.dumps({"stamps": stamps}))
"""


@pytest.fixture
def workdir() -> Iterator[Path]:
    """A directory the child user can reach."""
    path = Path(tempfile.mkdtemp(prefix="arkgpu-gpu-"))
    make_world_readable(path)
    yield path
    subprocess.run(["rm", "-rf", str(path)], check=False)


def child_python() -> tuple[str, dict[str, str]]:
    """An interpreter the child user can run, and the environment to find torch.

    When we are root the child runs as nobody, who may not reach our
    interpreter (e.g. under /root); then the system python3 gets our sys.path.
    """
    try:
        subprocess.run([sys.executable, "-c", "pass"], user=container_user(), check=True)
    except (PermissionError, subprocess.CalledProcessError):
        return "/usr/bin/python3", {"PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    return sys.executable, {}


def child_env(box: FakeContainer) -> dict[str, str]:
    """The child's environment: the limiter preloaded, the region, torch findable."""
    env = dict(os.environ, **child_python()[1])
    env["LD_PRELOAD"] = str(native.limiter_library())
    env["ARKGPU_REGION_DIR"] = str(box.region)
    return env


def run_child(box: FakeContainer, *args: str) -> dict[str, list[int] | str]:
    """Run the child on the real driver with the limiter preloaded."""
    out = subprocess.run(
        [child_python()[0], "-c", CHILD, *args],
        capture_output=True,
        text=True,
        env=child_env(box),
        user=container_user(),
        timeout=300,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def throughput(box: FakeContainer, seconds: float = 4.0) -> float:
    """Iterations per second over the run's second half."""
    stamps = run_child(box, "rate", str(seconds))["stamps"]
    assert isinstance(stamps, list)
    half = stamps[len(stamps) // 2 :]
    return (len(half) - 1) / ((half[-1] - half[0]) / 1e9)


def test_allocation_past_the_cap_raises_torch_out_of_memory(workdir: Path) -> None:
    """Two allocations of 60% of a 2 GiB cap: the second raises torch's OOM."""
    box = FakeContainer.create(workdir / "c", workdir / "unused", Limits((2 * GiB,)))
    assert run_child(box, "oom", str(2 * GiB)) == {"second": "oom"}


@pytest.mark.parametrize("share", [25.0, 50.0, 75.0])
def test_throughput_follows_the_share(workdir: Path, share: float) -> None:
    """Matmul throughput at a share is that share of the full-GPU throughput,
    within 10 points."""
    full = throughput(FakeContainer.create(workdir / "full", workdir / "unused", Limits((None,))))
    box = FakeContainer.create(workdir / f"s{share:g}", workdir / "unused", Limits((None,), share))
    assert abs(100 * throughput(box) / full - share) < 10


def test_a_share_change_mid_run_takes_effect(workdir: Path) -> None:
    """Raised from 25% to 75% mid-run, throughput rises about threefold."""
    box = FakeContainer.create(workdir / "c", workdir / "unused", Limits((None,), 25.0))
    proc = subprocess.Popen(
        [child_python()[0], "-c", CHILD, "rate", "6"],
        stdout=subprocess.PIPE,
        text=True,
        env=child_env(box),
        user=container_user(),
    )
    time.sleep(3.0)
    written = time.monotonic_ns()
    box.set_limits(Limits((None,), 75.0))
    out, _ = proc.communicate(timeout=300)
    stamps = json.loads(out.strip().splitlines()[-1])["stamps"]
    before = [t for t in stamps if written - 2e9 < t < written]
    after = [t for t in stamps if written + 0.5e9 < t]
    rate_before = (len(before) - 1) / ((before[-1] - before[0]) / 1e9)
    rate_after = (len(after) - 1) / ((after[-1] - after[0]) / 1e9)
    assert rate_after / rate_before > 2.0


def test_a_best_effort_container_borrows_an_idle_lc_share(workdir: Path) -> None:
    """A BE container at 25% lent 50% by an LC container: about 25% of the
    full-GPU throughput while the LC holds a batch in flight, about 75% while
    it holds none (the staleness limit is set above the child's run time)."""
    full = throughput(FakeContainer.create(workdir / "full", workdir / "unused", Limits((None,))))
    lc = FakeContainer.create(workdir / "lc", workdir / "unused", Limits((None,)))
    be_limits = Limits((None,), 25.0, lent_bp=(5000,), lend_stale_ms=600_000)
    be = FakeContainer.create(workdir / "be", workdir / "unused", be_limits)
    link_lender(be.region, 0, lc.region)
    with LatencyReporter(lc.region) as lc_server:
        lc_server.batch_begin()
        in_flight = throughput(be)
        lc_server.batch_end()
        idle = throughput(be)
    assert abs(100 * in_flight / full - 25) < 10
    assert abs(100 * idle / full - 75) < 10
