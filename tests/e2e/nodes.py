"""Nodes and pods through the API, without a kubelet (as Kubernetes' scheduler benchmarks do)."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from typing import TypeVar

from kubernetes import client as k8s

T = TypeVar("T")

GPU = "nvidia.com/gpu"
TEST_LABEL = "e2e.arkgpu.io/node"
"""Label on every test node; pods select their test's node with it, so tests sharing the
session's control plane never schedule onto each other's nodes."""


def create_gpu_node(api: k8s.ApiClient, name: str, gpus: int) -> k8s.V1Node:
    """A Ready, untainted node with ``gpus`` × ``nvidia.com/gpu`` allocatable.

    What a kubelet and the node lifecycle controller would do: the status
    (capacity, allocatable, the Ready condition) goes through the status
    subresource, and the ``node.kubernetes.io/not-ready`` taint that admission
    puts on every new node is removed once the node is Ready.
    """
    core = k8s.CoreV1Api(api)
    core.create_node(k8s.V1Node(metadata=k8s.V1ObjectMeta(name=name, labels={TEST_LABEL: name})))
    resources = {"cpu": "64", "memory": "512Gi", "pods": "110", GPU: str(gpus)}
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    ready = {
        "type": "Ready",
        "status": "True",
        "reason": "KubeletReady",
        "message": "created by the ArkGPU end-to-end tests",
        "lastHeartbeatTime": now,
        "lastTransitionTime": now,
    }
    status = {"capacity": resources, "allocatable": resources, "conditions": [ready]}
    core.patch_node_status(name, {"status": status})
    return core.patch_node(name, {"spec": {"taints": None}})


def gpu_pod(name: str, node: str, gpus: int) -> k8s.V1Pod:
    """A pod asking for ``gpus`` × ``nvidia.com/gpu``, allowed only onto ``node``.

    The image is never pulled: no kubelet runs.
    """
    container = k8s.V1Container(
        name="main",
        image="registry.invalid/arkgpu-e2e:never-pulled",
        resources=k8s.V1ResourceRequirements(limits={GPU: str(gpus)}),
    )
    return k8s.V1Pod(
        metadata=k8s.V1ObjectMeta(name=name),
        spec=k8s.V1PodSpec(containers=[container], node_selector={TEST_LABEL: node}),
    )


def wait_for(probe: Callable[[], T | None], timeout_s: float, what: str, poll_s: float = 0.25) -> T:
    """Polls ``probe`` until it returns something other than None; fails after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = probe()
        if value is not None:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout_s:.0f} s")
        time.sleep(poll_s)
