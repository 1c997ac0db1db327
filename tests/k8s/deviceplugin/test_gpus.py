"""The NVML adapter: health from failing queries, identity kept, one-line errors (a scripted
pynvml stands in; the conformance test runs the real bindings on the fake libnvidia-ml)."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from arkgpu.k8s.contract import InventoryGpu
from arkgpu.k8s.gpus import NvmlGpus


class NVMLError(Exception):
    pass


class NotSupportedError(NVMLError):
    pass


def _nvml(lost: set[int], count: int = 2, init_fails: bool = False) -> Any:
    """A pynvml whose GPUs in ``lost`` fail every query."""

    def handle(i: int) -> int:
        if i in lost:
            raise NVMLError("GPU is lost")
        return i

    def init() -> None:
        if init_fails:
            raise NVMLError("driver not loaded")

    memory = types.SimpleNamespace(total=8 << 30)
    return types.SimpleNamespace(
        NVMLError=NVMLError,
        NVMLError_NotSupported=NotSupportedError,
        nvmlInit=init,
        nvmlShutdown=lambda: None,
        nvmlDeviceGetCount=lambda: count,
        nvmlDeviceGetHandleByIndex=handle,
        nvmlDeviceGetMigMode=lambda _: (0, 0),
        nvmlDeviceGetUUID=lambda h: f"GPU-{h}".encode(),
        nvmlDeviceGetName=lambda _: "H200",
        nvmlDeviceGetMemoryInfo=lambda _: memory,
        nvmlDeviceGetMinorNumber=lambda h: 7 - h,
    )


def test_a_lost_gpu_keeps_its_identity_and_turns_unhealthy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Seen healthy once, then failing: same UUID, model and memory, healthy false; a GPU that
    never answered is listed with a placeholder identity so indices stay 0..n-1."""
    lost: set[int] = set()
    monkeypatch.setitem(sys.modules, "pynvml", _nvml(lost))
    gpus = NvmlGpus()
    first = gpus.scan()
    assert [(g.uuid, g.model, g.memory_mib, g.healthy, g.minor) for g in first] == [
        ("GPU-0", "H200", 8192, True, 7),
        ("GPU-1", "H200", 8192, True, 6),
    ]
    lost.add(1)
    assert gpus.scan() == (
        first[0],
        InventoryGpu(1, "GPU-1", "H200", 8192, healthy=False, minor=6),
    )
    fresh = NvmlGpus()
    assert [(g.index, g.uuid, g.healthy) for g in fresh.scan()] == [
        (0, "GPU-0", True),
        (1, "unknown-gpu-1", False),
    ]


def test_nvml_that_cannot_start_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """No driver: OSError naming NVML and the cause."""
    monkeypatch.setitem(sys.modules, "pynvml", _nvml(set(), init_fails=True))
    with pytest.raises(OSError, match=r"^NVML: cannot initialise \(driver not loaded\)"):
        NvmlGpus().scan()
