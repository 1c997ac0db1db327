"""Regions keyed by devices, and the pod that holds them (pure code over snapshots).

The kubelet's Allocate names devices, never the pod, so nothing about the pod
is decided there: the region is named after the allocated device IDs
(:func:`region_key`; the kubelet gives a device to one container at a time, and
an init container's devices to the app container that reuses them) and gets
closed limits. At PreStartContainer the kubelet's PodResources API names the pod
and container holding those devices (:func:`holding_pods`); that pod's
assignment sets the region's limits, and what only the pod knows is checked
there: HAMi's selection annotations (:func:`check_selection`) and whether the
container asked for ``nvidia.com/gpucores`` (:func:`cores_asked`: without it,
compute is not capped, as in HAMi). Only GetPreferredAllocation still has to
infer the pod being admitted (:func:`waiting_pods`): a wrong guess costs a GPU
choice, never another pod's limits.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from arkgpu.k8s import contract, selection
from arkgpu.k8s.contract import AssignedGpu, ContractError, InventoryGpu, PodAssignment
from arkgpu.k8s.deviceplugin.apiserver import PodInfo
from arkgpu.k8s.deviceplugin.devices import gpu_of
from arkgpu.k8s.deviceplugin.podresources import Holder
from arkgpu.limiter.layout import SHARE_FULL
from arkgpu.limiter.region import Limits

MIB = 1 << 20
OWNER_KEY = "pod_uid"
"""Key of ``pod.json`` naming the pod a region serves (the node runtime ignores it)."""
REGION_PREFIX = "dev-"
"""Region folders named after their devices start so (others in ``regions_dir`` are not
the device plugin's)."""
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
"""Pod phases after which no container runs again (a pod the kubelet rejected is Failed)."""
CLOSED = Limits((0,), share_bp=0)
"""A region's limits between Allocate and PreStartContainer: no memory, no GPU time."""


class AllocationError(Exception):
    """A call that cannot be served; the message is what the pod's events show."""


def region_key(device_ids: Iterable[str]) -> str:
    """The region folder of the container holding ``device_ids`` (order-free)."""
    text = "\n".join(sorted(set(device_ids)))
    return REGION_PREFIX + hashlib.sha256(text.encode()).hexdigest()[:24]


def gpus_of(device_ids: Iterable[str]) -> tuple[str, ...]:
    """The GPUs of ``device_ids``, each once, sorted: CUDA's device order in the container."""
    return tuple(sorted({gpu_of(d) for d in device_ids}))


def closed_limits(gpus: int) -> Limits:
    """:data:`CLOSED` for ``gpus`` GPUs."""
    return Limits((0,) * max(gpus, 1), share_bp=0)


def check_devices(device_ids: Sequence[str], gpus: Sequence[InventoryGpu]) -> None:
    """AllocationError unless every device is one of a healthy GPU of this node."""
    by_uuid = {g.uuid: g for g in gpus if not g.mig}
    if not device_ids:
        raise AllocationError("arkgpu device plugin: Allocate named no device")
    for device in device_ids:
        gpu = by_uuid.get(gpu_of(device))
        if gpu is None:
            raise AllocationError(f"arkgpu device plugin: device {device} is not advertised here")
        if not gpu.healthy:
            raise AllocationError(f"arkgpu device plugin: device {device}: GPU is unhealthy")


def check_selection(pod: PodInfo, gpus: Sequence[InventoryGpu], uuids: Sequence[str]) -> None:
    """AllocationError unless the pod's selection annotations (models and UUIDs,
    :mod:`arkgpu.k8s.selection`) admit every allocated GPU (``uuids``)."""
    by_uuid = {g.uuid: g for g in gpus}
    for uuid in uuids:
        gpu = by_uuid.get(uuid)
        refused = None if gpu is None else selection.refusal(pod.annotations, gpu)
        if refused is not None:
            raise AllocationError(f"arkgpu device plugin: pod {pod.key}: {refused}")


def holding_pods(holders: Iterable[Holder], device_ids: Iterable[str]) -> list[tuple[str, str]]:
    """``(namespace, pod)`` of every listed container holding any of ``device_ids``, each once.

    Overlap, not equality: PodResources lists app containers only, and an app container may
    hold part of its init container's devices; a device is held by one active pod at a time.
    """
    wanted = frozenset(device_ids)
    return list(dict.fromkeys(h.pod_key for h in holders if h.devices & wanted))


def live(pod: PodInfo | None, node: str) -> bool:
    """Whether a pod is bound to ``node`` and not in a terminal phase."""
    return pod is not None and pod.node == node and pod.phase not in TERMINAL_PHASES


def assignment_of(pod: PodInfo, node: str) -> PodAssignment:
    """The pod's assignment for ``node`` (AllocationError naming what is wrong)."""
    text = pod.annotations.get(contract.ANNOTATION_ASSIGNMENT)
    if text is None:
        raise AllocationError(
            f"arkgpu device plugin: pod {pod.key} holds {contract.RESOURCE_GPU} devices but "
            f"carries no {contract.ANNOTATION_ASSIGNMENT} (is its schedulerName "
            f"{contract.SCHEDULER_NAME}?)"
        )
    try:
        assignment = PodAssignment.from_json(text)
    except ContractError as exc:
        raise AllocationError(f"arkgpu device plugin: pod {pod.key}: {exc}") from None
    if assignment.node != node or not assignment.gpus:
        raise AllocationError(
            f"arkgpu device plugin: pod {pod.key}: its assignment is for node "
            f"{assignment.node!r}, not {node}"
        )
    return assignment


def waiting_pods(
    pods: Iterable[PodInfo], node: str, holding: set[tuple[str, str]]
) -> list[PodInfo]:
    """Pods of ``node`` with an assignment, not terminal or deleting, holding no devices yet,
    in the order the kubelet admits them: creation time (1 s resolution), then the order in
    which they reached the node (resource version; never the name: replicas created in one
    second are admitted in their arrival order)."""
    found = [
        p
        for p in pods
        if live(p, node)
        and not p.deleting
        and contract.ANNOTATION_ASSIGNMENT in p.annotations
        and (p.namespace, p.name) not in holding
    ]
    return sorted(found, key=lambda p: (p.created, p.revision, p.namespace, p.name))


def preferred_uuids(waiting: Sequence[PodInfo], node: str, size: int) -> tuple[str, ...]:
    """The GPUs of the first waiting pod whose assignment has ``size`` GPUs, else of the first
    with more (its init container, asking for fewer, is allocated first); empty: none."""
    assigned = []
    for pod in waiting:
        try:
            assigned.append(tuple(g.uuid for g in assignment_of(pod, node).gpus))
        except AllocationError:
            continue
    exact = [a for a in assigned if len(a) == size]
    larger = [a for a in assigned if len(a) > size]
    return (exact or larger or [()])[0]


def matched(assignment: PodAssignment, uuids: Sequence[str]) -> tuple[AssignedGpu, ...]:
    """The assigned GPU whose limits each allocated GPU takes: the same GPU when assigned,
    else the assigned GPUs not allocated, in order (the kubelet chose other devices)."""
    by_uuid = {g.uuid: g for g in assignment.gpus}
    spare = [g for g in assignment.gpus if g.uuid not in uuids]
    last = assignment.gpus[-1]
    return tuple(by_uuid.get(u) or (spare.pop(0) if spare else last) for u in uuids)


def limits_for(assignment: PodAssignment, uuids: Sequence[str], cores_asked: bool = True) -> Limits:
    """The container's limits on its allocated GPUs: each GPU's memory cap (0: none) and the
    smallest share (the limiter paces each GPU at that share). A container that asked for no
    ``nvidia.com/gpucores`` (``cores_asked`` False) gets no compute cap, as in HAMi: its
    assignment's share is what placement counted for its memory, not a limit."""
    gpus = matched(assignment, uuids)
    caps = tuple(g.memory_mib * MIB if g.memory_mib else None for g in gpus)
    share = min(g.share_bp for g in gpus) if cores_asked else SHARE_FULL
    return Limits(caps, share_bp=share)


def cores_asked(limits: Mapping[str, str]) -> bool:
    """Whether a container with these ``resources.limits`` gave ``nvidia.com/gpucores`` (or no
    memory either: a whole GPU, capped at its share)."""
    memory = (contract.RESOURCE_GPUMEM, contract.RESOURCE_GPUMEM_PERCENTAGE)
    return contract.RESOURCE_GPUCORES in limits or not any(m in limits for m in memory)


def container_of(pod: PodInfo, holder: str, init: bool) -> tuple[str, Mapping[str, str]]:
    """The name and limits of the container PreStartContainer is for. ``holder``: the app
    (or sidecar) container PodResources lists with these devices; ``init``: the devices
    are only part of its own, so they are a GPU init container's (the first asking for
    GPUs, else the holder: the kubelet's API names no init container)."""
    inits = [c for c in pod.init_containers if contract.RESOURCE_GPU in c[1]] if init else []
    listed = dict(pod.init_containers + pod.containers)  # a sidecar is listed as itself
    return inits[0] if inits else (holder, listed.get(holder, {}))


def pod_description(
    pod: PodInfo, assignment: PodAssignment, indices: Sequence[int], memory_mib: int, container: str
) -> dict[str, Any]:
    """``pod.json`` of the region, as the node runtime reads it (docs/NODE.md): ``gpu`` and
    ``gpus`` the node indices of the allocated GPUs (``indices``, CUDA's order). A pod that
    names no ArkGPU class (``arkgpu.io/qos``) was written for HAMi: ``elastic`` false, its
    share is a cap the runtime keeps. ``namespace``, ``pod``, ``container`` name it in the
    runtime's metrics and logs."""
    notes = pod.annotations
    body: dict[str, Any] = {
        "kind": assignment.qos,
        "gpu": indices[0],
        "gpus": list(indices),
        "model": notes.get(contract.ANNOTATION_MODEL, "unknown"),
        "memory_mib": memory_mib or None,
        "elastic": contract.ANNOTATION_QOS in notes,
        "namespace": pod.namespace,
        "pod": pod.name,
        "container": container,
        OWNER_KEY: pod.uid,
    }
    if assignment.qos == contract.QOS_LC:
        where = f"pod {pod.key}"
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
