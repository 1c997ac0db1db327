"""Regions the kubelet's containers need but PreStartContainer never gave them.

kubelet 1.37.2 skips PreStartContainer for a container it starts between its own restart
and the plugin's registration with it: the endpoint it restores from its checkpoint has
no options, so ``pre_start_required`` reads false. A container started in that window
gets its saved Allocate answer and no region settled: after a reboot (regions are on
tmpfs) the region is missing, after a restart between Allocate and PreStartContainer it
has the closed limits of Allocate. At the plugin's start and at each scan the plugin
asks the kubelet's PodResources API which containers hold its devices and, for each
whose region has no ``pod.json``, does what PreStartContainer does
(:func:`arkgpu.k8s.deviceplugin.prestart.region_contents`): the region gets its pod's
limits and ``pod.json``, created when missing.

A region with ``pod.json`` (and its two files) is never touched: a running container's
``usage`` (its processes' counters) and ``limits`` stay as they are. PodResources lists
app containers only, with all of their devices; a GPU init container's region (part of
those devices) is left to PreStartContainer, as an init container the kubelet starts
again is rare and short. A container whose pod cannot be read or is refused (no
assignment, excluded GPU, a terminal phase) is logged and tried again at the next scan.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from arkgpu.k8s.contract import InventoryGpu
from arkgpu.k8s.deviceplugin import allocating
from arkgpu.k8s.deviceplugin.allocating import AllocationError
from arkgpu.k8s.deviceplugin.containers import POD_FILE, settle_region
from arkgpu.k8s.deviceplugin.podresources import Holder
from arkgpu.k8s.deviceplugin.prestart import region_contents
from arkgpu.limiter.region import LIMITS_FILE, USAGE_FILE

if TYPE_CHECKING:
    from arkgpu.k8s.deviceplugin.service import DevicePluginService


def settled(directory: Path) -> bool:
    """Whether a region has its pod's limits (``pod.json``) and both of its files."""
    return all((directory / name).is_file() for name in (POD_FILE, LIMITS_FILE, USAGE_FILE))


def ours(holder: Holder, gpus: Sequence[InventoryGpu]) -> bool:
    """Whether every device the container holds is one of this plugin's GPUs."""
    uuids = {g.uuid for g in gpus}
    return all(u in uuids for u in allocating.gpus_of(holder.devices))


@dataclass
class Rebuilt:
    """What one pass did: a line per region settled, and per region it could not settle."""

    settled: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)


def rebuild_regions(service: DevicePluginService, holders: Sequence[Holder]) -> Rebuilt:
    """Settle the region of every container in ``holders`` (PodResources' ``nvidia.com/gpu``
    holders) that has this plugin's devices and a region without ``pod.json``."""
    gpus = service.board.snapshot()[1]
    done = Rebuilt()
    for holder in holders:
        directory = service.config.regions_dir / allocating.region_key(holder.devices)
        if not ours(holder, gpus) or settled(directory):
            continue
        try:
            done.settled.append(_rebuild(service, holder, directory, gpus))
        except Exception as exc:  # this container's (the API server, its pod): the others go on
            text = " ".join(str(exc).split())[:300]
            done.refused.append(f"region {directory.name} not rebuilt (next scan): {text}")
    return done


def _rebuild(
    service: DevicePluginService, holder: Holder, directory: Path, gpus: Sequence[InventoryGpu]
) -> str:
    node = service.config.node_name
    pod = service.pods.pod(holder.namespace, holder.pod)
    if pod is None or not allocating.live(pod, node):
        raise AllocationError(f"pod {holder.namespace}/{holder.pod} is not running on {node}")
    assignment = allocating.assignment_of(pod, node)
    devices = sorted(holder.devices)
    allocating.check_selection(pod, gpus, allocating.gpus_of(devices))
    limits, description = region_contents(pod, holder, assignment, gpus, devices)
    with service.lock:
        if settled(directory):  # PreStartContainer was quicker
            return f"region {directory.name} settled meanwhile"
        settle_region(directory, limits, description)
    return (
        f"pod {pod.key} container {holder.container}: region {directory.name} rebuilt"
        " (started without PreStartContainer)"
    )
