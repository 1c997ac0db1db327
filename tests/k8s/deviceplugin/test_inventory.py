"""The node inventory is written at start, on every change, and retried after a failure."""

from __future__ import annotations

import json
from pathlib import Path

from arkgpu.colocation.calibration import CALIBRATION_FILE
from arkgpu.k8s import contract
from arkgpu.k8s.contract import InventoryGpu, NodeInventory
from arkgpu.k8s.inventory import InventoryPublisher, read_corrections

from .fake_apiserver import MemoryApi

GPUS = (
    InventoryGpu(0, "GPU-a", "NVIDIA H200", 143_771),
    InventoryGpu(1, "GPU-b", "NVIDIA H200", 143_771),
)


def _published(api: MemoryApi) -> NodeInventory:
    return NodeInventory.from_json(api.node_annotations["n1"][contract.ANNOTATION_INVENTORY])


def test_publishes_once_per_change_with_the_contracts_json() -> None:
    """First scan: written; same scan: not again; a health change: written."""
    api = MemoryApi()
    ticks = iter(["2026-12-04T10:00:00Z", "2026-12-04T10:00:05Z"])
    publisher = InventoryPublisher(api, "n1", lambda: next(ticks))
    assert publisher.publish(GPUS)
    assert _published(api) == NodeInventory(GPUS, "2026-12-04T10:00:00Z")
    assert not publisher.publish(GPUS)
    sick = (GPUS[0], InventoryGpu(1, "GPU-b", "NVIDIA H200", 143_771, healthy=False))
    assert publisher.publish(sick)
    assert _published(api) == NodeInventory(sick, "2026-12-04T10:00:05Z")


def test_a_failed_write_is_retried_at_the_next_call() -> None:
    """The API server away: the error propagates and the next call writes."""
    api = MemoryApi()
    api.fail_next = 1
    publisher = InventoryPublisher(api, "n1", lambda: "t")
    try:
        publisher.publish(GPUS)
    except ConnectionError:
        pass
    else:
        raise AssertionError("the failure was swallowed")
    assert "n1" not in api.node_annotations
    assert publisher.publish(GPUS)
    assert _published(api).gpus == GPUS


def test_the_node_runtimes_corrections_reach_the_inventory_when_they_change(
    tmp_path: Path,
) -> None:
    """The runtime's calibration.json (per model: the largest factor of its services) is
    copied into the inventory; a changed file is written again, an unchanged one is not; a
    missing or broken file means no corrections."""
    path = tmp_path / CALIBRATION_FILE
    api = MemoryApi()
    publisher = InventoryPublisher(api, "n1", lambda: "t", lambda: read_corrections(path))
    assert publisher.publish(GPUS)
    assert _published(api).corrections == ()
    doc = {
        "services": {"a": {"model": "resnet50", "gpu": 0, "factor": 1.42}},
        "models": {"resnet50": 1.42, "vgg19": 0.97},
    }
    path.write_text(json.dumps(doc))
    assert publisher.publish(GPUS)
    assert _published(api).corrections == (("resnet50", 1.42), ("vgg19", 0.97))
    assert not publisher.publish(GPUS)
    path.write_text("{not json")
    assert publisher.publish(GPUS)
    assert _published(api).corrections == ()
    path.write_text(json.dumps({"models": {"resnet50": 50.0, "x": "y"}}))
    assert read_corrections(path) == (("resnet50", 10.0),)  # clamped to the contract's range
