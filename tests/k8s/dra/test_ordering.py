"""Device order in the slice: loads from allocated claims, most-loaded-with-room first."""

from __future__ import annotations

import time
from typing import Any

import pytest

from arkgpu.k8s.cluster.api import Listed
from arkgpu.k8s.cluster.memory import MemoryApi
from arkgpu.k8s.cluster.watching import Reflector, WatchConfig
from arkgpu.k8s.contract import InventoryGpu
from arkgpu.k8s.dra.ordering import ClaimLoads, device_loads, ordered
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


def _named(name: str, claim: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"}, **claim}


class _CountingApi(MemoryApi):
    def __init__(self) -> None:
        super().__init__()
        self.lists = 0

    def list(self, resource: str) -> Listed:
        self.lists += 1
        return super().list(resource)


def test_pack_loads_follow_a_watch_of_the_claims_listed_once() -> None:
    """The driver's loads come from one list and then the watch: a claim allocated, one
    deallocated, one deleted each move them; no resync lists every claim again; the slice
    follows them in pack order, and index order reads nothing."""
    from arkgpu.k8s.dra.config import config_from_dict  # noqa: PLC0415
    from arkgpu.k8s.dra.serving import slice_devices  # noqa: PLC0415

    api = _CountingApi()
    api.put("resourceclaims", _named("a", _claim(("n1", "gpu-1", "40"), ("n2", "gpu-2", "90"))))
    loads = ClaimLoads(DRIVER, "n1")
    timing = WatchConfig(timeout_s=0.3, backoff_min_s=0.01, backoff_max_s=0.05)
    reflector = Reflector("resourceclaims", api, loads, timing)
    thread = reflector.start()
    try:
        assert reflector.listed.wait(30)
        gpus = [InventoryGpu(i, f"GPU-{i}", "T4", 16_384) for i in range(3)]
        pack = config_from_dict({"node_name": "n1", "device_order": "pack"}, "c", {})
        assert [d["name"] for d in slice_devices(pack, gpus, loads)] == ["gpu-1", "gpu-0", "gpu-2"]
        api.put("resourceclaims", _named("b", _claim(("n1", "gpu-2", "70"))))
        _until(lambda: loads.loads() == {"gpu-1": 40, "gpu-2": 70})
        api.put("resourceclaims", _named("a", {"status": {}}))  # deallocated
        _until(lambda: loads.loads() == {"gpu-2": 70})
        api.delete("resourceclaims", "ns/b")
        _until(lambda: loads.loads() == {})
        time.sleep(1.0)  # several watch windows: each resumes, none lists again
        assert api.lists == 1
    finally:
        reflector.stopping.set()
        thread.join(timeout=30)
    index = config_from_dict({"node_name": "n1"}, "c", {})
    assert [d["name"] for d in slice_devices(index, gpus, None)] == ["gpu-0", "gpu-1", "gpu-2"]


def _until(probe: Any) -> None:
    deadline = time.monotonic() + 30
    while not probe():
        assert time.monotonic() < deadline
        time.sleep(0.01)
