"""Reconciling the node's slice: create once, update on a change only, delete on stop."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from arkgpu.k8s.contract import InventoryGpu
from arkgpu.k8s.dra.publishing import DEVICES_HASH, KubernetesSlices, Publisher, SliceRefusedError
from arkgpu.k8s.dra.serving import withdraw
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


def _refusing_slices(status: int) -> KubernetesSlices:
    """The real adapter whose DELETE the API server answers with ``status``."""
    from kubernetes import client  # noqa: PLC0415 (the k8s extra)

    slices = KubernetesSlices(client.ApiClient())

    def delete(name: str, **_: Any) -> None:
        raise client.ApiException(status=status, reason="Forbidden" if status == 403 else "")

    slices._api.delete_resource_slice = delete  # the API server's answer
    return slices


def test_a_refused_delete_is_slice_refused_and_a_missing_slice_is_fine() -> None:
    """A 403 (the driver's RBAC gone before it, as ``helm uninstall`` does) is the one-line
    :class:`SliceRefusedError`, not the client's exception; a 404 is no error."""
    with pytest.raises(SliceRefusedError, match=r"^403 Forbidden$"):
        _refusing_slices(403).delete("n1-gpu.arkgpu.io")
    _refusing_slices(404).delete("n1-gpu.arkgpu.io")


def test_withdraw_at_exit_says_a_refusal_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """The driver stopping with its delete refused says so in one line naming the slice and
    the reason, and returns (the kubelet wipes the slice): no internal error."""
    withdraw(Publisher(_refusing_slices(403), "n1", "gpu.arkgpu.io"))
    [line] = capsys.readouterr().err.splitlines()
    assert "could not delete n1-gpu.arkgpu.io (403 Forbidden)" in line
