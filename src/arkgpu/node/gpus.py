"""GPU discovery through NVML (nvidia-ml-py; the fake libnvidia-ml in tests)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MIB = 1 << 20
"""Bytes in a MiB."""


@dataclass(frozen=True)
class GpuInfo:
    """One GPU of the node as NVML reports it."""

    index: int
    """NVML index (the ``gpu`` of a pod on it)."""
    uuid: str
    """NVML UUID."""
    name: str
    """Product name."""
    memory_mib: int
    """Total memory, MiB."""
    mig: bool
    """MIG mode enabled now."""


def _nvml() -> Any:
    try:
        import pynvml  # type: ignore[import-untyped]  # noqa: PLC0415 (optional: [node] extra)
    except ImportError:
        raise OSError(
            "NVML bindings missing: install arkgpu[node] (nvidia-ml-py), or set nvml = false"
        ) from None
    return pynvml


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def discover() -> list[GpuInfo]:
    """Every GPU NVML sees; OSError with one line when NVML cannot be used."""
    nv = _nvml()
    try:
        nv.nvmlInit()
    except nv.NVMLError as exc:
        raise OSError(f"NVML: cannot initialise ({exc}): no NVIDIA driver on this node?") from None
    try:
        return [_info(nv, i) for i in range(nv.nvmlDeviceGetCount())]
    finally:
        nv.nvmlShutdown()


def _info(nv: Any, index: int) -> GpuInfo:
    handle = nv.nvmlDeviceGetHandleByIndex(index)
    try:
        mig = bool(nv.nvmlDeviceGetMigMode(handle)[0])
    except nv.NVMLError:
        mig = False
    return GpuInfo(
        index,
        _text(nv.nvmlDeviceGetUUID(handle)),
        _text(nv.nvmlDeviceGetName(handle)),
        int(nv.nvmlDeviceGetMemoryInfo(handle).total) // MIB,
        mig,
    )


def assumed(count: int) -> list[GpuInfo]:
    """``count`` GPUs without NVML (config ``nvml = false``)."""
    return [GpuInfo(i, f"assumed-{i}", "unknown", 0, False) for i in range(count)]


def nvml_handles(indices: list[int]) -> dict[int, Any]:
    """NVML handles of ``indices``, NVML left initialised (metrics, backstop)."""
    nv = _nvml()
    nv.nvmlInit()
    return {i: nv.nvmlDeviceGetHandleByIndex(i) for i in indices}
