"""The Grafana dashboard (deploy/grafana/arkgpu-node.json) against what the node's agents
export: every metric the node runtime, the device plugin and the DRA driver register has
a panel, and every panel asks only for metrics one of them exports.

The names come from the exporters themselves, never from a list written here: the node
runtime's from the ``# TYPE`` lines of a running ``arkgpu node run``'s /metrics (on two
fake GPUs through the fake NVML, so its per-GPU families are there too; prometheus-client
writes the lines of a family with no sample yet), the device plugin's and the DRA driver's
from their collectors rendered by prometheus-client.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.registry import Collector

from arkgpu.k8s.deviceplugin.health import PluginCollector
from arkgpu.k8s.dra.config import DraConfig
from arkgpu.k8s.dra.health import DriverCollector, DriverState
from arkgpu.limiter import native

ROOT = Path(__file__).parents[2]
TYPE_LINE = re.compile(r"^# TYPE (\S+) ", re.MULTILINE)


def _exported(text: str) -> set[str]:
    return set(TYPE_LINE.findall(text))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _scrape(port: int, process: subprocess.Popen[str], timeout_s: float) -> str:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
                return str(r.read().decode())
        except OSError:
            assert process.poll() is None, process.communicate(timeout=30)[1]
            assert time.monotonic() < deadline, "no /metrics"
            time.sleep(0.2)


@pytest.fixture(scope="module")
def runtime_metrics(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    """The metric names a running ``arkgpu node run`` exports."""
    work = tmp_path_factory.mktemp("runtime")
    env = native.container_env(None, work / "fakegpu", preload=False)
    env.update(FAKEGPU_DEVICES="2", FAKEGPU_MEM_MIB="4096")
    port = _free_port()
    config = work / "node.toml"
    config.write_text(f'regions_dir = "{work / "regions"}"\nmetrics_port = {port}\n')
    runtime = subprocess.Popen(
        [sys.executable, "-m", "arkgpu", "node", "run", "--config", str(config)],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        return _exported(_scrape(port, runtime, 120))
    finally:
        runtime.terminate()
        runtime.communicate(timeout=30)


def _rendered(collector: Collector) -> set[str]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return _exported(generate_latest(registry).decode())


def agent_metrics() -> set[str]:
    """The device plugin's and the DRA driver's metric names, from their collectors (the
    plugin's read from a stand-in holding the attributes its collector reads)."""
    service = SimpleNamespace(allocations=0, refusals=0, prestarts=0, mismatches=0)
    plugin = SimpleNamespace(
        registrations=0,
        foreign_devices=0,
        service=service,
        board=SimpleNamespace(snapshot=lambda: ((), [])),
    )
    driver = DriverState(DraConfig(node_name="n"))
    return _rendered(PluginCollector(plugin)) | _rendered(DriverCollector(driver))  # type: ignore[arg-type]


def _queries() -> list[tuple[str, str]]:
    dashboard = json.loads((ROOT / "deploy/grafana/arkgpu-node.json").read_text())
    assert dashboard["panels"]
    return [(p["title"], t["expr"]) for p in dashboard["panels"] for t in p["targets"]]


def _names(expr: str) -> set[str]:
    return set(re.findall(r"\b(arkgpu_[a-z0-9_]+)\b", expr))


def test_the_exporters_are_read(runtime_metrics: set[str]) -> None:
    """The scrape found the runtime's families of each kind (so the next tests see them)."""
    for name in (
        "arkgpu_node_ticks_total",
        "arkgpu_container_latency_correction_ratio",
        "arkgpu_gpu_utilization_ratio",
    ):
        assert name in runtime_metrics, sorted(runtime_metrics)
    assert "arkgpu_dra_driver_prepared_claims_total" in agent_metrics()
    assert "arkgpu_device_plugin_gpus" in agent_metrics()


def test_every_exported_metric_has_a_panel(runtime_metrics: set[str]) -> None:
    """Each name the runtime, the device plugin or the DRA driver exports is in a query."""
    used = set().union(*(_names(expr) for _, expr in _queries()))
    missing = (runtime_metrics | agent_metrics()) - used
    assert not missing, f"no panel shows {sorted(missing)}"


def test_every_panel_asks_for_exported_metrics(runtime_metrics: set[str]) -> None:
    """Each panel has queries; each query names only metrics an exporter exports."""
    exported = runtime_metrics | agent_metrics()
    for title, expr in _queries():
        names = _names(expr)
        assert names, (title, expr)
        assert names <= exported, (title, names - exported)


def test_docs_list_every_runtime_metric(runtime_metrics: set[str]) -> None:
    """docs/NODE.md names each metric the runtime exports."""
    documented = set(re.findall(r"`(arkgpu_[a-z0-9_]+)`", (ROOT / "docs/NODE.md").read_text()))
    assert runtime_metrics <= documented, sorted(runtime_metrics - documented)
