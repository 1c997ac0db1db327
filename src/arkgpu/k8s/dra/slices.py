"""The ResourceSlice (resource.k8s.io/v1) of one node's GPUs, as plain JSON. Pure.

One pool per node (named after it), one slice in the pool, one device per healthy GPU
not in MIG mode:
``allowMultipleAllocations: true`` and two consumable capacities (KEP-5075, beta and
on by default since Kubernetes 1.36), each with a request policy:

- ``memory``: the GPU's memory as a Quantity in MiB (``16384Mi``); a request is rounded
  up to a multiple of ``memory_step_mib``; a request without it takes the whole memory.
- ``cores``: the compute share in percent of the GPU (``100``); steps of ``cores_step``;
  a request without it takes the whole GPU.

kube-scheduler sums what the claims allocated on a device consume and never lets the
sum pass ``value``: that is what makes one GPU shareable without over-allocation.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from arkgpu import __version__
from arkgpu.k8s.contract import InventoryGpu

API_VERSION = "resource.k8s.io/v1"
"""The DRA API group version (GA since Kubernetes 1.34)."""
MEMORY = "memory"
"""Consumable capacity: GPU memory (Quantity, MiB units)."""
CORES = "cores"
"""Consumable capacity: compute share, percent of the GPU (100 = whole GPU)."""
WHOLE_GPU_CORES = 100
"""``cores`` of a whole GPU."""
_SEMVER = re.compile(r"^\d+\.\d+\.\d+$")


def device_name(gpu: InventoryGpu) -> str:
    """The device's name in the slice (a DNS label): ``gpu-<index>``."""
    return f"gpu-{gpu.index}"


def slice_name(node: str, driver: str) -> str:
    """The slice's object name: one per node and driver."""
    return f"{node}-{driver}"


def _mib(value: int) -> str:
    return f"{value}Mi"


def _aligned(total: int, step: int) -> int:
    """The largest ``step + n * step`` not above ``total`` (policy bounds must be on a step)."""
    return step * max(1, total // step)


def _capacity(total: int, step: int, unit: str) -> dict[str, Any]:
    top = _aligned(total, step)

    def quantity(value: int) -> str:
        return _mib(value) if unit == "Mi" else str(value)

    policy = {
        "default": quantity(top),
        "validRange": {"min": quantity(step), "max": quantity(top), "step": quantity(step)},
    }
    return {"value": quantity(total), "requestPolicy": policy}


def _version_attribute() -> dict[str, str]:
    return {"version": __version__} if _SEMVER.match(__version__) else {"string": __version__}


def device(gpu: InventoryGpu, memory_step_mib: int, cores_step: int) -> dict[str, Any]:
    """One GPU as a shareable DRA device."""
    return {
        "name": device_name(gpu),
        "allowMultipleAllocations": True,
        "attributes": {
            "uuid": {"string": gpu.uuid},
            "model": {"string": gpu.model},
            "index": {"int": gpu.index},
            "mig": {"bool": gpu.mig},
            "arkgpuVersion": _version_attribute(),
        },
        "capacity": {
            MEMORY: _capacity(gpu.memory_mib, memory_step_mib, "Mi"),
            CORES: _capacity(WHOLE_GPU_CORES, cores_step, ""),
        },
    }


def devices(
    gpus: Sequence[InventoryGpu], memory_step_mib: int, cores_step: int
) -> list[dict[str, Any]]:
    """The devices of the healthy GPUs with enough memory for one step, by index; a GPU
    in MIG mode is left out (its memory and compute belong to MIG instances, which the
    limiter does not share; :func:`mig_message` says so)."""
    usable = [g for g in gpus if g.healthy and not g.mig and g.memory_mib >= memory_step_mib]
    return [device(g, memory_step_mib, cores_step) for g in sorted(usable, key=lambda g: g.index)]


def mig_message(
    found: Sequence[InventoryGpu], before: frozenset[int]
) -> tuple[str, frozenset[int]]:
    """A line naming the GPUs in MIG mode (left out of the slice) when they changed since
    ``before`` ("" when not), and the indices now in MIG mode."""
    now = frozenset(g.index for g in found if g.mig)
    if now == before:
        return "", now
    if not now:
        return "no GPU is in MIG mode any more", now
    listed = ", ".join(f"{g.index} ({g.uuid})" for g in found if g.mig)
    return f"GPUs in MIG mode are not published (ArkGPU shares whole GPUs): {listed}", now


def resource_slice(
    node: str, driver: str, device_list: list[dict[str, Any]], generation: int
) -> dict[str, Any]:
    """The node's slice: pool ``node`` at ``generation``, one slice, the given devices."""
    return {
        "apiVersion": API_VERSION,
        "kind": "ResourceSlice",
        "metadata": {"name": slice_name(node, driver)},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node, "generation": generation, "resourceSliceCount": 1},
            "devices": device_list,
        },
    }
