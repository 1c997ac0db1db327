"""`arkgpu limiter bench` and `arkgpu limiter show`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from arkgpu.cli.main import main
from arkgpu.client import LatencyReporter
from arkgpu.limiter import Limits, create_region, link_lender


def test_bench_writes_every_figure_with_its_cases(tmp_path: Path) -> None:
    """A short bench run writes the issue's four figures, each beside its
    per-case values, with finite numbers, and the plot."""
    out = tmp_path / "bench.json"
    code = main(
        ["limiter", "bench", "--quick", "--shares", "40", "--seconds", "0.3", "--json", str(out)]
    )
    assert code == 0
    report = json.loads(out.read_text())
    for key in (
        "launch_overhead_ns",
        "memcall_overhead_ns",
        "share_error_pts_max",
        "share_change_latency_ms",
    ):
        assert isinstance(report[key], float), key
    assert len(report["launch_overhead_cases"]) == 1
    assert [c["share_pct"] for c in report["share_cases"]] == [40.0]
    assert len(report["share_change_cases"]) == 2
    lending = report["lending"]
    for key in ("in_flight_pct", "idle_pct", "again_pct", "lend_check_ns"):
        assert isinstance(lending[key], float), key
    assert lending["in_flight_pct"] < lending["idle_pct"]
    assert len(lending["lend_check_cases"]) == 1


def test_bench_rejects_bad_shares(capsys: pytest.CaptureFixture[str]) -> None:
    """A share outside (0, 100) is a one-line error, exit status 2."""
    assert main(["limiter", "bench", "--shares", "0,50"]) == 2
    assert "--shares" in capsys.readouterr().err


def test_show_prints_limits_and_usage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`show` prints the region's limits."""
    region = create_region(tmp_path / "r", Limits((1 << 20,), 2_500))
    assert main(["limiter", "show", str(region)]) == 0
    assert "share_bp=2500" in capsys.readouterr().out


def test_show_prints_lending(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`show` prints the in-flight count and, per lender, its lent share and
    what its file says now (a missing lender is named as lending nothing)."""
    lc = create_region(tmp_path / "lc", Limits((None,)))
    be = create_region(tmp_path / "be", Limits((None,), 3_000, lent_bp=(5000, 2500)))
    link_lender(be, 0, lc)
    with LatencyReporter(lc) as reporter:
        reporter.batch_begin()
        assert main(["limiter", "show", str(lc)]) == 0
        assert "LC batches in flight: 1 (begun 1)" in capsys.readouterr().out
        assert main(["limiter", "show", str(be)]) == 0
    out = capsys.readouterr().out
    assert "lending: 2 lenders, stale after 5000 ms" in out
    assert "lender 0: 5000 bp; 1 batches in flight, not lending" in out
    assert "lender 1: 2500 bp; lenders/1 missing or of another layout: lends nothing" in out
