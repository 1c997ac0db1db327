"""The study's three ways onto the same nodes: DRA (index or pack order) and the extender.

Each path creates its copy of the scaled-down nodes (names prefixed by the path, a
label ``study.arkgpu.io/path`` the pods select, so paths never share nodes), submits
a trace pod its way, and reads back how much GPU compute the scheduler allocated, in
milli-GPUs:

- ``dra`` / ``dra_pack``: a ResourceSlice per node written with the driver's code
  (:class:`Publisher`, cores step 1, 32 GiB devices so memory never binds); a GPU pod
  is a ResourceClaim (``count`` = num_gpu, ``cores`` = gpu_milli / 10) and a pod of the
  default scheduler; allocated = the claims' consumed ``cores``. ``dra_pack`` also runs
  the driver's ``device_order = "pack"`` (:mod:`arkgpu.k8s.dra.ordering`) on every
  node once a second, as the driver's resync would.
- ``extender``: the device-plugin path: nodes with the inventory annotation, GPU pods of
  ``arkgpu-scheduler`` with HAMi's limits (``gpucores`` = gpu_milli / 10, ``gpumem``
  256 MiB), placed by kube-scheduler with the real ``arkgpu extender run`` (policy
  ``arkgpu``; the e2e tests' scheduler configuration: the extender's score alone);
  allocated = the ``share_bp`` of the bound pods' assignments. CPU-only pods go to the
  default scheduler, as the webhook leaves them.
- ``extender_all``: the same, but CPU-only pods too go through the extender (they name
  ``nvidia.com/gpu: 0``, so kube-scheduler calls it for them), as the simulator places
  every pod with the policy: it separates the policy from the default scheduler's
  placement of the CPU pods.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from kubernetes import client as k8s

from arkgpu.k8s.contract import (
    ANNOTATION_ASSIGNMENT,
    ANNOTATION_INVENTORY,
    RESOURCE_GPU,
    RESOURCE_GPUCORES,
    RESOURCE_GPUMEM,
    SCHEDULER_NAME,
    InventoryGpu,
    NodeInventory,
    PodAssignment,
)
from arkgpu.k8s.dra.ordering import device_loads, ordered
from arkgpu.k8s.dra.publishing import KubernetesSlices, Publisher
from arkgpu.k8s.dra.slices import devices
from arkgpu.model.resources import Node, Pod
from e2e import processes
from e2e.controlplane import (
    ControlPlane,
    free_port,
    running_scheduler,
    write_extender_scheduler_config,
)
from e2e.kube_types import body as json_body
from e2e.kube_types import loaded
from e2e.nodes import create_gpu_node

DRIVER = "gpu.arkgpu.io"
PATH_LABEL = "study.arkgpu.io/path"
GPU_MIB = 32_768
"""Memory of every GPU: requests of 256 MiB never make memory the binding resource."""
IMAGE = "registry.invalid/never-pulled"


def _gpus(node: str, node_model: Node) -> list[InventoryGpu]:
    model = node_model.gpu_model
    return [InventoryGpu(g, f"GPU-{node}-{g}", model, GPU_MIB) for g in range(node_model.num_gpu)]


def create_node(api: k8s.ApiClient, path: str, node: Node) -> str:
    """The path's copy of ``node`` (CPU and memory of the trace, Ready); its name."""
    name = f"{path.replace('_', '-')}-{node.name}".lower()
    create_gpu_node(api, name, node.num_gpu)
    resources = {"cpu": f"{node.cpu_milli}m", "memory": f"{node.memory_mib}Mi", "pods": "250"}
    core = k8s.CoreV1Api(api)
    core.patch_node_status(name, {"status": {"capacity": resources, "allocatable": resources}})
    meta: dict[str, Any] = {"labels": {PATH_LABEL: path}}
    if path.startswith("extender") and node.num_gpu:
        inventory = NodeInventory(tuple(_gpus(name, node)))
        meta["annotations"] = {ANNOTATION_INVENTORY: inventory.to_json()}
    elif node.num_gpu:
        Publisher(KubernetesSlices(api), name, DRIVER).reconcile(devices(_gpus(name, node), 256, 1))
    core.patch_node(name, {"metadata": meta})
    return name


def _container(pod: Pod) -> dict[str, Any]:
    requests = {"cpu": f"{pod.cpu_milli}m", "memory": f"{pod.memory_mib}Mi"}
    return {"name": "main", "image": IMAGE, "resources": {"requests": requests}}


def submit(api: k8s.ApiClient, path: str, namespace: str, index: int, pod: Pod) -> None:
    """Pod ``index`` of the arrivals, the path's way."""
    name = f"p{index:05d}"
    spec: dict[str, Any] = {"nodeSelector": {PATH_LABEL: path}, "containers": [_container(pod)]}
    cores = str(pod.gpu_milli // 10)
    if path.startswith("extender"):
        if pod.num_gpu or path == "extender_all":
            limits = {RESOURCE_GPU: str(pod.num_gpu)}
            if pod.num_gpu:  # extender_all: a CPU pod names nvidia.com/gpu 0, to be asked
                limits.update({RESOURCE_GPUCORES: cores, RESOURCE_GPUMEM: "256"})
            spec["containers"][0]["resources"]["limits"] = limits
            spec["schedulerName"] = SCHEDULER_NAME
    elif pod.num_gpu:
        request = {
            "name": "gpu",
            "exactly": {
                "deviceClassName": DRIVER,
                "count": pod.num_gpu,
                "capacity": {"requests": {"memory": "256Mi", "cores": cores}},
            },
        }
        claim = {"metadata": {"name": name}, "spec": {"devices": {"requests": [request]}}}
        k8s.ResourceV1Api(api).create_namespaced_resource_claim(namespace, json_body(claim))
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": name}]
        spec["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    body = {"metadata": {"name": name}, "spec": spec}
    k8s.CoreV1Api(api).create_namespaced_pod(namespace, json_body(body))


def _claims(api: k8s.ApiClient, namespace: str | None) -> list[dict[str, Any]]:
    resource = k8s.ResourceV1Api(api)
    raw = (
        resource.list_resource_claim_for_all_namespaces(_preload_content=False)
        if namespace is None
        else resource.list_namespaced_resource_claim(namespace, _preload_content=False)
    )
    items: list[dict[str, Any]] = loaded(raw)["items"]
    return items


def allocated_milli(api: k8s.ApiClient, path: str, namespace: str) -> int:
    """GPU compute the path's scheduler allocated, milli-GPUs."""
    if not path.startswith("extender"):
        loads = [
            int(result["consumedCapacity"]["cores"])
            for claim in _claims(api, namespace)
            for result in ((claim.get("status") or {}).get("allocation") or {})
            .get("devices", {})
            .get("results", [])
        ]
        return 10 * sum(loads)
    core = k8s.CoreV1Api(api)
    pods = loaded(core.list_namespaced_pod(namespace, _preload_content=False))["items"]
    total_bp = 0
    for pod in pods:
        note = (pod["metadata"].get("annotations") or {}).get(ANNOTATION_ASSIGNMENT)
        if pod["spec"].get("nodeName") and note:
            total_bp += sum(g.share_bp for g in PodAssignment.from_json(note).gpus)
    return total_bp // 10


def _reorder_loop(
    api: k8s.ApiClient, gpus: dict[str, list[InventoryGpu]], stop: threading.Event
) -> None:
    """The driver's ``device_order = "pack"`` resync on every node, once a second."""
    while not stop.wait(1.0):
        claims = _claims(api, None)
        for node, found in gpus.items():
            loads = device_loads(claims, DRIVER, node)
            listed = ordered(devices(found, 256, 1), loads, "pack")
            Publisher(KubernetesSlices(api), node, DRIVER).reconcile(listed)


@contextmanager
def reordering(api: k8s.ApiClient, nodes: dict[str, Node]) -> Iterator[None]:
    """Keeps the pack order on the ``dra_pack`` nodes (name -> trace node) while open."""
    gpus = {name: _gpus(name, node) for name, node in nodes.items() if node.num_gpu}
    stop = threading.Event()
    worker = threading.Thread(target=_reorder_loop, args=(api, gpus, stop), daemon=True)
    worker.start()
    try:
        yield
    finally:
        stop.set()
        worker.join(timeout=60)


@contextmanager
def extender_scheduler(plane: ControlPlane, bin_dir: Path) -> Iterator[None]:
    """``arkgpu extender run`` (policy arkgpu) and a kube-scheduler calling it, both ready."""
    port = free_port()
    config = plane.workdir / "extender.toml"
    config.write_text(
        f'kubeconfig = "{plane.admin_kubeconfig}"\nlisten_address = "127.0.0.1"\n'
        f'port = {port}\npolicy = "arkgpu"\nlc_check = false\nrelearn_in_background = false\n'
    )
    argv = [str(Path(sys.executable).with_name("arkgpu")), "extender", "run", f"--config={config}"]
    with ExitStack() as stack:
        child = processes.start("extender", argv, plane.workdir / "logs")
        stack.callback(processes.stop, child, 15.0)
        ready = f"http://127.0.0.1:{port}/readyz"
        processes.wait_until(child, lambda: processes.http_ok(ready, None), "/readyz", 180.0)
        scheduler_config = write_extender_scheduler_config(plane.workdir, port)
        args = (f"--config={scheduler_config}",)
        stack.enter_context(running_scheduler(plane, bin_dir, args, "scheduler-extender"))
        yield
