"""``/healthz``, ``/readyz`` and ``/metrics`` of the device plugin (stdlib HTTP, one thread).

- ``/healthz``: 200 while the plugin's loop has run recently (it checks the
  kubelet every ``kubelet_check_s``), else 503: a stuck plugin gets restarted.
- ``/readyz``: 200 once registered with the kubelet now serving, else 503 (with the reason
  when NVML does not start).
- ``/metrics``: Prometheus text: registrations, allocations, refusals,
  PreStartContainer calls, GPU mismatches, another plugin's devices, GPUs by health.
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from arkgpu.k8s.deviceplugin.plugin import DevicePlugin

STALE_AFTER_S = 30.0
"""Least time without a loop tick before ``/healthz`` fails, seconds (a loaded node's NVML
scan can take seconds; the kubelet's default probe period is 10 s)."""


def metrics_text(plugin: DevicePlugin) -> str:
    """The metrics in Prometheus' text format."""
    gpus = plugin.board.snapshot()[1]
    healthy = sum(g.healthy for g in gpus)
    rows = [
        (
            "registrations_total",
            "counter",
            "Successful registrations with the kubelet.",
            "",
            plugin.registrations,
        ),
        ("allocations_total", "counter", "Containers allocated.", "", plugin.service.allocations),
        (
            "allocate_refusals_total",
            "counter",
            "Allocate and PreStartContainer calls answered with an error.",
            "",
            plugin.service.refusals,
        ),
        (
            "prestarts_total",
            "counter",
            "Containers given their pod's limits.",
            "",
            plugin.service.prestarts,
        ),
        (
            "gpu_mismatches_total",
            "counter",
            "Containers allocated other GPUs than their pod's assigned ones.",
            "",
            plugin.service.mismatches,
        ),
        (
            "foreign_devices",
            "gauge",
            "nvidia.com/gpu devices the kubelet holds from another device plugin.",
            "",
            plugin.foreign_devices,
        ),
        ("gpus", "gauge", "GPUs of the node by health.", '{health="healthy"}', healthy),
        ("gpus", "gauge", "", '{health="unhealthy"}', len(gpus) - healthy),
    ]
    lines = []
    for name, kind, text, labels, value in rows:
        full = f"arkgpu_device_plugin_{name}"
        if text:
            lines += [f"# HELP {full} {text}", f"# TYPE {full} {kind}"]
        lines.append(f"{full}{labels} {value}")
    return "\n".join(lines) + "\n"


def _answer(plugin: DevicePlugin, path: str) -> tuple[int, str]:
    if path == "/metrics":
        return 200, metrics_text(plugin)
    if path == "/healthz":
        stale = max(STALE_AFTER_S, 5 * plugin.config.kubelet_check_s)
        alive = time.monotonic() - plugin.last_tick < stale
        return (200, "ok\n") if alive else (503, "loop stalled\n")
    if path == "/readyz":
        if plugin.not_ready:
            return 503, f"not ready: {plugin.not_ready}\n"
        return (200, "ok\n") if plugin.registered else (503, "not registered\n")
    return 404, "not found\n"


def serve_health(plugin: DevicePlugin, address: str, port: int) -> ThreadingHTTPServer:
    """Start the endpoint in a daemon thread; the caller shuts it down."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            status, body = _answer(plugin, self.path.split("?")[0])
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: probes would fill the log."""

    server = ThreadingHTTPServer((address, port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
