"""The largest GPU memory in the cluster, from the nodes' inventory annotations.

The validating webhook refuses ``nvidia.com/gpumem`` over the largest GPU any
node has. Each node's agent publishes its GPUs in ``arkgpu.io/gpu-inventory``
(:class:`arkgpu.k8s.contract.NodeInventory`); :class:`NodeWatcher` lists the
nodes once and then watches them through the project's reflector
(:class:`arkgpu.k8s.cluster.watching.Reflector`), keeping :class:`GpuMemoryIndex`
current. MIG-mode GPUs are left out (ArkGPU does
not share them). A node with a malformed inventory counts as having none (its
agent's log says why; the webhook must not refuse pods over another component's
bug). Until the first list is in, or while no node has an inventory, the
largest memory is unknown and the bound is not checked.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from pathlib import Path

from arkgpu.k8s import contract
from arkgpu.k8s.cluster.api import ClusterApi, Json
from arkgpu.k8s.cluster.watching import Reflector, WatchConfig

LOG = logging.getLogger(__name__)

WATCH_TIMEOUT_S = 300.0
"""Server-side length of one watch request, seconds (then it is renewed)."""
RETRY_S = 5.0
"""Longest wait after a failed list or watch before the next try, seconds."""


def largest_memory_mib(annotations: Mapping[str, str] | None) -> int | None:
    """The largest non-MIG GPU memory of a node's inventory annotation (None: none)."""
    text = (annotations or {}).get(contract.ANNOTATION_INVENTORY)
    if text is None:
        return None
    try:
        inventory = contract.NodeInventory.from_json(text)
    except contract.ContractError as exc:
        LOG.warning("ignoring a node inventory: %s", exc)
        return None
    return max((g.memory_mib for g in inventory.gpus if not g.mig), default=None)


class GpuMemoryIndex:
    """Largest GPU memory per node, thread-safe (the watch writes, requests read)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._nodes: dict[str, int] = {}
        self._listed = False

    def replace_all(self, nodes: Mapping[str, Mapping[str, str] | None]) -> None:
        """The state after a full list: node name -> its annotations."""
        sizes = {name: largest_memory_mib(a) for name, a in nodes.items()}
        with self._lock:
            self._nodes = {name: mib for name, mib in sizes.items() if mib is not None}
            self._listed = True

    def update(self, name: str, annotations: Mapping[str, str] | None) -> None:
        """A node added or changed."""
        mib = largest_memory_mib(annotations)
        with self._lock:
            if mib is None:
                self._nodes.pop(name, None)
            else:
                self._nodes[name] = mib

    def remove(self, name: str) -> None:
        """A node deleted."""
        with self._lock:
            self._nodes.pop(name, None)

    def largest(self) -> int | None:
        """The largest GPU memory of any node, MiB; None when unknown."""
        with self._lock:
            return max(self._nodes.values(), default=None)

    @property
    def listed(self) -> bool:
        """Whether a first full list is in."""
        return self._listed


class _IndexSink:
    """What the node reflector learns, put into a :class:`GpuMemoryIndex`."""

    def __init__(self, index: GpuMemoryIndex) -> None:
        self.index = index

    def replace(self, resource: str, items: list[Json]) -> None:
        nodes = {str(n["metadata"]["name"]): _annotations(n) for n in items}
        self.index.replace_all(nodes)
        LOG.info("listed %d nodes; largest GPU memory %s MiB", len(nodes), self.index.largest())

    def event(self, resource: str, kind: str, obj: Json) -> None:
        name = str(obj["metadata"]["name"])
        if kind == "DELETED":
            self.index.remove(name)
        else:
            self.index.update(name, _annotations(obj))


def _annotations(node: Json) -> Mapping[str, str] | None:
    annotations: Mapping[str, str] | None = node.get("metadata", {}).get("annotations")
    return annotations


class NodeWatcher:
    """Keeps a :class:`GpuMemoryIndex` current from a list and watch of nodes: the one
    :class:`~arkgpu.k8s.cluster.watching.Reflector` every ArkGPU component follows the
    API server with (a broken watch resumes from its last version, a 410 lists again)."""

    def __init__(self, api: ClusterApi, index: GpuMemoryIndex, config: WatchConfig) -> None:
        self.index = index
        self.reflector = Reflector("nodes", api, _IndexSink(index), config)

    @classmethod
    def connect(cls, kubeconfig: Path | None, index: GpuMemoryIndex) -> NodeWatcher:
        """A watcher over the API server of ``kubeconfig`` (None: the pod's service account)."""
        from arkgpu.k8s.cluster.kube import KubeApi, load_client  # noqa: PLC0415 (kubernetes)

        timing = WatchConfig(WATCH_TIMEOUT_S, backoff_max_s=RETRY_S)
        return cls(KubeApi(load_client(kubeconfig)), index, timing)

    def start(self) -> threading.Thread:
        """Lists and watches on a background (daemon) thread."""
        return self.reflector.start()

    def stop(self) -> None:
        """Ends the watch (the thread ends at the next event or when the watch times out)."""
        self.reflector.stopping.set()

    def largest(self) -> int | None:
        """The index's largest GPU memory, MiB."""
        return self.index.largest()
