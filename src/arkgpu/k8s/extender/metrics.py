"""The extender's own Prometheus metrics (the HTTP server adds requests and latencies per path)."""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge

PREFIX = "arkgpu_extender"
"""Prefix of every metric name."""


@dataclass
class ExtenderMetrics:
    """Counters and gauges of decisions, binds and the snapshot."""

    decisions: Counter
    binds_failed: Counter
    nodes: Gauge
    pods: Gauge
    placed: Gauge
    watch_restarts: Counter
    relearn_workers_lost: Counter

    @classmethod
    def create(cls, registry: CollectorRegistry) -> ExtenderMetrics:
        """The metrics, registered in ``registry``."""
        return cls(
            decisions=Counter(
                f"{PREFIX}_decisions",
                "Answers given, by verb (filter, prioritize, bind).",
                ["verb"],
                registry=registry,
            ),
            binds_failed=Counter(
                f"{PREFIX}_binds_failed",
                "Binds answered with an error, by stage (decision, binding).",
                ["stage"],
                registry=registry,
            ),
            nodes=Gauge(f"{PREFIX}_snapshot_nodes", "Nodes offering GPUs.", registry=registry),
            pods=Gauge(f"{PREFIX}_snapshot_pods", "ArkGPU pods tracked.", registry=registry),
            placed=Gauge(f"{PREFIX}_placed_pods", "Pods counted on their GPUs.", registry=registry),
            watch_restarts=Counter(
                f"{PREFIX}_watch_restarts",
                "Watches reopened after an error or a 410 Gone, by resource.",
                ["resource"],
                registry=registry,
            ),
            relearn_workers_lost=Counter(
                f"{PREFIX}_relearn_workers_lost",
                "Re-learning worker processes that died before answering; each is replaced, "
                "and the policy decides meanwhile with what it learned last.",
                registry=registry,
            ),
        )
