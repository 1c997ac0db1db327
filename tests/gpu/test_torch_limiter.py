"""The limiter under PyTorch on a real NVIDIA GPU (run by tests/gpu/run.sh).

The children are PyTorch processes on the real driver (tests/gpu/torchchild.py
says how they run and as whom).
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from arkgpu.client import LatencyReporter
from arkgpu.limiter import Limits, link_lender
from arkgpu.limiter.containers import FakeContainer, make_world_readable
from arkgpu.model.shares import share_bp

from .torchchild import last_line, rate_over, run_child, start_child, throughput

GiB = 1 << 30


@pytest.fixture
def workdir() -> Iterator[Path]:
    """A directory the child user can reach."""
    path = Path(tempfile.mkdtemp(prefix="arkgpu-gpu-"))
    make_world_readable(path)
    yield path
    subprocess.run(["rm", "-rf", str(path)], check=False)


def test_allocation_past_the_cap_raises_torch_out_of_memory(workdir: Path) -> None:
    """Two allocations of 60% of a 2 GiB cap: the second raises torch's OOM."""
    box = FakeContainer.create(workdir / "c", workdir / "unused", Limits((2 * GiB,)))
    assert run_child(box, "oom", str(2 * GiB)) == {"second": "oom"}


def test_memory_queries_report_the_cap(workdir: Path) -> None:
    """Under a 3 GiB cap, cuMemGetInfo (torch.cuda.mem_get_info) and NVML's
    memory info both report a 3 GiB device; without the limiter, the real one."""
    box = FakeContainer.create(workdir / "c", workdir / "unused", Limits((3 * GiB,)))
    capped = run_child(box, "info")
    bare = run_child(box, "info", preload=False)
    assert capped["nvml_codes"] == [0, 0, 0]
    assert capped["cuda_total"] == capped["nvml_total"] == 3 * GiB
    assert 0 < capped["cuda_free"] <= 3 * GiB
    assert capped["nvml_free"] <= 3 * GiB
    assert bare["cuda_total"] > 3 * GiB
    assert bare["nvml_total"] > 3 * GiB


@pytest.mark.parametrize("share", [25.0, 50.0, 75.0])
def test_throughput_follows_the_share(workdir: Path, share: float) -> None:
    """Matmul throughput at a share is that share of the full-GPU throughput,
    within 10 points."""
    full = throughput(FakeContainer.create(workdir / "full", workdir / "unused", Limits((None,))))
    box = FakeContainer.create(
        workdir / f"s{share:g}", workdir / "unused", Limits((None,), share_bp(share / 100))
    )
    assert abs(100 * throughput(box) / full - share) < 10


def test_a_share_change_mid_run_takes_effect(workdir: Path) -> None:
    """Raised from 25% to 75% mid-run, throughput rises about threefold."""
    box = FakeContainer.create(workdir / "c", workdir / "unused", Limits((None,), 2_500))
    proc = start_child(box, "rate", "6")
    assert proc.stdout is not None
    assert json.loads(proc.stdout.readline()) == {"started": True}  # torch and CUDA are up
    time.sleep(2.5)
    written = time.monotonic_ns()
    box.set_limits(Limits((None,), 7_500))
    out, _ = proc.communicate(timeout=300)  # the child runs 6 s from "started"
    stamps = last_line(out)["stamps"]
    before = [t for t in stamps if written - 2e9 < t < written]
    after = [t for t in stamps if written + 0.5e9 < t]
    assert rate_over(after) / rate_over(before) > 2.0


def test_a_best_effort_container_borrows_an_idle_lc_share(workdir: Path) -> None:
    """A BE container at 25% lent 50% by an LC container: about 25% of the
    full-GPU throughput while the LC holds a batch in flight, about 75% while
    it holds none (the staleness limit is set above the child's run time)."""
    full = throughput(FakeContainer.create(workdir / "full", workdir / "unused", Limits((None,))))
    lc = FakeContainer.create(workdir / "lc", workdir / "unused", Limits((None,)))
    be_limits = Limits((None,), 2_500, lent_bp=(5000,), lend_stale_ms=600_000)
    be = FakeContainer.create(workdir / "be", workdir / "unused", be_limits)
    link_lender(be.region, 0, lc.region)
    with LatencyReporter(lc.region) as lc_server:
        lc_server.batch_begin()
        in_flight = throughput(be)
        lc_server.batch_end()
        idle = throughput(be)
    assert abs(100 * in_flight / full - 25) < 10
    assert abs(100 * idle / full - 75) < 10
