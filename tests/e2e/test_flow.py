"""One pod's whole path on the real control plane: webhook, kube-scheduler, extender, device plugin.

Pods are written as for HAMi (``nvidia.com/gpu``, ``gpumem``, ``gpucores``; no
``schedulerName``). The real kube-apiserver calls ``arkgpu webhook run``, which
sends them to the ``arkgpu-scheduler`` profile; the real kube-scheduler calls
``arkgpu extender run``, which places and binds them; ``arkgpu device-plugin
run`` (on the fake NVML of the one node, driven by the kubelet emulator)
published the node's GPUs and turns each pod's assignment into its control
region. Each is a real process; the other e2e modules test each part alone.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from arkgpu.k8s import contract
from arkgpu.k8s.deviceplugin.allocating import region_key
from arkgpu.limiter.region import read_limits
from k8s.device_manager import PodSpec

from .controlplane import ExtenderPlane
from .extender_helpers import GROUP_LABEL, ExtenderProcess, check_consistent, pods_json, wait_bound
from .nodes import create_gpu_node, wait_for
from .plugin_helpers import WAIT_S, running_plugin
from .webhook_helpers import container, pod_body, refusal, registered, running_webhook

PODS = 3
BIND_TIMEOUT_S = 120.0
"""All pods bound through webhook, scheduler and extender, on a loaded 2-core machine."""


@pytest.fixture
def plane_api(extender_plane: ExtenderPlane) -> Iterator[k8s.ApiClient]:
    """An admin client of the extender's control plane."""
    with extender_plane.plane.api_client() as api:
        yield api


def _namespace(api: k8s.ApiClient) -> str:
    core = k8s.CoreV1Api(api)
    name = f"flow-{uuid.uuid4().hex[:8]}"
    core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=name)))
    core.create_namespaced_service_account(
        name, k8s.V1ServiceAccount(metadata=k8s.V1ObjectMeta(name="default"))
    )
    return name


def _hami_pod(name: str, group: str) -> dict[str, Any]:
    """A pod as HAMi's users write it, kept on this test's node by a label."""
    body = pod_body(name, container(gpu="1", gpumem="3000", gpucores="30"))
    body["spec"]["nodeSelector"] = {GROUP_LABEL: group}
    return body


def _inventory(api: k8s.ApiClient, node: str) -> contract.NodeInventory | None:
    notes = k8s.CoreV1Api(api).read_node(node).metadata.annotations or {}
    text = notes.get(contract.ANNOTATION_INVENTORY)
    return contract.NodeInventory.from_json(text) if text else None


def _events(api: k8s.ApiClient, namespace: str) -> list[str]:
    """What the scheduler said about the namespace's pods (for a failure's message)."""
    items = k8s.CoreV1Api(api).list_namespaced_event(namespace).items
    return [f"{e.involved_object.name}: {e.reason}: {e.message}" for e in items]


def test_hami_pods_through_webhook_scheduler_extender_and_device_plugin(
    extender_plane: ExtenderPlane,
    plane_api: k8s.ApiClient,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Three HAMi-style pods are mutated to ArkGPU's scheduler, placed by the extender on the
    node's two fake GPUs (never over 100%), bound, and Allocate'd by the device plugin into
    regions holding their 30% and 3000 MiB; a pod asking 101% is refused with its reason."""
    api, core = plane_api, k8s.CoreV1Api(plane_api)
    namespace, group = _namespace(api), uuid.uuid4().hex[:8]
    node = f"flow-{group}"
    create_gpu_node(api, node, gpus=20)
    core.patch_node(node, {"metadata": {"labels": {GROUP_LABEL: group}}})
    extender = ExtenderProcess(extender_plane)
    with (
        running_plugin(extender_plane.plane.admin_kubeconfig, node) as (kubelet, regions),
        running_webhook(
            extender_plane.plane, Path(tmp_path_factory.mktemp("flow-webhook"))
        ) as hook,
        registered(api, hook, namespace),
    ):
        shown = wait_for(lambda: _inventory(api, node), WAIT_S, "the plugin's inventory")
        assert [g.uuid for g in shown.gpus] == ["GPU-fake-0", "GPU-fake-1"]
        extender.start()
        try:
            bad = pod_body("too-much", container(gpu="1", gpucores="101"))
            assert "gpucores" in (refusal(api, namespace, bad) or "")
            for i in range(PODS):
                core.create_namespaced_pod(namespace, _hami_pod(f"infer-{i}", group))
            try:
                pods = wait_bound(api, namespace, PODS, BIND_TIMEOUT_S)
            except AssertionError as exc:
                notes = [p["metadata"].get("annotations") for p in pods_json(api, namespace)]
                raise AssertionError(
                    f"{exc}; events: {_events(api, namespace)}; annotations: {notes}; "
                    f"inventory now: {_inventory(api, node)}"
                ) from None
        finally:
            extender.kill()
        assert check_consistent(pods) == PODS
        used = {
            json.loads(p["metadata"]["annotations"][contract.ANNOTATION_ASSIGNMENT])["gpus"][0][
                "uuid"
            ]
            for p in pods
        }
        assert used == {"GPU-fake-0", "GPU-fake-1"}  # 3 x 3000 MiB do not fit one 8 GiB GPU
        for pod in pods:
            notes = pod["metadata"]["annotations"]
            assert pod["spec"]["schedulerName"] == contract.SCHEDULER_NAME  # the webhook's
            assert contract.ANNOTATION_QOS not in notes  # the chart's webhook adds no class
            placed = json.loads(notes[contract.ANNOTATION_ASSIGNMENT])
            assert placed["node"] == pod["spec"]["nodeName"] == node
            assert [(g["share_bp"], g["memory_mib"]) for g in placed["gpus"]] == [(3000, 3000)]
        kubelet.wait(lambda: kubelet.endpoints and kubelet.devices(), WAIT_S, "registration")
        for pod in pods:
            spec = PodSpec(namespace, pod["metadata"]["name"], (("main", 1),))
            region = regions / region_key(kubelet.admit_pod(spec)["main"])
            kubelet.start_container(spec, "main")
            limits = read_limits(region)
            assert (limits.share_bp, limits.memory_bytes[0]) == (3000, 3000 << 20)
