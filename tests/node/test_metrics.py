"""/metrics, /healthz and /readyz of the runtime (prometheus-client text format)."""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from pathlib import Path

from arkgpu.client import LatencyReporter
from arkgpu.colocation.deciding import ControlConfig, NodeController
from arkgpu.colocation.sizing import ShareSizer
from arkgpu.limiter.region import USAGE_FILE, Limits, create_region
from arkgpu.node.bench import attach
from arkgpu.node.config import NodeConfig
from arkgpu.node.metrics import serve_metrics
from arkgpu.node.pods import PodSpec, write_pod
from arkgpu.node.runtime import NodeRuntime
from arkgpu.predictor import default_predictor


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_endpoints_report_readiness_and_per_container_metrics(tmp_path: Path) -> None:
    """Not ready before the rebuild period; then ready, healthy, and the container's
    share, cap, target and the runtime's counters in the exposition. A container whose
    pod.json names its pod (the device plugin's, in a ``dev-<hash>`` region) is labelled
    namespace/pod/container; one that does not, by its region folder."""
    lc_region = "dev-0123456789abcdef01234567"
    for spec in (
        PodSpec(
            lc_region, "lc", 0, "resnet50", 1024, target_ms=50.0, peak_rps=100.0,
            namespace="team", pod="infer-7d9", container="main",
        ),
        PodSpec("be", "be", 0, "vgg16", 2048),
    ):  # fmt: skip
        write_pod(create_region(tmp_path / spec.name, Limits((None,), 5000)), spec)
        attach(tmp_path / spec.name / USAGE_FILE, os.getpid())
    config = NodeConfig(regions_dir=tmp_path, nvml=False)
    runtime = NodeRuntime(
        config, NodeController(ShareSizer(default_predictor()), ControlConfig()), [0]
    )
    server = serve_metrics(runtime, "127.0.0.1", 0)
    port = server.server_port
    try:
        runtime.start()
        assert _get(port, "/readyz")[0] == 503
        with LatencyReporter(tmp_path / lc_region) as reporter:
            for latency_s in (0.010, 0.020, 0.080):  # the last one over the 50 ms target
                reporter.report(latency_s)
        runtime.tick()
        runtime.tick()
        assert _get(port, "/readyz") == (200, "ok\n")
        assert _get(port, "/healthz")[0] == 200
        status, text = _get(port, "/metrics")
        assert status == 200
        assert "arkgpu_node_ticks_total 2.0" in text
        lc = f'{{container="team/infer-7d9/main",gpu="0",kind="lc",region="{lc_region}"}}'
        assert f"arkgpu_container_memory_cap_bytes{lc} 1.073741824e+09" in text
        assert f"arkgpu_container_latency_target_seconds{lc} 0.05" in text
        assert 'arkgpu_container_share_ratio{container="be",gpu="0",kind="be",region="be"}' in text
        assert f"arkgpu_container_requests_total{lc} 3.0" in text
        assert f"arkgpu_container_requests_within_target_total{lc} 2.0" in text
        assert _get(port, "/nosuch")[0] == 404
    finally:
        server.shutdown()
        server.server_close()
