"""The device plugin against the real API server: inventory on the Node, Allocate for a bound pod.

``arkgpu device-plugin run`` runs as a process on the fake NVML (two GPUs of
8 GiB) with the admin kubeconfig, driven by the kubelet emulator over real Unix
sockets. The pod's assignment is written by the test (the extender's part is
tested on its own); the pod is bound by setting ``spec.nodeName`` at creation.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client as k8s

from arkgpu.k8s import contract
from arkgpu.k8s.contract import AssignedGpu, NodeInventory, PodAssignment
from arkgpu.k8s.deviceplugin.allocating import region_key
from arkgpu.limiter.region import read_limits
from arkgpu.node.pods import read_pod
from k8s.device_manager import PodSpec
from k8s.kubelet_emulator import KubeletEmulator

from .controlplane import ControlPlane
from .nodes import create_gpu_node, gpu_pod, wait_for
from .plugin_helpers import WAIT_S, running_plugin


@pytest.fixture
def plugin_on_node(
    control_plane: ControlPlane, api: k8s.ApiClient
) -> Iterator[tuple[str, KubeletEmulator, Path]]:
    """A node through the API, the emulator, and the plugin process serving that node."""
    node = f"dp-node-{uuid.uuid4().hex[:8]}"
    create_gpu_node(api, node, gpus=20)
    with running_plugin(control_plane.admin_kubeconfig, node) as (kubelet, regions):
        yield node, kubelet, regions


def test_inventory_on_the_node_and_allocate_for_an_assigned_pod(
    api: k8s.ApiClient, namespace: str, plugin_on_node: tuple[str, KubeletEmulator, Path]
) -> None:
    """The Node gets both fake GPUs in its inventory annotation. A pod bound there with an
    assignment (GPU 1, 25% and 3000 MiB, LC) is admitted by the kubelet; at PreStartContainer
    the plugin finds it through PodResources and reads it from the API server: its region holds
    those limits and its pod.json."""
    node, kubelet, regions = plugin_on_node
    core = k8s.CoreV1Api(api)

    def inventory() -> NodeInventory | None:
        notes = core.read_node(node).metadata.annotations or {}
        text = notes.get(contract.ANNOTATION_INVENTORY)
        return NodeInventory.from_json(text) if text else None

    shown = wait_for(inventory, WAIT_S, "inventory annotation on the node")
    assert [(g.index, g.uuid, g.memory_mib, g.healthy) for g in shown.gpus] == [
        (0, "GPU-fake-0", 8192, True),
        (1, "GPU-fake-1", 8192, True),
    ]

    assignment = PodAssignment(node, (AssignedGpu(1, "GPU-fake-1", 3000, 2500),), qos="lc")
    pod = gpu_pod("infer", node, gpus=1)
    pod.metadata.annotations = {
        contract.ANNOTATION_ASSIGNMENT: assignment.to_json(),
        contract.ANNOTATION_QOS: "lc",
        contract.ANNOTATION_LATENCY_TARGET_MS: "40",
        contract.ANNOTATION_MODEL: "resnet50",
    }
    pod.spec.node_name = node
    core.create_namespaced_pod(namespace, pod)

    kubelet.wait(lambda: kubelet.endpoints and kubelet.devices(), WAIT_S, "registration")
    assert len(kubelet.devices()) == 20
    spec = PodSpec(namespace, "infer", (("main", 1),))
    chosen = kubelet.admit_pod(spec)["main"]
    assert chosen[0].startswith("GPU-fake-1::")
    response = kubelet.start_container(spec, "main")
    assert response.envs["CUDA_VISIBLE_DEVICES"] == "GPU-fake-1"
    region = regions / region_key(chosen)
    limits = read_limits(region)
    assert limits.share_bp == 2500
    assert limits.memory_bytes == (3000 << 20,)
    found = read_pod(region)
    assert (found.kind, found.gpu, found.model, found.target_ms) == ("lc", 1, "resnet50", 40.0)
