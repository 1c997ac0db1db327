"""The largest GPU memory in the cluster, from the nodes' inventory annotations."""

from __future__ import annotations

import logging

import pytest

from arkgpu.k8s import contract
from arkgpu.k8s.webhook.inventory import GpuMemoryIndex, largest_memory_mib


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
