"""``arkgpu extender bench`` on a small cluster: the figures it reports are consistent."""

from __future__ import annotations

import pytest

from arkgpu.k8s.extender.bench import BenchConfig, run_bench


@pytest.mark.timeout(300)
def test_the_bench_reports_wire_caller_and_cpu_figures_and_binds_everything() -> None:
    """Every pod is filtered, prioritized and bound; the time on the wire is part of the
    time the caller sees, and the extender's CPU part of the process's."""
    config = BenchConfig(nodes=20, gpus_per_node=8, pods=30, repeats=2, relearn="inline")
    report = run_bench(config)
    assert len(report["runs"]) == 2
    for run in report["runs"]:
        assert 0 < run["filter_prioritize_p50_ms"] <= run["filter_prioritize_caller_p50_ms"]
        assert run["filter_prioritize_p50_ms"] <= run["filter_prioritize_p99_ms"]
        assert 0 <= run["extender_cpu_p50_ms"] <= run["filter_prioritize_cpu_p50_ms"]
        assert run["binds_failed"] == 0
        assert run["bind_pods_per_s"] > 0
        assert run["peak_rss_mib"] > 0
        assert run["snapshot_mib"] < run["peak_rss_mib"]
    assert report["filter_prioritize_p99_target_ms"] == 5.0
    assert report["nodes"] == 20
    assert report["relearn"] == "inline"
