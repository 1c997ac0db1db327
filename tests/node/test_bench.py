"""``arkgpu node bench`` measures what it says on a small node."""

from __future__ import annotations

from arkgpu.node.bench import NodeBenchConfig, run_node_bench


def test_bench_times_ticks_that_decide_and_write() -> None:
    """Ticks over 8 containers on 2 GPUs: timed, with limits written, CPU share of a core;
    the traffic ticks' latency reports all read by the runtime."""
    config = NodeBenchConfig(gpus=2, per_gpu=4, ticks=20, seconds=0.5)
    report = run_node_bench(config)
    assert report["containers"] == 8
    assert 0.0 < report["tick_median_ms"] <= report["tick_p99_ms"]
    assert report["writes"] >= 8  # every container's limits written at least once
    assert 0.0 < report["cpu_share_of_core"] < 1.0
    assert 0.0 < report["traffic_tick_median_ms"] <= report["traffic_tick_p99_ms"]
    expected = config.ticks * 4 * config.traffic_rps * config.period_s  # 4 LC containers
    assert abs(report["lc_requests_seen"] - expected) <= 5 * expected**0.5
