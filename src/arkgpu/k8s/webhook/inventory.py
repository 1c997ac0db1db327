"""The largest GPU memory in the cluster, from the nodes' inventory annotations.

The validating webhook refuses ``nvidia.com/gpumem`` over the largest GPU any
node has. Each node's agent publishes its GPUs in ``arkgpu.io/gpu-inventory``
(:class:`arkgpu.k8s.contract.NodeInventory`); :class:`NodeWatcher` lists the
nodes once and then watches them with the official ``kubernetes`` client,
keeping :class:`GpuMemoryIndex` current. MIG-mode GPUs are left out (ArkGPU does
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
from typing import Any

from arkgpu.k8s import contract

LOG = logging.getLogger(__name__)

WATCH_TIMEOUT_S = 300
"""Server-side length of one watch request, seconds (then it is renewed)."""
RETRY_S = 5.0
"""Wait after a failed list or watch before the next list, seconds."""


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


def _line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300] or type(exc).__name__


class NodeWatcher:
    """Keeps a :class:`GpuMemoryIndex` current from a list and watch of nodes (a thread)."""

    def __init__(
        self, core: Any, watch: Any, index: GpuMemoryIndex, retry_s: float = RETRY_S
    ) -> None:
        """``core``: a ``CoreV1Api``; ``watch``: a ``kubernetes.watch.Watch`` (fakes in tests)."""
        self._core, self._watch, self.index, self.retry_s = core, watch, index, retry_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="node-watch", daemon=True)

    @classmethod
    def connect(cls, kubeconfig: Path | None, index: GpuMemoryIndex) -> NodeWatcher:
        """A watcher over the API server of ``kubeconfig`` (None: the pod's service account)."""
        from kubernetes import client, watch  # noqa: PLC0415 (only when nodes are watched)

        from arkgpu.k8s.cluster.kube import load_client  # noqa: PLC0415

        api = client.CoreV1Api(load_client(kubeconfig))
        return cls(api, watch.Watch(), index)  # type: ignore[no-untyped-call]

    def start(self) -> None:
        """Lists and watches on a background thread."""
        self._thread.start()

    def stop(self) -> None:
        """Ends the watch (the thread ends at the next event or timeout)."""
        self._stop.set()
        self._watch.stop()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._watch_from(self._list())
            except Exception as exc:  # a lost API server must not end the thread: relist
                LOG.warning(
                    "node list/watch failed, retrying in %g s: %s", self.retry_s, _line(exc)
                )
                self._stop.wait(self.retry_s)

    def _list(self) -> str:
        nodes = self._core.list_node()
        self.index.replace_all({n.metadata.name: n.metadata.annotations for n in nodes.items})
        LOG.info("listed %d nodes; largest GPU memory %s MiB", len(nodes.items), self.largest())
        return str(nodes.metadata.resource_version)

    def _watch_from(self, version: str) -> None:
        for event in self._watch.stream(
            self._core.list_node, resource_version=version, timeout_seconds=WATCH_TIMEOUT_S
        ):
            kind, node = event["type"], event["object"]
            if kind in ("ADDED", "MODIFIED"):
                self.index.update(node.metadata.name, node.metadata.annotations)
            elif kind == "DELETED":
                self.index.remove(node.metadata.name)
            if self._stop.is_set():
                return

    def largest(self) -> int | None:
        """The index's largest GPU memory, MiB."""
        return self.index.largest()
