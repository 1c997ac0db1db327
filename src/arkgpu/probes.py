"""``/healthz``, ``/readyz`` and ``/metrics`` of a node agent (the device plugin, the DRA driver,
the node runtime).

The kubelet's liveness and readiness probes and Prometheus read one small HTTP endpoint
per agent. What each probe checks is the agent's (two :data:`Check` callables); the
serving is here, once:

- ``/healthz``: 200 ``ok`` while ``live()`` returns ``""``, else 503 with its reason
  (the kubelet restarts the container after a few failures);
- ``/readyz``: 200 ``ok`` while ``ready()`` returns ``""``, else 503 with its reason;
- ``/metrics``: the Prometheus text format, rendered by prometheus-client from the
  agent's collector at scrape time (a registry of its own: no module-level state);
- anything else: 404.

The standard library's ``http.server`` does the HTTP (a few GETs a minute from the
kubelet and one scraper), one thread per request, so a slow check never holds another.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # prometheus-client comes with the node and k8s extras, not the core
    from prometheus_client.registry import Collector

Check = Callable[[], str]
"""A probe's check: ``""`` when fine, else the reason (one line) sent with the 503."""

TEXT = "text/plain; charset=utf-8"


@dataclass(frozen=True)
class Probes:
    """What one agent's endpoint answers."""

    live: Check
    """``/healthz``: is the process working (its loop ticking, its servers answering)?"""
    ready: Check
    """``/readyz``: is it doing its job (registered with the kubelet, ...)?"""
    collector: Collector
    """``/metrics``: the agent's metric families, computed at each scrape."""


class Endpoint:
    """The answers of one agent's endpoint (no socket: :func:`serve_probes` serves it)."""

    def __init__(self, probes: Probes) -> None:
        """Answer from ``probes``; its collector goes into a registry of its own."""
        from prometheus_client import CollectorRegistry  # noqa: PLC0415 (an extra's)

        self.probes = probes
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(probes.collector)

    def answer(self, path: str) -> tuple[int, bytes, str]:
        """(status, body, content type) for a GET of ``path`` (a query string is ignored)."""
        path = path.split("?", 1)[0]
        if path == "/metrics":
            from prometheus_client import CONTENT_TYPE_LATEST, generate_latest  # noqa: PLC0415

            return 200, generate_latest(self.registry), CONTENT_TYPE_LATEST
        checks = {"/healthz": self.probes.live, "/readyz": self.probes.ready}
        if path not in checks:
            return 404, b"not found\n", TEXT
        reason = checks[path]()
        if reason:
            return 503, f"{' '.join(reason.split())}\n".encode(), TEXT
        return 200, b"ok\n", TEXT


def serve_probes(probes: Probes, address: str, port: int) -> ThreadingHTTPServer:
    """Serve ``probes`` on ``address:port`` (0: any free port, see ``server_port``) from a
    daemon thread; the caller ends it with :func:`stop_probes`."""
    endpoint = Endpoint(probes)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            status, body, kind = endpoint.answer(self.path)
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: the probes would fill the log."""

    server = ThreadingHTTPServer((address, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def stop_probes(server: ThreadingHTTPServer | None) -> None:
    """Stop serving and close the socket (nothing when ``server`` is None)."""
    if server is not None:
        server.shutdown()
        server.server_close()
