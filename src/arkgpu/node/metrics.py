"""``/metrics`` (Prometheus text format), ``/healthz`` and ``/readyz`` of the runtime.

The metrics are computed at scrape time from the runtime's state (a
prometheus-client collector; no module-level registry). Names follow the
Prometheus conventions (base units, ``_total`` for counters) and are listed in
docs/NODE.md. ``/healthz``: 200 while the loop has ticked within the last
``stale_periods`` periods. ``/readyz``: 200 once the first scan and the
rebuild period are done.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from typing import Any

from arkgpu.node.runtime import NodeRuntime

STALE_PERIODS = 20
"""/healthz fails when no tick ran for this many periods."""


class RuntimeCollector:
    """Yields the runtime's metric families at each scrape."""

    def __init__(self, runtime: NodeRuntime, gpu_handles: dict[int, Any] | None = None) -> None:
        """Collect from ``runtime``, and from NVML ``gpu_handles`` (index -> handle) if given."""
        self.runtime = runtime
        self.gpu_handles = gpu_handles or {}

    def collect(self) -> Iterator[Any]:
        """The metric families (prometheus-client collector protocol)."""
        from prometheus_client.core import (  # noqa: PLC0415 (the [node] extra)
            CounterMetricFamily,
            GaugeMetricFamily,
        )

        rt = self.runtime
        stop = rt.backstop
        for name, value, text in (
            (
                "arkgpu_node_backstop_escapes",
                stop.escapes if stop is not None else 0,
                "Containers the backstop caught over their memory cap.",
            ),
            (
                "arkgpu_node_backstop_unattached",
                stop.unattached_caught if stop is not None else 0,
                "Containers caught with GPU processes the interception library does not know.",
            ),
            ("arkgpu_node_ticks", rt.stats.ticks, "Control periods run."),
            ("arkgpu_node_limit_writes", rt.stats.writes, "Limits files rewritten."),
            ("arkgpu_node_containers_adopted", rt.stats.adopted, "Containers adopted."),
            ("arkgpu_node_containers_forgotten", rt.stats.forgotten, "Containers forgotten."),
            (
                "arkgpu_node_calibration_changes",
                rt.calibration.changes if rt.calibration is not None else 0,
                "Online-calibration corrections logged (moved by 0.05 or more).",
            ),
        ):
            yield CounterMetricFamily(name, text, value=value)
        labels = ["container", "gpu", "kind", "region"]
        fams = {
            "share": GaugeMetricFamily(
                "arkgpu_container_share_ratio", "Compute share given (0..1).", labels=labels
            ),
            "cap": GaugeMetricFamily(
                "arkgpu_container_memory_cap_bytes", "Memory cap (bytes).", labels=labels
            ),
            "used": GaugeMetricFamily(
                "arkgpu_container_memory_used_bytes", "Device memory held.", labels=labels
            ),
            "busy": CounterMetricFamily(
                "arkgpu_container_busy_seconds", "GPU busy time of the container.", labels=labels
            ),
            "throttled": CounterMetricFamily(
                "arkgpu_container_throttled_seconds", "Time its launches waited.", labels=labels
            ),
            "p99": GaugeMetricFamily(
                "arkgpu_container_latency_p99_seconds", "LC p99 of the last period.", labels=labels
            ),
            "target": GaugeMetricFamily(
                "arkgpu_container_latency_target_seconds", "LC p99 target.", labels=labels
            ),
            "requests": CounterMetricFamily(
                "arkgpu_container_requests", "LC requests completed.", labels=labels
            ),
            "within": CounterMetricFamily(
                "arkgpu_container_requests_within_target",
                "LC requests completed within the latency target.",
                labels=labels,
            ),
            "correction": GaugeMetricFamily(
                "arkgpu_container_latency_correction_ratio",
                "LC: online calibration, measured over predicted batch latency (1: as predicted).",
                labels=labels,
            ),
        }
        corrections = rt.controller.corrections() if rt.calibration is not None else None
        for c in list(rt.containers.values()):
            labels_of = [c.spec.label, str(c.spec.gpu), c.spec.kind, c.name]
            _container_samples(fams, c, labels_of, corrections)
        yield from fams.values()
        if self.gpu_handles:
            yield from _gpu_families(self.gpu_handles, GaugeMetricFamily)


def _gpu_families(handles: dict[int, Any], gauge: Any) -> Iterator[Any]:
    import pynvml  # type: ignore[import-untyped]  # noqa: PLC0415 (the [node] extra)

    util = gauge("arkgpu_gpu_utilization_ratio", "NVML utilisation (0..1).", labels=["gpu"])
    total = gauge("arkgpu_gpu_memory_total_bytes", "NVML total memory.", labels=["gpu"])
    used = gauge("arkgpu_gpu_memory_used_bytes", "NVML used memory.", labels=["gpu"])
    for index, handle in handles.items():
        try:
            rates = pynvml.nvmlDeviceGetUtilizationRates(handle)
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
        except pynvml.NVMLError:
            continue
        util.add_metric([str(index)], rates.gpu / 100)
        total.add_metric([str(index)], memory.total)
        used.add_metric([str(index)], memory.used)
    yield from (util, total, used)


def _container_samples(
    fams: dict[str, Any], c: Any, labels: list[str], corrections: dict[str, float] | None
) -> None:
    fams["share"].add_metric(labels, c.limits.share_bp / 10_000)
    cap = c.limits.memory_bytes[0] if c.limits.memory_bytes else None
    if cap is not None:
        fams["cap"].add_metric(labels, cap)
    u = c.usage
    if u is not None:
        fams["used"].add_metric(labels, u.used_bytes[0])
        fams["busy"].add_metric(labels, u.busy_ns[0] / 1e9)
        fams["throttled"].add_metric(labels, sum(p.throttled_ns for p in u.processes) / 1e9)
    if c.spec.is_lc:
        if not math.isnan(c.p99_ms):
            fams["p99"].add_metric(labels, c.p99_ms / 1000)
        fams["target"].add_metric(labels, c.spec.target_ms / 1000)
        fams["requests"].add_metric(labels, c.requests)
        fams["within"].add_metric(labels, c.within_target)
        if corrections is not None:
            fams["correction"].add_metric(labels, corrections.get(c.name, 1.0))


def serve_metrics(
    runtime: NodeRuntime, address: str, port: int, gpu_handles: dict[int, Any] | None = None
) -> ThreadingHTTPServer:
    """Serve ``/healthz`` (a tick within ``STALE_PERIODS`` periods), ``/readyz`` (a first
    tick done, no rebuild under way) and ``/metrics`` (:class:`RuntimeCollector`) from a
    daemon thread (:mod:`arkgpu.probes`); returns the server (``server_port``)."""
    from arkgpu.probes import Probes, serve_probes  # noqa: PLC0415 (the [node] extra)

    probes = Probes(
        live=lambda: _stale(runtime),
        ready=lambda: _starting(runtime),
        collector=RuntimeCollector(runtime, gpu_handles),
    )
    return serve_probes(probes, address, port)


def _stale(runtime: NodeRuntime) -> str:
    age = time.monotonic() - runtime.last_tick
    return "" if age < STALE_PERIODS * runtime.config.period_s else f"no tick for {age:.1f} s"


def _starting(runtime: NodeRuntime) -> str:
    return "" if runtime.stats.ticks >= 1 and not runtime.rebuilding else "starting"
