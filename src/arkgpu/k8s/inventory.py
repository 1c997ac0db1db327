"""The node inventory: this node's GPUs on its Node object (``arkgpu.io/gpu-inventory``).

Run by ``arkgpu device-plugin run`` beside the device plugin (one DaemonSet
container does both; docs/k8s/DEVICE-PLUGIN.md): at start and whenever a scan
finds the GPUs or their health changed, it writes a
:class:`~arkgpu.k8s.contract.NodeInventory` with a JSON merge patch of that one
annotation, with the node runtime's online-calibration corrections per model
(``<regions_dir>/calibration.json``) when it has published some. The extender
reads it to know the node's GPUs and sizes LC pods with the corrections. A failed write is
retried at the next scan (nothing is marked published until the API server
took it).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from arkgpu.colocation.calibration import published_models
from arkgpu.k8s.contract import ANNOTATION_INVENTORY, CORRECTION_RANGE, InventoryGpu, NodeInventory


class NodeAnnotator(Protocol):
    """The API-server call the inventory needs."""

    def annotate_node(self, node: str, annotations: dict[str, str]) -> None:
        """Merge ``annotations`` into the node's."""
        ...


Corrections = tuple[tuple[str, float], ...]
"""Online calibration's (model, factor) pairs, sorted by model."""


def read_corrections(path: Path) -> Corrections:
    """The per-model corrections the node runtime published at ``path``
    (``<regions_dir>/calibration.json``); () when it has published none or the file is
    unreadable (the runtime rewrites it whole, atomically)."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ()
    low, high = CORRECTION_RANGE
    return tuple((m, min(max(f, low), high)) for m, f in published_models(doc))


class InventoryPublisher:
    """Writes the node's inventory when it changes."""

    def __init__(
        self,
        api: NodeAnnotator,
        node: str,
        clock: Callable[[], str],
        corrections: Callable[[], Corrections] = lambda: (),
    ) -> None:
        self.api, self.node, self.clock, self.corrections = api, node, clock, corrections
        self._published: tuple[tuple[InventoryGpu, ...], Corrections] | None = None

    def publish(self, gpus: tuple[InventoryGpu, ...]) -> bool:
        """Write ``gpus`` and the node runtime's corrections unless they are what was last
        written; True when written.

        Errors of the API server propagate (the caller logs them and calls again later).
        """
        now = (gpus, self.corrections())
        if now == self._published:
            return False
        inventory = NodeInventory(gpus, updated=self.clock(), corrections=now[1])
        self.api.annotate_node(self.node, {ANNOTATION_INVENTORY: inventory.to_json()})
        self._published = now
        return True
