"""The node's GPUs and their health, from NVML (nvidia-ml-py; the fake libnvidia-ml in tests).

The device plugin (its inventory and ListAndWatch) and the DRA driver (its
ResourceSlice) read the node's GPUs here (``arkgpu.node.gpus`` is a sibling
layer): each scan asks NVML for every GPU's UUID, name, memory and MIG mode.
A GPU whose queries fail (``NVML_ERROR_GPU_IS_LOST`` after it fell off the
bus, an XID that left it unusable) is reported unhealthy under the identity
it had at its last good scan, so the kubelet sees the same devices turn
Unhealthy rather than disappear.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Protocol

from arkgpu.k8s.contract import InventoryGpu

MIB = 1 << 20
"""Bytes in a MiB."""


class GpuSource(Protocol):
    """Where the device plugin, the inventory and the DRA driver learn the node's GPUs."""

    def scan(self) -> tuple[InventoryGpu, ...]:
        """Every GPU of the node now, by index, with its health."""
        ...


def _pynvml() -> Any:
    try:
        import pynvml  # type: ignore[import-untyped]  # noqa: PLC0415 (the k8s extra)
    except ImportError:
        raise OSError(
            "NVML bindings missing: install arkgpu[k8s] (nvidia-ml-py), or set nvml = false"
        ) from None
    return pynvml


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class NvmlGpus:
    """GPUs through NVML, initialised once and kept for the process's life."""

    def __init__(self) -> None:
        self._nv: Any = None
        self._known: dict[int, InventoryGpu] = {}

    def _init(self) -> Any:
        if self._nv is None:
            nv = _pynvml()
            try:
                nv.nvmlInit()
            except nv.NVMLError as exc:
                raise OSError(f"NVML: cannot initialise ({exc}): no NVIDIA driver here?") from None
            self._nv = nv
        return self._nv

    def scan(self) -> tuple[InventoryGpu, ...]:
        """Every GPU NVML counts; OSError with one line when NVML cannot be used at all."""
        nv = self._init()
        try:
            count = int(nv.nvmlDeviceGetCount())
        except nv.NVMLError as exc:
            raise OSError(f"NVML: cannot count the GPUs ({exc})") from None
        return tuple(self._probe(nv, i) for i in range(count))

    def _probe(self, nv: Any, index: int) -> InventoryGpu:
        try:
            gpu = _read(nv, index)
        except nv.NVMLError:
            known = self._known.get(index)
            if known is not None:
                return replace(known, healthy=False)
            return InventoryGpu(index, f"unknown-gpu-{index}", "unknown", 1, healthy=False)
        self._known[index] = gpu
        return gpu

    def close(self) -> None:
        """Shut NVML down (end of the process)."""
        if self._nv is not None:
            self._nv.nvmlShutdown()
            self._nv = None


def _read(nv: Any, index: int) -> InventoryGpu:
    handle = nv.nvmlDeviceGetHandleByIndex(index)
    try:
        mig = bool(nv.nvmlDeviceGetMigMode(handle)[0])
    except nv.NVMLError_NotSupported:
        mig = False
    return InventoryGpu(
        index=index,
        uuid=_text(nv.nvmlDeviceGetUUID(handle)),
        model=_text(nv.nvmlDeviceGetName(handle)),
        memory_mib=max(1, int(nv.nvmlDeviceGetMemoryInfo(handle).total) // MIB),
        mig=mig,
        minor=int(nv.nvmlDeviceGetMinorNumber(handle)),
    )


class AssumedGpus:
    """``count`` healthy GPUs of ``memory_mib`` without NVML (config ``nvml = false``)."""

    def __init__(self, count: int, memory_mib: int) -> None:
        self._gpus = tuple(
            InventoryGpu(i, f"GPU-assumed-{i}", "assumed", memory_mib) for i in range(count)
        )

    def scan(self) -> tuple[InventoryGpu, ...]:
        """The same GPUs every time."""
        return self._gpus
