"""Device order in the slice: loads from allocated claims, most-loaded-with-room first."""

from __future__ import annotations

from typing import Any

import pytest

from arkgpu.k8s.contract import InventoryGpu
from arkgpu.k8s.dra.ordering import device_loads, ordered
from arkgpu.k8s.dra.slices import devices

DRIVER = "gpu.arkgpu.io"


def _claim(*results: tuple[str, str, str | None]) -> dict[str, Any]:
    out = []
    for pool, device, cores in results:
        result: dict[str, Any] = {"driver": DRIVER, "pool": pool, "device": device}
        if cores is not None:
            result["consumedCapacity"] = {"memory": "256Mi", "cores": cores}
        out.append(result)
    return {"status": {"allocation": {"devices": {"results": out}}}}


def test_loads_sum_this_pools_consumed_cores() -> None:
    claims = [
        _claim(("n1", "gpu-0", "30"), ("n1", "gpu-1", "40")),
        _claim(("n1", "gpu-0", "25")),
        _claim(("n2", "gpu-0", "50")),  # another node
        _claim(("n1", "gpu-2", None)),  # allocated whole
        {"status": {}},  # pending
        {"status": {"allocation": {"devices": {"results": [{"driver": "other", "pool": "n1"}]}}}},
    ]
    assert device_loads(claims, DRIVER, "n1") == {"gpu-0": 55, "gpu-1": 40, "gpu-2": 100}


def _names(order: str, loads: dict[str, int]) -> list[str]:
    gpus = [InventoryGpu(i, f"GPU-{i}", "T4", 16_384) for i in range(4)]
    return [d["name"] for d in ordered(devices(gpus, 256, 5), loads, order)]


def test_index_order_ignores_the_loads() -> None:
    assert _names("index", {"gpu-3": 90}) == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]


def test_pack_puts_the_most_loaded_with_room_first_and_full_last() -> None:
    loads = {"gpu-0": 100, "gpu-1": 20, "gpu-2": 70}
    assert _names("pack", loads) == ["gpu-2", "gpu-1", "gpu-3", "gpu-0"]
    assert _names("pack", {}) == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]


def test_unknown_order_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="device order: expected one of index, pack"):
        _names("spread", {})


class _Claims:
    def __init__(self, claims: list[dict[str, Any]]) -> None:
        self.claims = claims

    def list(self) -> list[dict[str, Any]]:
        return self.claims


def test_the_driver_lists_its_slice_in_the_configured_order() -> None:
    """serving.slice_devices: pack reads this node's loads; index reads nothing."""
    from arkgpu.k8s.dra.config import config_from_dict  # noqa: PLC0415
    from arkgpu.k8s.dra.serving import slice_devices  # noqa: PLC0415

    gpus = [InventoryGpu(i, f"GPU-{i}", "T4", 16_384) for i in range(3)]
    claims = _Claims([_claim(("n1", "gpu-1", "40"), ("n2", "gpu-2", "90"))])
    pack = config_from_dict({"node_name": "n1", "device_order": "pack"}, "c", {})
    listed = slice_devices(pack, gpus, claims)  # type: ignore[arg-type]
    assert [d["name"] for d in listed] == ["gpu-1", "gpu-0", "gpu-2"]
    index = config_from_dict({"node_name": "n1"}, "c", {})
    assert [d["name"] for d in slice_devices(index, gpus, None)] == ["gpu-0", "gpu-1", "gpu-2"]
