"""The real kube-scheduler places pods by ``nvidia.com/gpu`` on nodes created through the API.

Pins the foundation the extender, webhook and device plugin tests build on:
the control plane starts, admits the admin client certificate, accepts nodes
without a kubelet, and its scheduler honours extended resources.
"""

from __future__ import annotations

import uuid

from kubernetes import client as k8s

from .controlplane import ControlPlane
from .kube_types import filled
from .nodes import create_gpu_node, gpu_pod, wait_for

BIND_TIMEOUT_S = 60.0
"""Generous bound for one scheduling cycle (milliseconds when idle) on a loaded 2-core machine."""


def test_control_plane_serves_version_1_37(control_plane: ControlPlane, api: k8s.ApiClient) -> None:
    """The API server is the version built (the build stamps it into the binary)."""
    info = k8s.VersionApi(api).get_code()
    assert (info.major, info.minor) == ("1", "37")
    assert info.git_version.startswith("v1.37.")


def test_scheduler_binds_gpu_pod_and_rejects_oversized(api: k8s.ApiClient, namespace: str) -> None:
    """1 of 4 GPUs: bound to the node; 5 of 4: Pending, a FailedScheduling names the GPU."""
    core = k8s.CoreV1Api(api)
    node = f"gpu-node-{uuid.uuid4().hex[:8]}"
    created = create_gpu_node(api, node, gpus=4)
    assert filled(created.spec).taints is None
    assert filled(filled(created.status).allocatable)["nvidia.com/gpu"] == "4"

    core.create_namespaced_pod(namespace, gpu_pod("fits", node, gpus=1))
    core.create_namespaced_pod(namespace, gpu_pod("too-big", node, gpus=5))

    def bound() -> str | None:
        return filled(core.read_namespaced_pod("fits", namespace).spec).node_name or None

    assert wait_for(bound, BIND_TIMEOUT_S, "pod 'fits' bound") == node

    def failed_scheduling() -> str | None:
        events = core.list_namespaced_event(
            namespace, field_selector="involvedObject.kind=Pod,involvedObject.name=too-big"
        ).items
        messages = [e.message for e in events if e.reason == "FailedScheduling"]
        return messages[0] if messages else None

    message = wait_for(failed_scheduling, BIND_TIMEOUT_S, "FailedScheduling for 'too-big'")
    assert "Insufficient nvidia.com/gpu" in message

    def unschedulable() -> k8s.V1Pod | None:
        # The event and the pod's status are written separately: wait for the status too.
        pod = core.read_namespaced_pod("too-big", namespace)
        scheduled = [c for c in filled(pod.status).conditions or [] if c.type == "PodScheduled"]
        return pod if scheduled else None

    big = wait_for(unschedulable, BIND_TIMEOUT_S, "PodScheduled condition of 'too-big'")
    assert filled(big.spec).node_name is None
    status = filled(big.status)
    assert status.phase == "Pending"
    scheduled = [c for c in filled(status.conditions) if c.type == "PodScheduled"]
    assert [(c.status, c.reason) for c in scheduled] == [("False", "Unschedulable")]
    assert "nvidia.com/gpu" in filled(scheduled[0].message)
