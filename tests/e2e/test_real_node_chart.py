"""ArkGPU installed by its Helm chart on the real node: every component runs as the chart's pod.

The node is the real kubelet and containerd with kube-proxy and CoreDNS
(``realnode``); the chart is installed once for the module with the real helm, the
image ``make image`` builds and the values file users are shown (``node_chart``). Its
node pods get the fake GPU driver from NVIDIA's runtime class (a stand-in for NVIDIA's
runtime in CDI mode, ``nvidia_runtime.py``); GPU pods get their GPU as CDI devices.
Manifests are files of the repository applied with ``kubectl apply -f``.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from arkgpu.k8s import contract

from . import node_host
from .node_chart import (
    MANIFESTS,
    NAMESPACE,
    RELEASE,
    Chart,
    build_arkgpu_image,
    build_scheduler_image,
    installed_chart,
)
from .node_images import build_workload_image
from .node_pods import POD_WAIT_S, wait_succeeded
from .realnode import RealNode

MIB = 1 << 20
CAP_MIB = 3000
SHARE = 0.30
HOST_PATHS = ("/run/arkgpu/regions", "/usr/local/lib/arkgpu", "/run/arkgpu/preload")
"""The chart's default host paths (values.yaml: node.regionsDir, libraryDir, preloadDir)."""
PLUGIN_DIR = Path("/var/lib/kubelet/device-plugins")
"""node.kubeletDevicePluginsDir: the kubelet's own socket and the plugins'."""
REGION_GC_WAIT_S = 240.0
"""Bound for the device plugin to remove the regions of deleted pods: its default
``region_grace_s`` (60 s) after the last write, then its next scan; room for a load of 8."""
UNINSTALL_WAIT_S = 180.0
COMPONENT = "app.kubernetes.io/component"
METRICS_PORT = 9402
"""The node runtime's metrics port (values.yaml: node.runtime.metricsPort)."""
"""Bound for the release's pods to be gone after ``helm uninstall`` (seconds when idle)."""


@pytest.fixture(scope="module")
def images_node(real_node: RealNode, tmp_path_factory: pytest.TempPathFactory) -> RealNode:
    """The node with ArkGPU's image, kube-scheduler's and the CUDA workload image loaded."""
    out = tmp_path_factory.mktemp("chart-images")
    real_node.import_image(build_arkgpu_image(out / "arkgpu.tar"))
    real_node.import_image(build_scheduler_image(out / "scheduler.tar", real_node))
    real_node.import_image(build_workload_image(out))
    return real_node


@pytest.fixture(scope="module")
def chart(images_node: RealNode) -> Iterator[Chart]:
    """The chart installed, every pod Ready; uninstalled at the end unless a test did."""
    with installed_chart(images_node) as installed:
        yield installed


def _namespace(node: RealNode) -> str:
    name = f"chart-{uuid.uuid4().hex[:8]}"
    node.kubectl("create", "namespace", name)
    deadline = time.monotonic() + POD_WAIT_S
    while "default" not in node.kubectl("get", "serviceaccounts", "-n", name, "-o", "name"):
        assert time.monotonic() < deadline, "no default ServiceAccount"
        time.sleep(0.5)
    return name


def _apply(node: RealNode, namespace: str, manifest: str) -> None:
    node.kubectl("apply", "-n", namespace, "-f", str(MANIFESTS / manifest))


def test_a_pod_reaches_the_api_server_through_the_kubernetes_service(
    images_node: RealNode,
) -> None:
    """A pod calls the API server as in-cluster clients do: at 10.96.0.1 (kube-proxy's
    rules to the advertised node address), the certificate checked against the
    ServiceAccount's CA, authenticated by its token as its own ServiceAccount."""
    namespace = _namespace(images_node)
    _apply(images_node, namespace, "api-client-pod.yaml")
    got = wait_succeeded(images_node, namespace, "api-client").split()
    assert got == ["10.96.0.1", f"system:serviceaccount:{namespace}:default"]


def test_every_chart_pod_becomes_ready_under_the_kubelets_probes(chart: Chart) -> None:
    """The scheduler, extender, webhook and node pods run on the real node, every container
    has liveness and readiness probes and is Ready (the real kubelet ran them); the device
    plugin pod registered the fake GPUs (2 GPUs x splitCount 10)."""
    pods = chart.pods()
    for pod in pods:
        for spec in pod["spec"]["containers"]:
            name = f"{pod['metadata']['name']}/{spec['name']}"
            assert "livenessProbe" in spec, name
            assert "readinessProbe" in spec, name
        statuses = pod["status"]["containerStatuses"]
        assert all(s["ready"] for s in statuses), pod["status"]
    node = json.loads(chart.node.kubectl("get", "node", chart.node.name, "-o", "json"))
    assert node["status"]["allocatable"][contract.RESOURCE_GPU] == "20"


def _pod(node: RealNode, namespace: str, name: str) -> dict[str, Any]:
    got = node.kubectl("get", "pod", name, "-n", namespace, "-o", "json")
    return dict(json.loads(got))


def test_a_hami_pod_runs_under_its_cap_and_share(chart: Chart) -> None:
    """A pod written for HAMi (``manifests/hami-pod.yaml``): the chart's webhook sends it to
    arkgpu-scheduler, the chart's kube-scheduler and extender bind it with its assignment,
    the chart's device plugin gives it the GPU and the limiter. Inside: the CUDA memory
    query reports 3,000 MiB, a second 2,000 MiB allocation is out of memory, and 2 ms
    kernels back to back for 5 s keep the GPU busy 30 +- 3% of the time."""
    node = chart.node
    namespace = _namespace(node)
    _apply(node, namespace, "hami-pod.yaml")
    lines = wait_succeeded(node, namespace, "hami-cubench").splitlines()
    pod = _pod(node, namespace, "hami-cubench")
    assert pod["spec"]["schedulerName"] == contract.SCHEDULER_NAME
    assignment = json.loads(pod["metadata"]["annotations"][contract.ANNOTATION_ASSIGNMENT])
    assert assignment["node"] == node.name, assignment
    assert [(g["memory_mib"], g["share_bp"]) for g in assignment["gpus"]] == [(CAP_MIB, 3000)]
    free, total = (int(x) for x in lines[0].split())
    assert total == CAP_MIB * MIB
    assert free <= total
    assert lines[1].startswith("ok ")
    assert lines[2] == "oom"
    run = json.loads(lines[3])
    assert run["error"] == 0
    assert abs(run["share"] - SHARE) <= 0.03, run["share"]
    samples = _runtime_samples(chart, _region_of(namespace, "hami-cubench"))
    assert samples["arkgpu_container_share_ratio"] == pytest.approx(SHARE)
    assert samples["arkgpu_container_memory_cap_bytes"] == CAP_MIB * MIB
    node.kubectl("delete", "namespace", namespace, "--wait=true", timeout_s=POD_WAIT_S)


def _region_of(namespace: str, name: str) -> str:
    """The region folder the chart's device plugin made for pod ``namespace/name``."""
    for description in Path(HOST_PATHS[0]).glob("*/pod.json"):
        pod = json.loads(description.read_text(encoding="utf-8"))
        if (pod.get("namespace"), pod.get("pod")) == (namespace, name):
            return description.parent.name
    raise AssertionError(f"no region of {namespace}/{name} in {HOST_PATHS[0]}")


def _runtime_samples(chart: Chart, region: str) -> dict[str, float]:
    """The node runtime's samples of ``region``'s container, scraped through the API
    server's proxy to the node pod's metrics port (waits for the runtime to adopt the
    region: one control period when idle)."""
    pod = next(p for p in chart.pods() if p["metadata"]["labels"].get(COMPONENT) == "node")
    name, port = pod["metadata"]["name"], METRICS_PORT
    path = f"/api/v1/namespaces/{NAMESPACE}/pods/{name}:{port}/proxy/metrics"
    deadline = time.monotonic() + POD_WAIT_S
    while True:
        text = chart.node.kubectl("get", "--raw", path)
        found = {}
        for line in text.splitlines():
            if line.startswith("arkgpu_container_") and f'region="{region}"' in line:
                found[line.split("{")[0]] = float(line.rsplit(" ", 1)[1])
        if found:
            return found
        assert time.monotonic() < deadline, f"no sample of {region}:\n{text[-3000:]}"
        time.sleep(1.0)


def _regions() -> list[str]:
    """The region folders in the chart's regions folder (its dot files are not regions)."""
    folder = Path(HOST_PATHS[0])
    if not folder.exists():
        return []
    return sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))


def test_helm_uninstall_leaves_the_node_as_it_was(chart: Chart) -> None:
    """Once the GPU pods are gone and the device plugin removed their regions (after its
    ``region_grace_s``, 60 s by default), ``helm uninstall``: the release's pods are gone, no
    region is left in the regions folder, nothing is mounted under the chart's host paths,
    and no plugin socket but the kubelet's own is in its device-plugins folder."""
    deadline = time.monotonic() + REGION_GC_WAIT_S
    while _regions():
        assert time.monotonic() < deadline, f"regions never removed: {_regions()}"
        time.sleep(1.0)
    chart.run("uninstall", RELEASE, "--namespace", NAMESPACE, "--wait")
    deadline = time.monotonic() + UNINSTALL_WAIT_S
    while chart.pods():
        assert time.monotonic() < deadline, [p["metadata"]["name"] for p in chart.pods()]
        time.sleep(1.0)
    assert _regions() == []
    assert node_host.mounts_under(list(HOST_PATHS)) == []
    sockets = sorted(p.name for p in PLUGIN_DIR.iterdir() if p.is_socket())
    assert sockets == ["kubelet.sock"]
