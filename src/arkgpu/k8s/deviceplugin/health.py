"""``/healthz``, ``/readyz`` and ``/metrics`` of the device plugin (served by
:mod:`arkgpu.probes`, shared with the DRA driver).

- ``/healthz``: 200 while the plugin's loop has run recently (it checks the
  kubelet every ``kubelet_check_s``), else 503: a stuck plugin gets restarted.
- ``/readyz``: 200 once registered with the kubelet now serving, else 503 (with the reason
  when NVML does not start).
- ``/metrics``: Prometheus text: registrations, allocations, refusals,
  PreStartContainer calls, GPU mismatches, another plugin's devices, GPUs by health.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from arkgpu.k8s.deviceplugin.plugin import DevicePlugin
from arkgpu.probes import Probes, serve_probes

STALE_AFTER_S = 30.0
"""Least time without a loop tick before ``/healthz`` fails, seconds (a loaded node's NVML
scan can take seconds; the kubelet's default probe period is 10 s)."""
PREFIX = "arkgpu_device_plugin_"


class PluginCollector(Collector):
    """The plugin's counters and gauges, read at each scrape."""

    def __init__(self, plugin: DevicePlugin) -> None:
        """Collect from ``plugin``."""
        self.plugin = plugin

    def collect(self) -> Iterator[Any]:
        """The metric families (prometheus-client's collector protocol)."""
        p, s = self.plugin, self.plugin.service
        for name, text, value in (
            ("registrations", "Successful registrations with the kubelet.", p.registrations),
            ("allocations", "Containers allocated.", s.allocations),
            (
                "allocate_refusals",
                "Allocate and PreStartContainer calls answered with an error.",
                s.refusals,
            ),
            ("prestarts", "Containers given their pod's limits.", s.prestarts),
            (
                "gpu_mismatches",
                "Containers allocated other GPUs than their pod's assigned ones.",
                s.mismatches,
            ),
        ):
            yield CounterMetricFamily(PREFIX + name, text, value=value)
        yield GaugeMetricFamily(
            PREFIX + "foreign_devices",
            "nvidia.com/gpu devices the kubelet holds from another device plugin.",
            value=p.foreign_devices,
        )
        gpus = p.board.snapshot()[1]
        healthy = sum(g.healthy for g in gpus)
        by_health = GaugeMetricFamily(
            PREFIX + "gpus", "GPUs of the node by health.", labels=["health"]
        )
        by_health.add_metric(["healthy"], healthy)
        by_health.add_metric(["unhealthy"], len(gpus) - healthy)
        yield by_health


def live(plugin: DevicePlugin) -> str:
    """``/healthz``: "" while the loop ticked within max(30 s, 5 kubelet checks)."""
    stale = max(STALE_AFTER_S, 5 * plugin.config.kubelet_check_s)
    return "" if time.monotonic() - plugin.last_tick < stale else "loop stalled"


def ready(plugin: DevicePlugin) -> str:
    """``/readyz``: "" once registered with the kubelet now serving."""
    if plugin.not_ready:
        return f"not ready: {plugin.not_ready}"
    return "" if plugin.registered else "not registered"


def probes(plugin: DevicePlugin) -> Probes:
    """The plugin's three answers."""
    return Probes(lambda: live(plugin), lambda: ready(plugin), PluginCollector(plugin))


def serve_health(plugin: DevicePlugin, address: str, port: int) -> ThreadingHTTPServer:
    """Start the endpoint in a daemon thread; the caller stops it (``stop_probes``)."""
    return serve_probes(probes(plugin), address, port)
