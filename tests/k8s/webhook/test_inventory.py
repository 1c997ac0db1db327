"""The largest GPU memory in the cluster, from the nodes' inventory annotations."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest

from arkgpu.k8s import contract
from arkgpu.k8s.cluster.api import ApiError, Listed
from arkgpu.k8s.cluster.memory import MemoryApi
from arkgpu.k8s.cluster.watching import WatchConfig
from arkgpu.k8s.webhook.inventory import GpuMemoryIndex, NodeWatcher, largest_memory_mib


def _inventory(*memories: int, mig: int | None = None) -> dict[str, str]:
    gpus = tuple(
        contract.InventoryGpu(n, f"GPU-{n}", "NVIDIA A100", mib, mig=(n == mig))
        for n, mib in enumerate(memories)
    )
    return {contract.ANNOTATION_INVENTORY: contract.NodeInventory(gpus).to_json()}


def test_largest_per_node_skips_mig_and_bad_inventories(caplog: pytest.LogCaptureFixture) -> None:
    """A node's largest non-MIG GPU; none for no annotation, only MIG GPUs, or bad JSON (logged)."""
    assert largest_memory_mib(_inventory(40_960, 81_920)) == 81_920
    assert largest_memory_mib(_inventory(40_960, 143_771, mig=1)) == 40_960
    assert largest_memory_mib(_inventory(81_920, mig=0)) is None
    assert largest_memory_mib(None) is None
    assert largest_memory_mib({"other": "x"}) is None
    with caplog.at_level(logging.WARNING):
        assert largest_memory_mib({contract.ANNOTATION_INVENTORY: "{not json"}) is None
    assert "arkgpu.io/gpu-inventory" in caplog.text


def test_index_follows_list_and_watch_events() -> None:
    """Unknown until listed nodes have inventories; updates and deletions move the maximum."""
    index = GpuMemoryIndex()
    assert (index.largest(), index.listed) == (None, False)
    index.replace_all({"a": _inventory(16_384), "b": None})
    assert index.listed
    assert index.largest() == 16_384
    index.update("b", _inventory(81_920))
    assert index.largest() == 81_920
    index.update("b", {})
    assert index.largest() == 16_384
    index.update("c", _inventory(143_771))
    index.remove("c")
    assert index.largest() == 16_384
    index.replace_all({})
    assert index.largest() is None


def _node(name: str, annotations: dict[str, str] | None) -> dict[str, Any]:
    return {"metadata": {"name": name, "annotations": annotations}}


class CountingApi(MemoryApi):
    """Counts lists; the watch breaks (a cut connection, not a 410) while ``broken``."""

    def __init__(self) -> None:
        super().__init__()
        self.lists, self.broken = 0, 0
        self.watched_from: list[str] = []

    def list(self, resource: str) -> Listed:
        self.lists += 1
        return super().list(resource)

    def watch(self, resource: str, resource_version: str, timeout_s: float) -> Iterator[Any]:
        self.watched_from.append(resource_version)
        if self.broken:
            self.broken -= 1
            raise ApiError(0, "connection reset")
        return super().watch(resource, resource_version, timeout_s)


def _until(probe: Any, what: str) -> None:
    deadline = time.monotonic() + 30
    while not probe():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def test_watcher_is_the_reflector_resuming_a_broken_watch_without_relisting() -> None:
    """List, then ADDED/MODIFIED/DELETED move the index; a broken watch resumes from the last
    version it saw (one list in all, as every reflector of the project); stop ends it."""
    api = CountingApi()
    api.put("nodes", _node("a", _inventory(16_384)))
    timing = WatchConfig(timeout_s=0.5, backoff_min_s=0.01, backoff_max_s=0.05)
    watcher = NodeWatcher(api, GpuMemoryIndex(), timing)
    thread = watcher.start()
    _until(lambda: watcher.index.listed, "first list")
    assert watcher.largest() == 16_384
    api.put("nodes", _node("b", _inventory(81_920)))
    _until(lambda: watcher.largest() == 81_920, "ADDED seen")
    api.put("nodes", _node("b", _inventory(40_960)))
    _until(lambda: watcher.largest() == 40_960, "MODIFIED seen")
    api.broken = 3
    _until(lambda: not api.broken, "watch broken three times")
    api.delete("nodes", "b")
    _until(lambda: watcher.largest() == 16_384, "DELETED seen after the breaks")
    api.put("nodes", _node("c", _inventory(143_771)))
    _until(lambda: watcher.largest() == 143_771, "ADDED seen")
    assert api.lists == 1
    assert all(v != "0" for v in api.watched_from[1:])
    watcher.stop()
    thread.join(timeout=30)
    assert not thread.is_alive()
