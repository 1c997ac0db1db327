"""The node inventory: this node's GPUs on its Node object (``arkgpu.io/gpu-inventory``).

Run by ``arkgpu device-plugin run`` beside the device plugin (one DaemonSet
container does both; docs/k8s/DEVICE-PLUGIN.md): at start and whenever a scan
finds the GPUs or their health changed, it writes a
:class:`~arkgpu.k8s.contract.NodeInventory` with a JSON merge patch of that one
annotation. The extender reads it to know the node's GPUs. A failed write is
retried at the next scan (nothing is marked published until the API server
took it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from arkgpu.k8s.contract import ANNOTATION_INVENTORY, InventoryGpu, NodeInventory


class NodeAnnotator(Protocol):
    """The API-server call the inventory needs."""

    def annotate_node(self, node: str, annotations: dict[str, str]) -> None:
        """Merge ``annotations`` into the node's."""
        ...


class InventoryPublisher:
    """Writes the node's inventory when it changes."""

    def __init__(self, api: NodeAnnotator, node: str, clock: Callable[[], str]) -> None:
        self.api, self.node, self.clock = api, node, clock
        self._published: tuple[InventoryGpu, ...] | None = None

    def publish(self, gpus: tuple[InventoryGpu, ...]) -> bool:
        """Write ``gpus`` unless they are what was last written; True when written.

        Errors of the API server propagate (the caller logs them and calls again later).
        """
        if gpus == self._published:
            return False
        inventory = NodeInventory(gpus, updated=self.clock())
        self.api.annotate_node(self.node, {ANNOTATION_INVENTORY: inventory.to_json()})
        self._published = gpus
        return True
