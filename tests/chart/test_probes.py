"""Every long-running container the chart renders has a liveness and a readiness probe the
kubelet can use: an HTTP GET of a health path on a port the container declares.

Init containers are left out: the kubelet refuses probes on init containers (they run to
completion before the pod's containers start).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from arkgpu.k8s.dra.config import config_from_dict

from .helm import Manifest, config_map_file, container, find, render

WORKLOADS = ("Deployment", "DaemonSet", "StatefulSet")
HEALTH_PATHS = {"/healthz", "/readyz", "/livez"}
DRA_ON = {"dra": {"enabled": True}}


def _containers(docs: list[Manifest]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"{doc['kind']}/{doc['metadata']['name']}/{c['name']}", c)
        for doc in docs
        if doc["kind"] in WORKLOADS
        for c in doc["spec"]["template"]["spec"]["containers"]
    ]


def _check(where: str, spec: dict[str, Any]) -> None:
    ports = {p.get("name") for p in spec.get("ports", [])} | {
        p["containerPort"] for p in spec.get("ports", [])
    }
    for kind in ("livenessProbe", "readinessProbe"):
        assert kind in spec, f"{where}: no {kind}"
        get = spec[kind]["httpGet"]
        assert get["path"] in HEALTH_PATHS, f"{where}: {kind} path {get['path']}"
        assert get["port"] in ports, f"{where}: {kind} port {get['port']} not declared {ports}"


@pytest.mark.parametrize("values", [None, DRA_ON], ids=["default", "dra"])
def test_every_container_has_both_probes(
    helm: Path, tmp_path: Path, values: dict[str, Any] | None
) -> None:
    """Default values and dra.enabled: each container of each workload, both probes."""
    docs = render(helm, tmp_path, values)
    containers = _containers(docs)
    names = {where.rsplit("/", 1)[1] for where, _ in containers}
    expected = {"kube-scheduler", "extender", "webhook", "device-plugin", "node-runtime"}
    assert names == expected | ({"dra-driver"} if values else set()), names
    for where, spec in containers:
        _check(where, spec)


def test_dra_driver_serves_the_port_its_probes_ask(helm: Path, tmp_path: Path) -> None:
    """dra-driver.toml listens on all addresses at dra.metricsPort, the probes' port; 0
    turns the endpoint and the probes off."""
    docs = render(helm, tmp_path, {"dra": {"enabled": True, "metricsPort": 9500}})
    text = config_map_file(docs, "arkgpu-dra", "dra-driver.toml")
    config = config_from_dict(tomllib.loads(text), "dra-driver.toml", {"NODE_NAME": "n1"})
    driver = container(find(docs, "DaemonSet", "arkgpu-dra"), "dra-driver")
    assert (config.listen_address, config.port) == ("0.0.0.0", 9500)
    assert driver["ports"] == [{"name": "dra-metrics", "containerPort": 9500, "protocol": "TCP"}]
    assert driver["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "dra-metrics"}
    assert driver["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "dra-metrics"}
    off = render(helm, tmp_path, {"dra": {"enabled": True, "metricsPort": 0}})
    text = config_map_file(off, "arkgpu-dra", "dra-driver.toml")
    assert config_from_dict(tomllib.loads(text), "dra-driver.toml", {"NODE_NAME": "n"}).port == 0
    driver = container(find(off, "DaemonSet", "arkgpu-dra"), "dra-driver")
    assert not {"ports", "livenessProbe", "readinessProbe"} & set(driver)
