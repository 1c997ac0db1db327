"""The extender over HTTPS (kube-scheduler's enableHTTPS), its health, readiness and metrics."""

from __future__ import annotations

import http.client
import json
import ssl
from pathlib import Path

from arkgpu.k8s.cluster.memory import MemoryApi
from e2e import pki

from .helpers import args, binding, node, pod, post, started


def test_https_filter_and_metrics(tmp_path: Path) -> None:
    ca = pki.make_ca()
    pair = pki.write(pki.issue(ca, "arkgpu-extender", ips=("127.0.0.1",)), tmp_path, "serving")
    ca_file = pki.write(ca, tmp_path, "ca").cert
    api = MemoryApi()
    api.put("nodes", node("n1"))
    api.put("pods", pod("a"))
    running = started(api, tls_cert_file=pair.cert, tls_key_file=pair.key)
    try:
        context = ssl.create_default_context(cafile=str(ca_file))
        conn = http.client.HTTPSConnection("127.0.0.1", running.port, timeout=30, context=context)
        conn.request("POST", "/filter", json.dumps(args(pod("a"), ["n1"])).encode())
        answer = conn.getresponse()
        assert answer.status == 200
        assert json.loads(answer.read())["NodeNames"] == ["n1"]
        conn.request("GET", "/readyz")
        assert conn.getresponse().read() == b"ok\n"
        conn.request("POST", "/bind", json.dumps(binding(pod("a"), "n1")).encode())
        assert json.loads(conn.getresponse().read()) == {"Error": ""}
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
        assert 'arkgpu_extender_decisions_total{verb="filter"} 1.0' in text
        assert 'arkgpu_extender_decisions_total{verb="bind"} 1.0' in text
        assert "arkgpu_extender_snapshot_nodes 1.0" in text
        assert 'arkgpu_extender_http_requests_total{code="200",path="/filter"} 1.0' in text
        conn.close()
    finally:
        running.close()


def test_plain_http_health() -> None:
    running = started(MemoryApi())
    try:
        conn = http.client.HTTPConnection("127.0.0.1", running.port, timeout=30)
        conn.request("GET", "/healthz")
        assert conn.getresponse().read() == b"ok\n"
        conn.close()
        assert post(running.port, "/filter", args(pod("x"), []))[0] == 200
    finally:
        running.close()
