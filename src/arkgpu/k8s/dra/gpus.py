"""The node's GPUs as the DRA driver publishes them: NVML (nvidia-ml-py) or assumed.

``arkgpu.node`` has its own discovery, but it is a sibling layer (import-linter keeps
``arkgpu.k8s`` off it); this one adds what the slice needs: a GPU whose NVML queries
fail is reported unhealthy rather than ending the scan.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MIB = 1 << 20
"""Bytes in a MiB."""


@dataclass(frozen=True)
class Gpu:
    """One GPU of the node."""

    index: int
    """NVML index."""
    uuid: str
    """NVML UUID (``GPU-...``)."""
    model: str
    """Product name."""
    memory_mib: int
    """Total memory, MiB."""
    mig: bool
    """MIG mode enabled now."""
    healthy: bool = True
    """Every NVML query of it answered (an unhealthy GPU is left out of the slice)."""


def _nvml() -> Any:
    try:
        import pynvml  # type: ignore[import-untyped]  # noqa: PLC0415 (the k8s extra)
    except ImportError:
        raise OSError(
            "NVML bindings missing: install arkgpu[k8s] (nvidia-ml-py), or set nvml = false"
        ) from None
    return pynvml


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def discover() -> list[Gpu]:
    """Every GPU NVML sees; OSError with one line when NVML cannot be used at all."""
    nv = _nvml()
    try:
        nv.nvmlInit()
    except nv.NVMLError as exc:
        raise OSError(f"NVML: cannot initialise ({exc}): no NVIDIA driver on this node?") from None
    try:
        return [_gpu(nv, i) for i in range(nv.nvmlDeviceGetCount())]
    finally:
        nv.nvmlShutdown()


def _gpu(nv: Any, index: int) -> Gpu:
    try:
        handle = nv.nvmlDeviceGetHandleByIndex(index)
        uuid = _text(nv.nvmlDeviceGetUUID(handle))
    except nv.NVMLError:
        return Gpu(index, f"unknown-{index}", "unknown", 0, False, healthy=False)
    try:
        name = _text(nv.nvmlDeviceGetName(handle))
        memory = int(nv.nvmlDeviceGetMemoryInfo(handle).total) // MIB
    except nv.NVMLError:
        return Gpu(index, uuid, "unknown", 0, False, healthy=False)
    try:
        mig = bool(nv.nvmlDeviceGetMigMode(handle)[0])
    except nv.NVMLError:
        mig = False  # not supported on this GPU
    return Gpu(index, uuid, name, memory, mig)


def assumed(count: int, memory_mib: int) -> list[Gpu]:
    """``count`` GPUs without NVML (config ``nvml = false``)."""
    return [Gpu(i, f"GPU-assumed-{i}", "unknown", memory_mib, False) for i in range(count)]
