"""The largest GPU memory in the cluster, from the nodes' inventory annotations."""

from __future__ import annotations

import logging
import queue
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from arkgpu.k8s import contract
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
    assert index.largest() is None
    assert not index.listed
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


def _node(name: str, annotations: dict[str, str] | None) -> SimpleNamespace:
    return SimpleNamespace(metadata=SimpleNamespace(name=name, annotations=annotations))


class FakeCore:
    """``list_node`` of a CoreV1Api: the nodes given, then a failure when told."""

    def __init__(self, nodes: list[SimpleNamespace]) -> None:
        self.nodes, self.lists, self.fail = nodes, 0, False

    def list_node(self) -> SimpleNamespace:
        self.lists += 1
        if self.fail:
            raise ConnectionError("API server gone")
        return SimpleNamespace(
            items=list(self.nodes), metadata=SimpleNamespace(resource_version="7")
        )


class FakeWatch:
    """``stream`` yields the events put in its queue; ``None`` ends the stream; an exception
    is raised (as a broken connection)."""

    def __init__(self) -> None:
        self.events: queue.Queue[Any] = queue.Queue()
        self.versions: list[str] = []

    def stream(self, func: Any, resource_version: str, timeout_seconds: int) -> Iterator[Any]:
        self.versions.append(resource_version)
        while True:
            event = self.events.get(timeout=30)
            if event is None:
                return
            if isinstance(event, Exception):
                raise event
            yield event

    def stop(self) -> None:
        self.events.put(None)


def _until(probe: Any, what: str) -> None:
    deadline = time.monotonic() + 30
    while not probe():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def test_watcher_lists_follows_events_and_relists_after_a_failure() -> None:
    """List, then ADDED/MODIFIED/DELETED move the index; a broken watch relists (state rebuilt
    from the list, not lost); a failed list is retried; stop ends the thread."""
    core = FakeCore([_node("a", _inventory(16_384))])
    fake = FakeWatch()
    watcher = NodeWatcher(core, fake, GpuMemoryIndex(), retry_s=0.01)
    watcher.start()
    _until(lambda: watcher.index.listed, "first list")
    assert watcher.largest() == 16_384
    fake.events.put({"type": "ADDED", "object": _node("b", _inventory(81_920))})
    _until(lambda: watcher.largest() == 81_920, "ADDED seen")
    fake.events.put({"type": "MODIFIED", "object": _node("b", _inventory(40_960))})
    _until(lambda: watcher.largest() == 40_960, "MODIFIED seen")
    fake.events.put({"type": "DELETED", "object": _node("b", None)})
    _until(lambda: watcher.largest() == 16_384, "DELETED seen")
    core.nodes = [_node("a", _inventory(16_384)), _node("c", _inventory(143_771))]
    core.fail = True
    fake.events.put(ConnectionResetError("watch broken"))
    _until(lambda: core.lists >= 3, "list retried after a failure")
    core.fail = False
    _until(lambda: watcher.largest() == 143_771, "relisted")
    assert fake.versions[0] == "7"
    watcher.stop()
    watcher._thread.join(timeout=30)
    assert not watcher._thread.is_alive()
