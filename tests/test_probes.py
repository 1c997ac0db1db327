"""The node agents' shared /healthz, /readyz and /metrics endpoint, over real HTTP."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from arkgpu.probes import Probes, serve_probes, stop_probes


def get(port: int, path: str) -> tuple[int, str, str]:
    """(status, body, content type) of a GET on 127.0.0.1:port."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as answer:
            return answer.status, answer.read().decode(), answer.headers["Content-Type"]
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(), error.headers["Content-Type"]


class Counting(Collector):
    """One counter whose value the test sets."""

    def __init__(self) -> None:
        self.value = 0

    def collect(self) -> Iterator[Any]:
        yield CounterMetricFamily("arkgpu_test_things", "Things.", value=self.value)


def test_answers_follow_the_checks_and_the_collector_at_each_request() -> None:
    """200 ok while a check returns ""; 503 with its reason (on one line) otherwise; the
    collector is read at each scrape; other paths 404; a query string is ignored."""
    reasons = {"live": "", "ready": "not registered"}
    collector = Counting()
    probes = Probes(lambda: reasons["live"], lambda: reasons["ready"], collector)
    server = serve_probes(probes, "127.0.0.1", 0)
    port = server.server_port
    try:
        assert get(port, "/healthz")[:2] == (200, "ok\n")
        assert get(port, "/readyz")[:2] == (503, "not registered\n")
        reasons.update(ready="", live="loop\nstalled")
        assert get(port, "/readyz?verbose")[:2] == (200, "ok\n")
        assert get(port, "/healthz")[:2] == (503, "loop stalled\n")
        status, text, kind = get(port, "/metrics")
        assert (status, kind.split(";")[0]) == (200, "text/plain")
        assert "arkgpu_test_things_total 0.0" in text.splitlines()
        collector.value = 3
        assert "arkgpu_test_things_total 3.0" in get(port, "/metrics")[1].splitlines()
        assert get(port, "/nothing")[:2] == (404, "not found\n")
    finally:
        stop_probes(server)


def test_stop_closes_the_port() -> None:
    """After stop_probes nothing answers on the port (a restarted agent can bind it)."""
    server = serve_probes(Probes(lambda: "", lambda: "", Counting()), "127.0.0.1", 0)
    port = server.server_port
    stop_probes(server)
    stop_probes(None)
    again = serve_probes(Probes(lambda: "", lambda: "", Counting()), "127.0.0.1", port)
    stop_probes(again)
