"""Virtual devices: what the plugin advertises to the kubelet for each GPU (pure code).

The kubelet counts ``nvidia.com/gpu`` in devices. Each GPU that can be shared
(not in MIG mode) is advertised as ``split_count`` virtual devices with IDs
``<uuid>::<k>``, k = 0..split_count-1: that many containers can hold one of
its devices at once. A GPU's devices are Healthy while NVML answers for it and
Unhealthy otherwise (the kubelet then lowers the node's allocatable).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from arkgpu.k8s.contract import InventoryGpu

SEPARATOR = "::"
"""Between a GPU's UUID and the virtual device's number in a device ID."""
HEALTHY = "Healthy"
"""Device health the kubelet understands (k8s.io/kubelet deviceplugin/v1beta1 constants)."""
UNHEALTHY = "Unhealthy"


@dataclass(frozen=True, slots=True)
class VirtualDevice:
    """One advertised device."""

    id: str
    """``<uuid>::<k>``."""
    health: str
    """``Healthy`` or ``Unhealthy``."""


def device_id(uuid: str, k: int) -> str:
    """The ID of virtual device ``k`` of GPU ``uuid``."""
    return f"{uuid}{SEPARATOR}{k}"


def gpu_of(device: str) -> str:
    """The GPU UUID a device ID belongs to (the ID itself when it has no separator)."""
    return device.rsplit(SEPARATOR, 1)[0]


def virtual_devices(gpus: Iterable[InventoryGpu], split_count: int) -> tuple[VirtualDevice, ...]:
    """Every device to advertise: ``split_count`` per GPU not in MIG mode, with its health."""
    return tuple(
        VirtualDevice(device_id(g.uuid, k), HEALTHY if g.healthy else UNHEALTHY)
        for g in gpus
        if not g.mig
        for k in range(split_count)
    )


def preferred(
    available: Sequence[str], must_include: Sequence[str], size: int, uuids: Sequence[str]
) -> list[str]:
    """``size`` devices from ``available``: ``must_include`` first, then one device of each
    GPU in ``uuids`` (the pod's assignment, in order), then any others in the given order."""
    chosen = list(dict.fromkeys(must_include))[:size]
    taken_gpus = {gpu_of(d) for d in chosen}
    for uuid in uuids:
        if len(chosen) >= size or uuid in taken_gpus:
            continue
        device = next((d for d in available if gpu_of(d) == uuid and d not in chosen), None)
        if device is not None:
            chosen.append(device)
            taken_gpus.add(uuid)
    for device in available:
        if len(chosen) >= size:
            break
        if device not in chosen:
            chosen.append(device)
    return chosen
