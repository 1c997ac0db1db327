"""Which pod an Allocate is for, and the region it gets (pure code over snapshots).

The kubelet's Allocate names devices, never the pod. The pod is found as
HAMi finds it: among the pods bound to this node that carry an assignment
(``arkgpu.io/assignment``, written by the extender before the bind) and no
``arkgpu.io/allocated`` yet, the oldest whose assignment has as many GPUs as
the request has devices (one whose GPUs are those of the devices first).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from arkgpu.k8s import contract, selection
from arkgpu.k8s.contract import AssignedGpu, ContractError, InventoryGpu, PodAssignment
from arkgpu.k8s.deviceplugin.apiserver import PodInfo
from arkgpu.k8s.deviceplugin.devices import gpu_of
from arkgpu.limiter.layout import SHARE_FULL
from arkgpu.limiter.region import Limits

MIB = 1 << 20
OWNER_KEY = "pod_uid"
"""Key of ``pod.json`` naming the pod a region was allocated for (the node runtime ignores
it; the plugin removes the region once no pod on the node has that UID)."""


class AllocationError(Exception):
    """An Allocate that cannot be served; the message is what the pod's events show."""


@dataclass(frozen=True)
class Pending:
    """A pod waiting for its Allocate."""

    pod: PodInfo
    assignment: PodAssignment
    container: str
    """The container the GPUs are for."""

    @property
    def uuids(self) -> tuple[str, ...]:
        """Its GPUs' UUIDs, in the assignment's order."""
        return tuple(g.uuid for g in self.assignment.gpus)


def pending_pods(pods: Iterable[PodInfo], node: str) -> list[Pending]:
    """Pods bound to ``node`` with a valid assignment for it and not yet allocated, oldest
    first. A malformed assignment is skipped (the extender's webhook-validated JSON)."""
    found = []
    for pod in pods:
        text = pod.annotations.get(contract.ANNOTATION_ASSIGNMENT)
        if pod.node != node or pod.deleting or text is None:
            continue
        if contract.ANNOTATION_ALLOCATED in pod.annotations:
            continue
        try:
            assignment = PodAssignment.from_json(text)
        except ContractError:
            continue
        if assignment.node == node and assignment.gpus:
            found.append(Pending(pod, assignment, _container(pod, assignment)))
    return sorted(found, key=lambda p: (p.pod.created, p.pod.namespace, p.pod.name))


def _container(pod: PodInfo, assignment: PodAssignment) -> str:
    if assignment.container:
        return assignment.container
    for name, limits in pod.containers:
        if contract.RESOURCE_GPU in limits:
            return name
    return pod.containers[0][0] if pod.containers else "main"


def choose(pending: Sequence[Pending], devices: Sequence[str]) -> Pending | None:
    """The pod an Allocate of ``devices`` is for (see the module's text); None when none."""
    size = len(devices)
    gpus = {gpu_of(d) for d in devices}
    sized = [p for p in pending if len(p.assignment.gpus) == size]
    exact = [p for p in sized if set(p.uuids) == gpus]
    best = exact or sized
    return best[0] if best else None


def not_found_message(node: str, devices: Sequence[str]) -> str:
    """Why no pod matched an Allocate of ``devices`` (shown on the pod by the kubelet)."""
    return (
        f"arkgpu device plugin: no pod bound to node {node} waits for {len(devices)} "
        f"{contract.RESOURCE_GPU} device(s): none carries {contract.ANNOTATION_ASSIGNMENT} "
        f"for this node with {len(devices)} GPU(s) and no {contract.ANNOTATION_ALLOCATED} "
        f"(is the pod's schedulerName {contract.SCHEDULER_NAME}?)"
    )


def region_name(pending: Pending) -> str:
    """The region folder of the pod's container (``_`` is in no namespace, pod or
    container name, so names never collide)."""
    return f"{pending.pod.namespace}_{pending.pod.name}_{pending.container}"


def check_gpus(pending: Pending, gpus: Sequence[InventoryGpu], node: str) -> None:
    """AllocationError unless every assigned GPU is a healthy GPU of this node that the pod's
    selection annotations admit (models and UUIDs, :mod:`arkgpu.k8s.selection`)."""
    by_uuid = {g.uuid: g for g in gpus}
    for assigned in pending.assignment.gpus:
        gpu = by_uuid.get(assigned.uuid)
        if gpu is None:
            raise AllocationError(
                f"arkgpu device plugin: pod {pending.pod.key}: assigned GPU {assigned.uuid} "
                f"is not on node {node}"
            )
        if not gpu.healthy:
            raise AllocationError(
                f"arkgpu device plugin: pod {pending.pod.key}: assigned GPU {assigned.uuid} "
                f"is unhealthy on node {node}"
            )
        refused = selection.refusal(pending.pod.annotations, gpu)
        if refused is not None:
            raise AllocationError(f"arkgpu device plugin: pod {pending.pod.key}: {refused}")


def limits_of(assignment: PodAssignment, cores_asked: bool = True) -> Limits:
    """The container's first limits: each GPU's memory cap (0: none) and the smallest of
    the GPUs' shares (the limiter paces each GPU at that share). A container that asked
    for no ``nvidia.com/gpucores`` (``cores_asked`` False) gets no compute cap, as in HAMi:
    its assignment's share is what placement counted for its memory, not a limit."""
    caps = tuple(g.memory_mib * MIB if g.memory_mib else None for g in assignment.gpus)
    share = min(g.share_bp for g in assignment.gpus) if cores_asked else SHARE_FULL
    return Limits(caps, share_bp=share)


def cores_asked(pending: Pending) -> bool:
    """Whether the container of the assignment gave ``nvidia.com/gpucores`` (or memory:
    neither is a whole GPU, capped at its share)."""
    limits = dict(pending.pod.containers).get(pending.container, {})
    memory = (contract.RESOURCE_GPUMEM, contract.RESOURCE_GPUMEM_PERCENTAGE)
    return contract.RESOURCE_GPUCORES in limits or not any(m in limits for m in memory)


def pod_description(pending: Pending) -> dict[str, Any]:
    """``pod.json`` of the region, as the node runtime reads it (docs/NODE.md). A pod that
    names no ArkGPU class (``arkgpu.io/qos``) was written for HAMi: ``elastic`` false, its
    share is a cap the runtime keeps."""
    first: AssignedGpu = pending.assignment.gpus[0]
    notes = pending.pod.annotations
    body: dict[str, Any] = {
        "kind": pending.assignment.qos,
        "gpu": first.index,
        "model": notes.get(contract.ANNOTATION_MODEL, "unknown"),
        "memory_mib": first.memory_mib or None,
        "elastic": contract.ANNOTATION_QOS in notes,
        "gpus": [g.index for g in pending.assignment.gpus],
        OWNER_KEY: pending.pod.uid,
    }
    if pending.assignment.qos == contract.QOS_LC:
        where = f"pod {pending.pod.key}"
        body["target_ms"] = _number(notes, contract.ANNOTATION_LATENCY_TARGET_MS, where)
        body["peak_rps"] = _number(notes, contract.ANNOTATION_PEAK_RPS, where, 0.0)
        body["max_batch"] = int(_number(notes, contract.ANNOTATION_MAX_BATCH, where, 8.0))
    return body


def _number(notes: Mapping[str, str], key: str, where: str, default: float | None = None) -> float:
    text = notes.get(key)
    if text is None:
        if default is None:
            raise AllocationError(f"arkgpu device plugin: {where}: qos lc needs annotation {key}")
        return default
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise AllocationError(
            f"arkgpu device plugin: {where}: annotation {key}: expected a positive number, "
            f"got {text!r}"
        )
    return value
