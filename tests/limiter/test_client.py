"""The LC latency channel: samples reported by servers reach the node side."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from arkgpu.client import LatencyReporter
from arkgpu.limiter import Limits, create_region, layout, read_latencies

WRITER = """
import sys
from pathlib import Path
from arkgpu.client import LatencyReporter
with LatencyReporter(Path(sys.argv[1])) as r:
    for i in range(int(sys.argv[3])):
        r.report_ns(int(sys.argv[2]) * 1_000_000 + i, batch=int(sys.argv[2]))
"""


def test_samples_from_concurrent_processes_all_arrive(tmp_path: Path) -> None:
    """Three processes report 200 samples each at the same time: the node side
    reads all 600, each once, with its latency and batch intact, in ticket order."""
    region = create_region(tmp_path / "r", Limits((None,)))
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(region), str(w), "200"])
        for w in (1, 2, 3)
    ]
    assert all(p.wait(timeout=60) == 0 for p in writers)
    samples = read_latencies(region)
    assert [s.seq for s in samples] == list(range(1, 601))
    by_writer = {w: sorted(s.latency_ns for s in samples if s.batch == w) for w in (1, 2, 3)}
    assert by_writer == {w: [w * 1_000_000 + i for i in range(200)] for w in (1, 2, 3)}


def test_the_ring_keeps_the_newest_samples_and_reads_incrementally(tmp_path: Path) -> None:
    """Past the ring's size only the newest samples remain; ``after_seq`` reads
    only what is new."""
    region = create_region(tmp_path / "r", Limits((None,)))
    with LatencyReporter(region) as reporter:
        for i in range(layout.LATENCY_SLOTS + 100):
            reporter.report(i / 1e6)
        samples = read_latencies(region)
        assert len(samples) == layout.LATENCY_SLOTS
        assert samples[0].latency_ns == 100_000
        assert samples[-1].latency_ns == (layout.LATENCY_SLOTS + 99) * 1000
        seq = reporter.report(0.5, batch=8)
    (new,) = read_latencies(region, after_seq=samples[-1].seq)
    assert (new.seq, new.latency_ns, new.batch) == (seq, 500_000_000, 8)


def test_a_missing_region_is_named_in_the_error(tmp_path: Path) -> None:
    """Opening a directory without a usage file raises OSError naming it."""
    with pytest.raises(OSError, match="nowhere/usage"):
        LatencyReporter(tmp_path / "nowhere")
