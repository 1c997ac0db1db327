"""Pods and nodes as the API server sends them (JSON objects), read into typed records.

The extender reads the same JSON from two places: kube-scheduler's requests
(``ExtenderArgs.Pod``, ``ExtenderArgs.Nodes``) and the list and watch of the
API server. :func:`read_pod` and :func:`read_node` keep what ArkGPU needs and
never raise on a field ArkGPU does not read; a pod or node whose ArkGPU fields
break the contract keeps the reason in ``error`` (the extender then refuses
it with that reason, a person can read it in the pod's events).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from arkgpu.k8s.contract import (
    ANNOTATION_ASSIGNMENT,
    ANNOTATION_INVENTORY,
    RESOURCE_GPU,
    ContractError,
    InventoryGpu,
    NodeInventory,
    PodAssignment,
)
from arkgpu.k8s.gpu_requests import GpuRequest, gpu_request, quantity

MIB = 1024 * 1024
FINISHED_PHASES = ("Succeeded", "Failed")
"""Phases of a pod whose containers have all ended: its GPUs are free again."""


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _annotations(obj: Mapping[str, Any]) -> Mapping[str, str]:
    found = _meta(obj).get("annotations")
    if not isinstance(found, dict):
        return {}
    return {k: v for k, v in found.items() if isinstance(v, str)}


def _sub(obj: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = obj.get(key)
    return value if isinstance(value, dict) else {}


def _text(obj: Mapping[str, Any], key: str) -> str:
    value = obj.get(key)
    return value if isinstance(value, str) else ""


@dataclass(frozen=True, slots=True)
class GpuContainer:
    """The one container of a pod that asks for GPUs, and what it asks."""

    name: str
    """Container name."""
    request: GpuRequest
    """Its HAMi resources."""


@dataclass(frozen=True, slots=True)
class PodInfo:
    """What the extender reads of a pod."""

    uid: str
    namespace: str
    name: str
    resource_version: str
    scheduler_name: str
    node_name: str
    """``spec.nodeName``: "" until bound."""
    phase: str
    annotations: Mapping[str, str]
    cpu_milli: int
    """Sum of the containers' CPU requests, milli-cores."""
    memory_mib: int
    """Sum of the containers' memory requests, MiB (rounded up)."""
    gpu: GpuContainer | None
    """The container asking for GPUs; None: the pod asks for none."""
    assignment: PodAssignment | None
    """The extender's assignment annotation, when present and valid."""
    error: str = ""
    """Why the pod breaks the contract ("" when it does not)."""

    @property
    def key(self) -> str:
        """``namespace/name``."""
        return f"{self.namespace}/{self.name}"

    @property
    def finished(self) -> bool:
        """All its containers have ended (its resources are free)."""
        return self.phase in FINISHED_PHASES


def read_pod(obj: Mapping[str, Any]) -> PodInfo:
    """The record of a pod JSON object (ValueError when it has no metadata name, namespace or
    uid: not a pod)."""
    meta = _meta(obj)
    uid, namespace, name = _text(meta, "uid"), _text(meta, "namespace"), _text(meta, "name")
    if not (uid and namespace and name):
        raise ValueError("pod: metadata.name, metadata.namespace and metadata.uid are required")
    spec, status = _sub(obj, "spec"), _sub(obj, "status")
    annotations = _annotations(obj)
    where = f"pod {namespace}/{name}"
    error, cpu, memory, gpu, assignment = "", 0, 0, None, None
    try:
        cpu, memory, gpu = _requests(spec, where)
    except ContractError as exc:
        error = str(exc)
    if ANNOTATION_ASSIGNMENT in annotations:
        try:
            assignment = PodAssignment.from_json(annotations[ANNOTATION_ASSIGNMENT])
        except ContractError as exc:
            error = error or f"{where}: {exc}"
    return PodInfo(
        uid=uid,
        namespace=namespace,
        name=name,
        resource_version=_text(meta, "resourceVersion"),
        scheduler_name=_text(spec, "schedulerName"),
        node_name=_text(spec, "nodeName"),
        phase=_text(status, "phase"),
        annotations=annotations,
        cpu_milli=cpu,
        memory_mib=memory,
        gpu=gpu,
        assignment=assignment,
        error=error,
    )


def _requests(spec: Mapping[str, Any], where: str) -> tuple[int, int, GpuContainer | None]:
    containers = spec.get("containers")
    if not isinstance(containers, list):
        return 0, 0, None
    cpu, memory = Decimal(0), Decimal(0)
    asking: list[GpuContainer] = []
    for n, c in enumerate(containers):
        if not isinstance(c, dict):
            raise ContractError(f"{where}: containers[{n}]: expected an object")
        name = _text(c, "name") or str(n)
        resources = _sub(c, "resources")
        requests, limits = _sub(resources, "requests"), _sub(resources, "limits")
        here = f"{where} container {name}"
        cpu += quantity(requests.get("cpu", limits.get("cpu", 0)), f"{here}: cpu")
        memory += quantity(requests.get("memory", limits.get("memory", 0)), f"{here}: memory")
        request = gpu_request({k: str(v) for k, v in limits.items()}, here)
        if request.count:
            asking.append(GpuContainer(name, request))
    if len(asking) > 1:
        names = ", ".join(a.name for a in asking)
        raise ContractError(f"{where}: only one container may ask for GPUs ({names} do)")
    return math.ceil(cpu * 1000), math.ceil(memory / MIB), (asking[0] if asking else None)


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """What the extender reads of a node."""

    name: str
    resource_version: str
    cpu_milli: int
    """Allocatable CPU, milli-cores."""
    memory_mib: int
    """Allocatable memory, MiB."""
    gpus: tuple[InventoryGpu, ...]
    """The GPUs ArkGPU offers: healthy, not in MIG mode, of the model of the first such GPU."""
    error: str = ""
    """Why the node offers no GPU ("" when it offers some)."""
    corrections: tuple[tuple[str, float], ...] = ()
    """Online calibration's corrections per model the node published (its inventory)."""
    devices_per_gpu: int = 0
    """``nvidia.com/gpu`` devices the kubelet advertises per GPU (the device plugin's
    ``split_count``): allocatable ``nvidia.com/gpu`` over the inventory's healthy GPUs
    outside MIG mode; at most that many containers fit one GPU. 0: unknown, no bound."""

    @property
    def gpu_model(self) -> str:
        """Model of the GPUs offered ("" without)."""
        return self.gpus[0].model if self.gpus else ""


def read_node(obj: Mapping[str, Any]) -> NodeInfo:
    """The record of a node JSON object (ValueError without a metadata name)."""
    meta = _meta(obj)
    name = _text(meta, "name")
    if not name:
        raise ValueError("node: metadata.name is required")
    allocatable = _sub(_sub(obj, "status"), "allocatable")
    where = f"node {name}"
    try:
        cpu = math.floor(quantity(allocatable.get("cpu", 0), f"{where}: cpu") * 1000)
        memory = math.floor(quantity(allocatable.get("memory", 0), f"{where}: memory") / MIB)
        inventory, error = _inventory(_annotations(obj).get(ANNOTATION_INVENTORY), where)
        gpus, error = _offered(inventory, where) if inventory is not None else ((), error)
        per_gpu = _devices_per_gpu(allocatable, inventory, where)
    except ContractError as exc:
        cpu, memory, gpus, error, inventory, per_gpu = 0, 0, (), str(exc), None, 0
    version = _text(meta, "resourceVersion")
    corrections = inventory.corrections if inventory is not None and gpus else ()
    return NodeInfo(name, version, cpu, memory, gpus, error, corrections, per_gpu)


def _devices_per_gpu(
    allocatable: Mapping[str, Any], inventory: NodeInventory | None, where: str
) -> int:
    """Devices the kubelet counts per GPU (see :attr:`NodeInfo.devices_per_gpu`)."""
    listed = allocatable.get(RESOURCE_GPU)
    healthy = sum(g.healthy and not g.mig for g in inventory.gpus) if inventory else 0
    if listed is None or not healthy:
        return 0
    return max(1, math.floor(quantity(listed, f"{where}: {RESOURCE_GPU}")) // healthy)


def _inventory(text: str | None, where: str) -> tuple[NodeInventory | None, str]:
    if text is None:
        return None, f"{where} has no ArkGPU GPU inventory ({ANNOTATION_INVENTORY})"
    try:
        return NodeInventory.from_json(text), ""
    except ContractError as exc:
        return None, f"{where}: {exc}"


def _offered(inventory: NodeInventory, where: str) -> tuple[tuple[InventoryGpu, ...], str]:
    usable = [g for g in inventory.gpus if g.healthy and not g.mig]
    if not usable:
        return (), f"{where} has no healthy GPU outside MIG mode"
    return tuple(g for g in usable if g.model == usable[0].model), ""
