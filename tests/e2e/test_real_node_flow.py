"""A pod's whole path on the real node with the chart installed: webhook, kube-scheduler,
extender, device plugin, container.

These replace the emulated-kubelet tests ``test_flow.py`` and ``test_device_plugin.py``
(their mapping: docs/studies/real-node.md). The chart is installed once for the module
(``node_chart.installed_chart``: the image ``make image`` builds, the real helm, the values
file users are shown); pods are manifests of the repository applied with ``kubectl apply
-f``. Every ArkGPU component is the chart's pod; the kubelet and containerd are real.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from arkgpu.k8s import contract
from arkgpu.k8s import hami_compat as hc
from arkgpu.k8s.deviceplugin.allocating import OWNER_KEY
from arkgpu.k8s.deviceplugin.containers import POD_FILE
from arkgpu.limiter.region import Limits, read_limits
from arkgpu.node.pods import PodSpec, read_pod

from .chart_pods import wait_region
from .hami_pods import example, placed_rows, row_id, rows
from .node_chart import (
    MANIFESTS,
    Chart,
    build_arkgpu_image,
    build_scheduler_image,
    installed_chart,
)
from .node_gpu_pods import MIB, get_pod, new_namespace, report, wait_output
from .node_images import WORKLOAD_IMAGE, build_workload_image
from .node_pods import apply_manifest
from .node_runtime import ctr
from .processes import ControlPlaneError
from .realnode import RealNode

REGIONS = Path("/run/arkgpu/regions")
"""The chart's regions folder (values.yaml: node.regionsDir)."""
HAMI = ("infer-0", "infer-1", "infer-2")
"""The HAMi pods of ``manifests/flow-pods.yaml``: 3,000 MiB and 40% each."""
LC = "lc-infer"
"""Its LC pod: 2,000 MiB and 20%, ``resnet50`` with a 200 ms target."""
IMAGES = ("docker.io/arkgpu/arkgpu:", "registry.k8s.io/kube-scheduler:", WORKLOAD_IMAGE)
"""The images the chart and the pods run, as containerd names them (without their tags:
the chart's version and the cluster's)."""


def _loaded(node: RealNode) -> set[str]:
    """Which of :data:`IMAGES` the node's containerd has (an earlier module of the session,
    ``test_real_node_chart.py``, imports the same builds of this checkout)."""
    names = ctr(node.paths, "images", "ls", "-q").split()
    return {image for image in IMAGES if any(n.startswith(image) for n in names)}


@pytest.fixture(scope="module")
def chart(real_node: RealNode, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chart]:
    """ArkGPU's, kube-scheduler's and the CUDA workload image loaded (built and imported only
    when missing: ArkGPU's takes about 30 s to pack even from its cache); the chart
    installed, every pod Ready; uninstalled at the end."""
    out = tmp_path_factory.mktemp("flow-images")
    builds: dict[str, Callable[[], Path]] = {
        IMAGES[0]: lambda: build_arkgpu_image(out / "arkgpu.tar"),
        IMAGES[1]: lambda: build_scheduler_image(out / "scheduler.tar", real_node),
        IMAGES[2]: lambda: build_workload_image(out),
    }
    loaded = _loaded(real_node)
    for image, build in builds.items():
        if image not in loaded:
            real_node.import_image(build())
    with installed_chart(real_node) as installed:
        yield installed


@pytest.fixture
def namespace(chart: Chart) -> Iterator[str]:
    """A fresh namespace, deleted (without waiting) after the test."""
    name = new_namespace(chart.node)
    yield name
    chart.node.kubectl("delete", "namespace", name, "--wait=false")


def test_the_device_plugin_publishes_the_nodes_gpus_in_its_inventory(chart: Chart) -> None:
    """The chart's device plugin writes both fake GPUs, by index, UUID and memory, healthy,
    into the Node's inventory annotation (the extender places pods from it)."""
    node = chart.node
    got = json.loads(node.kubectl("get", "node", node.name, "-o", "json"))
    text = got["metadata"].get("annotations", {}).get(contract.ANNOTATION_INVENTORY)
    assert text, got["metadata"].get("annotations")
    shown = contract.NodeInventory.from_json(text)
    memory = node.gpu.config.memory_mib
    assert [(g.index, g.uuid, g.memory_mib, g.healthy) for g in shown.gpus] == [
        (0, node.gpu.uuid(0), memory, True),
        (1, node.gpu.uuid(1), memory, True),
    ]


def test_a_pod_over_a_whole_gpu_is_refused_with_its_reason(chart: Chart, namespace: str) -> None:
    """``kubectl apply -f manifests/flow-too-much.yaml`` (``gpucores: 101``) fails: the chart's
    webhook refuses the pod, and the message names ``gpucores``; no pod is stored."""
    node = chart.node
    with pytest.raises(ControlPlaneError) as refused:
        node.kubectl("apply", "-n", namespace, "-f", str(MANIFESTS / "flow-too-much.yaml"))
    assert "denied the request" in str(refused.value), refused.value
    assert "gpucores" in str(refused.value), refused.value
    assert node.kubectl("get", "pods", "-n", namespace, "-o", "name").strip() == ""


def _assignment(pod: dict[str, Any]) -> dict[str, Any]:
    placed: dict[str, Any] = json.loads(
        pod["metadata"]["annotations"][contract.ANNOTATION_ASSIGNMENT]
    )
    return placed


def _region(uid: str) -> tuple[Limits, PodSpec]:
    """The limits and ``pod.json`` of the chart's one region whose owner is pod ``uid``."""
    found = []
    for description in REGIONS.glob(f"*/{POD_FILE}"):
        try:
            owner = json.loads(description.read_text(encoding="utf-8")).get(OWNER_KEY)
        except (OSError, ValueError):  # removed or being written
            continue
        if owner == uid:
            found.append(description.parent)
    assert len(found) == 1, f"regions of pod {uid}: {found}"
    return read_limits(found[0]), read_pod(found[0])


def _never_over(node: RealNode, pods: list[dict[str, Any]]) -> None:
    """No GPU is given more than 100% of its compute or more than its memory."""
    share: dict[str, int] = defaultdict(int)
    memory: dict[str, int] = defaultdict(int)
    for pod in pods:
        for gpu in _assignment(pod)["gpus"]:
            share[gpu["uuid"]] += gpu["share_bp"]
            memory[gpu["uuid"]] += gpu["memory_mib"]
    assert max(share.values()) <= 10_000, share
    assert max(memory.values()) <= node.gpu.config.memory_mib, memory


def test_pods_written_for_hami_go_through_webhook_extender_and_device_plugin(
    chart: Chart, namespace: str
) -> None:
    """``kubectl apply -f manifests/flow-pods.yaml``: three HAMi pods (3,000 MiB, 40%) and an
    LC pod are sent to ``arkgpu-scheduler`` by the webhook (which adds no QoS class), placed
    and bound by the extender on the node's two GPUs, never over 100% (120% cannot share one
    GPU), each assignment naming the pod's node. Each container sees the GPU of its
    assignment and the pod's cap; each region holds the pod's cap (and a HAMi pod's share,
    a cap the node runtime keeps); the LC pod's ``pod.json`` carries its class, GPU, model
    and latency target for the node runtime."""
    node = chart.node
    node.kubectl("apply", "-n", namespace, "-f", str(MANIFESTS / "flow-pods.yaml"))
    seen = {name: report(wait_output(node, namespace, name, 2)) for name in (*HAMI, LC)}
    pods = [get_pod(node, namespace, name) for name in (*HAMI, LC)]
    _never_over(node, pods)
    uuids = {_assignment(p)["gpus"][0]["uuid"] for p in pods[: len(HAMI)]}
    assert uuids == {node.gpu.uuid(0), node.gpu.uuid(1)}
    for pod in pods:
        name, notes, placed = (
            pod["metadata"]["name"],
            pod["metadata"]["annotations"],
            _assignment(pod),
        )
        assert pod["spec"]["schedulerName"] == contract.SCHEDULER_NAME, name
        assert placed["node"] == pod["spec"]["nodeName"] == node.name, name
        [gpu] = placed["gpus"]
        assert seen[name].visible == gpu["uuid"], (name, seen[name], placed)
        assert seen[name].total_bytes == gpu["memory_mib"] * MIB, (name, seen[name], placed)
        limits, described = _region(pod["metadata"]["uid"])
        assert limits.memory_bytes == (gpu["memory_mib"] * MIB,), name
        assert described.gpu == gpu["index"], name
        if name in HAMI:
            assert contract.ANNOTATION_QOS not in notes, name
            assert (gpu["share_bp"], gpu["memory_mib"]) == (4000, 3000), name
            assert limits.share_bp == 4000, name
    lc = pods[-1]
    assert _assignment(lc)["gpus"][0]["memory_mib"] == 2000
    _, described = _region(lc["metadata"]["uid"])
    assert (described.kind, described.model, described.target_ms) == ("lc", "resnet50", 200.0)


SUPPORTED = rows(hc.Behaviour.SAME, hc.Behaviour.DIFFERENT)
"""The HAMi contract's rows a pod keeps working with (:mod:`arkgpu.k8s.hami_compat`)."""
GPU_MIB = 16384
"""Memory of each of the real node's fake GPUs (``FakeGpuConfig.memory_mib``)."""


@pytest.mark.parametrize("row", SUPPORTED, ids=row_id)
def test_each_supported_hami_row_runs_under_the_limits_the_contract_says(
    chart: Chart, namespace: str, row: hc.Row, tmp_path: Path
) -> None:
    """The row's example pod (:mod:`.hami_pods`, as HAMi's users write it), applied with
    ``kubectl apply -f``: the webhook keeps it a HAMi pod (no class added, the priority
    resource removed), the extender places it as the contract says, and its container
    starts with the region the device plugin gave it: the share and a cap per GPU, and a
    ``pod.json`` that keeps the node runtime off its share."""
    node = chart.node
    body = {"apiVersion": "v1", "kind": "Pod", **example(row).pod("row")}
    body["spec"]["terminationGracePeriodSeconds"] = 0
    container = body["spec"]["containers"][0]
    container.update(image=WORKLOAD_IMAGE, imagePullPolicy="Never",
                     command=["/bin/sh", "-c", "exec sleep 3600"])  # fmt: skip
    apply_manifest(node, namespace, body, tmp_path)
    region = REGIONS / wait_region(namespace, "row")
    pod = get_pod(node, namespace, "row")
    gpus, (share, caps) = placed_rows(GPU_MIB)[(row.field, row.value)]
    assert hc.RESOURCE_PRIORITY not in pod["spec"]["containers"][0]["resources"]["limits"]
    assert contract.ANNOTATION_QOS not in pod["metadata"]["annotations"]
    placed = json.loads(pod["metadata"]["annotations"][contract.ANNOTATION_ASSIGNMENT])
    got = [(g["uuid"], g["share_bp"], g["memory_mib"]) for g in placed["gpus"]]
    assert got == [(u or got[0][0], s, m) for u, s, m in gpus]
    limits = read_limits(region)
    assert limits.share_bp == share
    assert limits.memory_bytes == tuple(c * MIB if c else None for c in caps)
    description = json.loads((region / POD_FILE).read_text(encoding="utf-8"))
    assert description["elastic"] is False
    index = {g["uuid"]: g["index"] for g in placed["gpus"]}
    assert description["gpus"] == [index[u] for u in sorted(index)]
    node.kubectl("delete", "pod", "row", "-n", namespace, "--grace-period=0", "--force",
                 "--wait=true")  # fmt: skip
