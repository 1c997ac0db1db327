"""Reconciling the node's slice: create once, update on a change only, delete on stop."""

from __future__ import annotations

import copy
from typing import Any

from arkgpu.k8s.contract import InventoryGpu
from arkgpu.k8s.dra.publishing import DEVICES_HASH, Publisher
from arkgpu.k8s.dra.slices import devices


class MemorySlices:
    """An in-memory API server for slices (resourceVersion checked on replace)."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.writes = 0

    def get(self, name: str) -> dict[str, Any] | None:
        found = self.objects.get(name)
        return copy.deepcopy(found) if found is not None else None

    def create(self, body: dict[str, Any]) -> None:
        name = body["metadata"]["name"]
        assert name not in self.objects, "already exists"
        self._store(name, body)

    def replace(self, name: str, body: dict[str, Any]) -> None:
        stored = self.objects[name]["metadata"]["resourceVersion"]
        assert body["metadata"]["resourceVersion"] == stored, "stale resourceVersion"
        self._store(name, body)

    def delete(self, name: str) -> None:
        self.objects.pop(name, None)

    def _store(self, name: str, body: dict[str, Any]) -> None:
        self.writes += 1
        stored = copy.deepcopy(body)
        stored["metadata"]["resourceVersion"] = str(self.writes)
        self.objects[name] = stored


def _devices(*gpus: InventoryGpu) -> list[dict[str, Any]]:
    return devices(list(gpus), 256, 5)


A = InventoryGpu(0, "GPU-a", "m", 8192, False)
B = InventoryGpu(1, "GPU-b", "m", 8192, False)


def test_created_then_unchanged_while_the_gpus_stay_the_same() -> None:
    """A second reconcile with the same GPUs writes nothing."""
    api = MemorySlices()
    publisher = Publisher(api, "n1", "gpu.arkgpu.io")
    assert publisher.reconcile(_devices(A, B)) == "created"
    assert publisher.reconcile(_devices(A, B)) == "unchanged"
    assert api.writes == 1
    stored = api.objects["n1-gpu.arkgpu.io"]
    assert stored["spec"]["pool"]["generation"] == 1
    assert DEVICES_HASH in stored["metadata"]["annotations"]


def test_a_gpu_gone_or_back_updates_the_slice_and_bumps_the_pool_generation() -> None:
    """A GPU failing (left out) and coming back: two updates, generations 2 and 3."""
    api = MemorySlices()
    publisher = Publisher(api, "n1", "gpu.arkgpu.io")
    publisher.reconcile(_devices(A, B))
    assert publisher.reconcile(_devices(A)) == "updated"
    stored = api.objects["n1-gpu.arkgpu.io"]
    assert [d["name"] for d in stored["spec"]["devices"]] == ["gpu-0"]
    assert stored["spec"]["pool"]["generation"] == 2
    assert publisher.reconcile(_devices(A, B)) == "updated"
    assert api.objects["n1-gpu.arkgpu.io"]["spec"]["pool"]["generation"] == 3


def test_withdraw_deletes_the_slice_and_tolerates_it_gone() -> None:
    """Deleting twice is fine (the API's 404 is not an error)."""
    api = MemorySlices()
    publisher = Publisher(api, "n1", "gpu.arkgpu.io")
    publisher.reconcile(_devices(A))
    publisher.withdraw()
    publisher.withdraw()
    assert api.objects == {}
