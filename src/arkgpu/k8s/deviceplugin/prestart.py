"""PreStartContainer: the pod of a container is the one the kubelet says holds its devices.

The kubelet calls PreStartContainer (the plugin asks for it in its options)
before every start of a container holding the plugin's devices, with those
devices, after Allocate, and also when it starts a container from its checkpoint
without any Allocate (after a reboot, regions on tmpfs are gone). Here:

1. the kubelet's PodResources ``List`` names the pod whose container holds these
   devices (it lists app containers only; an init container's devices are reused
   by the app container after it, so they name the same pod);
2. the API server gives that pod (a read: when it fails, the container does not
   start yet and the kubelet tries again at its next sync); a pod in a terminal
   phase, not bound here or without an assignment is refused, and so is a GPU
   its HAMi selection annotations (``nvidia.com/use-gpuuuid`` and the others of
   :mod:`arkgpu.k8s.selection`) exclude: the container does not start and the
   reason is in the pod's events;
3. the region named after the devices gets the pod's limits (created when
   missing; a container that asked for no ``nvidia.com/gpucores`` is not capped
   in compute) and ``pod.json`` (with ``elastic``, ``gpus`` and the names of the
   namespace, pod and container).

Allocated GPUs that differ from the assigned ones (the kubelet took other
devices than the preferred ones) keep the pod's own limits, matched GPU by GPU,
and are counted and logged: the container runs on the GPUs it was given.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from arkgpu.k8s import contract
from arkgpu.k8s.contract import InventoryGpu, PodAssignment
from arkgpu.k8s.deviceplugin import allocating
from arkgpu.k8s.deviceplugin.allocating import AllocationError
from arkgpu.k8s.deviceplugin.apiserver import PodInfo
from arkgpu.k8s.deviceplugin.containers import settle_region
from arkgpu.k8s.deviceplugin.podresources import Holder
from arkgpu.limiter.region import Limits

if TYPE_CHECKING:
    from arkgpu.k8s.deviceplugin.service import DevicePluginService


@dataclass(frozen=True)
class Settled:
    """What PreStartContainer did."""

    message: str
    """One line for the log."""
    mismatch: bool
    """The allocated GPUs are not the assigned ones."""


def settle(service: DevicePluginService, device_ids: list[str]) -> Settled:
    """Find the pod holding ``device_ids`` and give their region its limits (module text)."""
    node, gpus = service.config.node_name, service.board.snapshot()[1]
    allocating.check_devices(device_ids, gpus)
    pod, holder = holding_pod(service, device_ids)
    assignment = allocating.assignment_of(pod, node)
    uuids = allocating.gpus_of(device_ids)
    allocating.check_selection(pod, gpus, uuids)
    limits, description = region_contents(pod, holder, assignment, gpus, device_ids)
    key = allocating.region_key(device_ids)
    with service.lock:
        settle_region(service.config.regions_dir / key, limits, description)
    assigned = {g.uuid for g in assignment.gpus}
    mismatch = assigned != set(uuids)
    note = (
        f" (assigned {', '.join(sorted(assigned))}: the kubelet chose others)" if mismatch else ""
    )
    return Settled(f"pod {pod.key}: region {key} on {', '.join(uuids)}{note}", mismatch)


def region_contents(
    pod: PodInfo,
    holder: Holder,
    assignment: PodAssignment,
    gpus: Sequence[InventoryGpu],
    device_ids: list[str],
) -> tuple[Limits, dict[str, Any]]:
    """The limits and ``pod.json`` of the region of ``device_ids``, held by ``holder`` (the
    devices are only part of the holder's: an init container's)."""
    uuids = allocating.gpus_of(device_ids)
    init = frozenset(device_ids) != holder.devices
    name, asked = allocating.container_of(pod, holder.container, init)
    first = allocating.matched(assignment, uuids)[0]
    index = {g.uuid: g.index for g in gpus}
    indices = [index[u] for u in uuids]
    description = allocating.pod_description(pod, assignment, indices, first.memory_mib, name)
    limits = allocating.limits_for(assignment, uuids, allocating.cores_asked(asked))
    return limits, description


def holding_pod(service: DevicePluginService, device_ids: list[str]) -> tuple[PodInfo, Holder]:
    """The live pod whose container holds ``device_ids``, and that container as PodResources
    lists it (AllocationError if none)."""
    node = service.config.node_name
    listed = service.holders.holders(contract.RESOURCE_GPU)
    keys = allocating.holding_pods(listed, device_ids)
    pods = [service.pods.pod(ns, name) for ns, name in keys]
    found = [p for p in pods if p is not None and allocating.live(p, node)]
    if len(found) == 1:
        key, wanted = (found[0].namespace, found[0].name), frozenset(device_ids)
        return found[0], next(h for h in listed if h.pod_key == key and h.devices & wanted)
    named = ", ".join(f"{ns}/{name}" for ns, name in keys) or "none"
    raise AllocationError(
        f"arkgpu device plugin: {len(found)} running pod(s) on node {node} hold devices "
        f"{', '.join(sorted(device_ids))} per the kubelet's PodResources (listed: {named})"
    )
