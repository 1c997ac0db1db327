"""Nodes and pods through the API, without a kubelet (as Kubernetes' scheduler benchmarks do)."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from kubernetes import client as k8s

from .kube_types import body as json_body
from .kube_types import loaded

T = TypeVar("T")
U = TypeVar("U")

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


def node_body(
    name: str,
    resources: Mapping[str, str],
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
) -> dict[str, Any]:
    """A Node as a kubelet registers it: status (capacity, allocatable, Ready) in the create.

    The API server keeps a new node's status; only the not-ready taint that admission
    adds (TaintNodesByCondition) is left for ``create_nodes`` to lift.
    """
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    ready = {
        "type": "Ready",
        "status": "True",
        "reason": "KubeletReady",
        "message": "created by the ArkGPU end-to-end tests",
        "lastHeartbeatTime": now,
        "lastTransitionTime": now,
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": dict(labels), "annotations": dict(annotations)},
        "status": {
            "capacity": dict(resources),
            "allocatable": dict(resources),
            "conditions": [ready],
        },
    }


def concurrently(work: Callable[[T], U], items: Iterable[T], workers: int) -> list[U]:
    """``work`` over ``items`` on ``workers`` threads, results in order; the first error raises.

    The client spends most of a request waiting on the API server, so threads overlap
    requests well despite the GIL. The client's connection pool must allow ``workers``
    connections (``Configuration.connection_pool_maxsize``), else requests queue for one.
    """
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(work, items))


def create_node(core: k8s.CoreV1Api, body: Mapping[str, Any]) -> None:
    """Creates one node from ``node_body`` and lifts the taints admission put on it.

    Raw JSON in and out (``_preload_content=False``): decoding into the client's models
    costs more CPU than the request itself.
    """
    created = loaded(core.create_node(json_body(body), _preload_content=False))
    if created.get("spec", {}).get("taints"):
        core.patch_node(created["metadata"]["name"], {"spec": {"taints": None}})


def create_nodes(api: k8s.ApiClient, bodies: list[dict[str, Any]], workers: int) -> float:
    """Creates ``bodies`` (``node_body``) on ``workers`` threads; returns the seconds taken."""
    core = k8s.CoreV1Api(api)
    start = time.monotonic()
    concurrently(lambda body: create_node(core, body), bodies, workers)
    return time.monotonic() - start


def create_namespace(api: k8s.ApiClient, name: str) -> None:
    """A namespace with its ``default`` ServiceAccount (no controller manager creates it)."""
    core = k8s.CoreV1Api(api)
    core.create_namespace(json_body({"metadata": {"name": name}}), _preload_content=False)
    core.create_namespaced_service_account(
        name, json_body({"metadata": {"name": "default"}}), _preload_content=False
    )


def create_pods(
    api: k8s.ApiClient,
    namespace: str,
    bodies: list[dict[str, Any]],
    workers: int,
    rate: float = 0.0,
) -> dict[str, float]:
    """Creates ``bodies`` on ``workers`` threads, as fast as they go or, with ``rate``, pod
    ``i`` at ``i / rate`` s from the start; returns each pod's send time (monotonic s)."""
    core = k8s.CoreV1Api(api)
    start = time.monotonic()

    def create(item: tuple[int, dict[str, Any]]) -> tuple[str, float]:
        index, body = item
        if rate > 0:
            time.sleep(max(0.0, start + index / rate - time.monotonic()))
        sent = time.monotonic()
        core.create_namespaced_pod(namespace, json_body(body), _preload_content=False)
        return str(body["metadata"]["name"]), sent

    return dict(concurrently(create, enumerate(bodies), workers))


def delete_pods(api: k8s.ApiClient, namespace: str, timeout_s: float) -> None:
    """Deletes every pod of ``namespace`` at once (no grace: no kubelet confirms); waits."""
    core = k8s.CoreV1Api(api)
    core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0, _preload_content=False)

    def gone() -> bool | None:
        left = loaded(core.list_namespaced_pod(namespace, limit=1, _preload_content=False))
        return True if not left["items"] else None

    wait_for(gone, timeout_s, f"pods of {namespace} deleted", poll_s=0.5)
