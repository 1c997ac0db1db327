"""Cluster state: what every node and GPU has left, in numpy arrays.

Placement policies score all nodes at once, so the state is kept as arrays
indexed by node (and by GPU slot within a node) rather than as objects.
Nodes join and leave by name (:meth:`ClusterState.join`,
:meth:`ClusterState.leave`): a node keeps its index for the state's lifetime,
a node that left stays as an absent row of zero capacity, and a new name is
appended, which bumps :attr:`ClusterState.layout` so that policies holding
per-node tables rebuild them.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from arkgpu.model.arrays import BoolArray, IntArray
from arkgpu.model.gpus import gpu_model, known_gpu_models
from arkgpu.model.resources import MILLI_PER_GPU, Node, Pod

_T = TypeVar("_T", bound=np.generic)
_ALL = slice(None)

#: Columns of :attr:`ClusterState.affinity`: column 0 counts GPU-share pods,
#: column k (1..8) pods of k whole GPUs, column 9 any other whole-GPU count.
AFFINITY_COLUMNS = 10


def affinity_column(pod: Pod) -> int:
    """The :attr:`ClusterState.affinity` column of a GPU pod (GPU clustering's tag)."""
    if pod.is_gpu_share:
        return 0
    return pod.num_gpu if pod.num_gpu <= 8 else 9


class PlacementError(ValueError):
    """A placement that the cluster state cannot hold."""


@dataclass(frozen=True, slots=True)
class Assignment:
    """Where one pod runs: a node and the GPU slots it uses (empty without GPU)."""

    node: int
    gpus: tuple[int, ...] = ()


@dataclass(slots=True)
class ClusterState:
    """Capacities and what is left on every node; mutated only by :meth:`place`."""

    nodes: tuple[Node, ...]
    cpu_capacity: IntArray
    memory_capacity: IntArray
    gpu_count: IntArray
    gpu_exists: BoolArray
    """[node, slot]: the slot holds a real GPU (nodes have different GPU counts)."""
    model_index: IntArray
    """Index of each node's GPU model in :attr:`model_names`."""
    model_names: tuple[str, ...]
    cpu_left: IntArray = field(init=False)
    memory_left: IntArray = field(init=False)
    gpu_left: IntArray = field(init=False)
    """[node, slot]: milli-GPU left on each GPU; 0 on slots without a GPU."""
    gpu_memory_left: IntArray = field(init=False)
    """[node, slot]: GPU memory (MiB) not yet promised to pods; a GPU model the
    catalogue does not know starts at 0, so only pods that ask for no GPU memory fit it."""
    affinity: IntArray = field(init=False)
    """[node, column]: GPU pods on the node by kind (see :func:`affinity_column`)."""
    present: BoolArray = field(init=False)
    """[node]: the node is in the cluster (False once it left)."""
    layout: int = field(init=False, default=0)
    """Bumped whenever a node is appended (its arrays grew): per-node caches rebuild."""
    _allowed_by_spec: dict[frozenset[str], BoolArray] = field(init=False)
    _index_of: dict[str, int] = field(init=False)

    def __post_init__(self) -> None:
        self.cpu_left = self.cpu_capacity.copy()
        self.memory_left = self.memory_capacity.copy()
        self.gpu_left = np.where(self.gpu_exists, MILLI_PER_GPU, 0).astype(np.int64)
        self.gpu_memory_left = np.where(self.gpu_exists, self._model_memory()[:, None], 0)
        self.affinity = np.zeros((len(self.nodes), AFFINITY_COLUMNS), dtype=np.int64)
        self.present = np.ones(len(self.nodes), dtype=np.bool_)
        self._allowed_by_spec = {}
        self._index_of = {}
        for i, n in enumerate(self.nodes):
            if self._index_of.setdefault(n.name, i) != i:
                raise PlacementError(f"node name {n.name!r} appears twice in the node list")

    @classmethod
    def from_nodes(cls, nodes: Sequence[Node]) -> ClusterState:
        """Build an empty cluster from a node list."""
        slots = max((n.num_gpu for n in nodes), default=0)
        names = tuple(sorted({n.gpu_model for n in nodes}))
        count = np.array([n.num_gpu for n in nodes], dtype=np.int64)
        return cls(
            nodes=tuple(nodes),
            cpu_capacity=np.array([n.cpu_milli for n in nodes], dtype=np.int64),
            memory_capacity=np.array([n.memory_mib for n in nodes], dtype=np.int64),
            gpu_count=count,
            gpu_exists=np.arange(max(slots, 1))[None, :] < count[:, None],
            model_index=np.array([names.index(n.gpu_model) for n in nodes], dtype=np.int64),
            model_names=names,
        )

    def _model_memory(self, rows: int | slice | IntArray = _ALL) -> IntArray:
        """GPU memory (MiB) of each node's model, 0 where the catalogue does not know it."""
        known = known_gpu_models()
        mib = [gpu_model(m).memory_mib if m in known else 0 for m in self.model_names]
        return np.asarray(np.array(mib, dtype=np.int64)[self.model_index[rows]], dtype=np.int64)

    def node_index(self, name: str) -> int:
        """Index of the node called ``name`` (present or not); PlacementError if unknown."""
        try:
            return self._index_of[name]
        except KeyError:
            raise PlacementError(f"no node called {name!r} in the cluster") from None

    def join(self, node: Node) -> int:
        """Add ``node`` (empty) and return its index; a name that left comes back at its index."""
        i = self._index_of.get(node.name)
        if i is not None and self.present[i]:
            raise PlacementError(f"node {node.name!r} is already in the cluster")
        if i is None:
            i = len(self.nodes)
            self._grow(node)
        self._install_node(i, node)
        return i

    def leave(self, name: str) -> int:
        """Take the empty node ``name`` out of the cluster; its pods must have left first."""
        i = self.node_index(name)
        if not self.present[i]:
            raise PlacementError(f"node {name!r} has already left the cluster")
        busy = (
            self.cpu_left[i] != self.cpu_capacity[i]
            or (self.gpu_left[i] != np.where(self.gpu_exists[i], MILLI_PER_GPU, 0)).any()
        )
        full_memory = np.where(self.gpu_exists[i], self._model_memory(i), 0)
        busy |= bool((self.gpu_memory_left[i] != full_memory).any())
        if busy or self.memory_left[i] != self.memory_capacity[i]:
            raise PlacementError(f"node {name!r} still runs pods: remove them before it leaves")
        self._install_node(i, Node(name, 0, 0, 0, self.nodes[i].gpu_model))
        self.present[i] = False
        return i

    def _grow(self, node: Node) -> None:
        """Append an empty row (and GPU slots or a model name if ``node`` needs them)."""
        slots = max(self.gpu_exists.shape[1], node.num_gpu)
        wide = slots - self.gpu_exists.shape[1]
        self.gpu_exists = _append(np.pad(self.gpu_exists, ((0, 0), (0, wide))), False)
        self.gpu_left = _append(np.pad(self.gpu_left, ((0, 0), (0, wide))), 0)
        self.gpu_memory_left = _append(np.pad(self.gpu_memory_left, ((0, 0), (0, wide))), 0)
        if node.gpu_model not in self.model_names:
            self.model_names = (*self.model_names, node.gpu_model)
        for name in ("cpu_capacity", "memory_capacity", "gpu_count", "cpu_left", "memory_left"):
            setattr(self, name, _append(getattr(self, name), 0))
        self.model_index = _append(self.model_index, self.model_names.index(node.gpu_model))
        self.affinity = _append(self.affinity, 0)
        self.present = _append(self.present, True)
        self.nodes = (*self.nodes, node)
        self._index_of[node.name] = len(self.nodes) - 1
        self.layout += 1

    def _install_node(self, i: int, node: Node) -> None:
        """Row ``i`` becomes ``node``, empty."""
        if node.gpu_model not in self.model_names:
            self.model_names = (*self.model_names, node.gpu_model)
            self.layout += 1
        self.nodes = (*self.nodes[:i], node, *self.nodes[i + 1 :])
        self.cpu_capacity[i] = self.cpu_left[i] = node.cpu_milli
        self.memory_capacity[i] = self.memory_left[i] = node.memory_mib
        self.gpu_count[i] = node.num_gpu
        self.gpu_exists[i] = np.arange(self.gpu_exists.shape[1]) < node.num_gpu
        self.gpu_left[i] = np.where(self.gpu_exists[i], MILLI_PER_GPU, 0)
        self.model_index[i] = self.model_names.index(node.gpu_model)
        self.gpu_memory_left[i] = np.where(self.gpu_exists[i], self._model_memory(i), 0)
        self.affinity[i] = 0
        self.present[i] = True
        self._allowed_by_spec.clear()

    @property
    def total_gpu_milli(self) -> int:
        """GPU capacity of the whole cluster in milli-GPU."""
        return int(self.gpu_count.sum()) * MILLI_PER_GPU

    @property
    def allocated_gpu_milli(self) -> int:
        """Milli-GPU allocated to pods."""
        return self.total_gpu_milli - int(self.gpu_left.sum())

    def allowed_nodes(self, pod: Pod) -> BoolArray:
        """Nodes whose GPU model the pod's gpu_spec admits (all when it has none)."""
        mask = self._allowed_by_spec.get(pod.gpu_spec)
        if mask is None:
            allowed = [i for i, m in enumerate(self.model_names) if m in pod.gpu_spec]
            mask = np.isin(self.model_index, allowed) if pod.gpu_spec else self.gpu_count >= 0
            self._allowed_by_spec[pod.gpu_spec] = mask
        return mask

    def place(self, pod: Pod, where: Assignment) -> None:
        """Take the pod's resources on ``where``; :class:`PlacementError` if they do not fit."""
        reason = self.why_not(pod, where)
        if reason:
            raise PlacementError(reason)
        n = where.node
        self.cpu_left[n] -= pod.cpu_milli
        self.memory_left[n] -= pod.memory_mib
        for g in where.gpus:
            self.gpu_left[n, g] -= pod.gpu_milli
            self.gpu_memory_left[n, g] -= pod.gpu_memory_mib
        if pod.num_gpu > 0:
            self.affinity[n, affinity_column(pod)] += 1

    def remove(self, pod: Pod, where: Assignment) -> None:
        """Give back what :meth:`place` took for this pod."""
        n = where.node
        self.cpu_left[n] += pod.cpu_milli
        self.memory_left[n] += pod.memory_mib
        for g in where.gpus:
            self.gpu_left[n, g] += pod.gpu_milli
            self.gpu_memory_left[n, g] += pod.gpu_memory_mib
        if pod.num_gpu > 0:
            self.affinity[n, affinity_column(pod)] -= 1

    def why_not(self, pod: Pod, where: Assignment) -> str:
        """Why :meth:`place` would refuse ``pod`` on ``where``, for a person; "" if it fits."""
        n = where.node
        if not self.present[n]:
            return f"pod {pod.name}: node {self.nodes[n].name} left the cluster"
        if self.cpu_left[n] < pod.cpu_milli or self.memory_left[n] < pod.memory_mib:
            return f"pod {pod.name}: node {n} lacks CPU or memory"
        if len(where.gpus) != pod.num_gpu or len(set(where.gpus)) != len(where.gpus):
            return f"pod {pod.name}: needs {pod.num_gpu} distinct GPUs"
        if pod.num_gpu and not self.allowed_nodes(pod)[n]:
            return f"pod {pod.name}: node {n} has a GPU model outside gpu_spec"
        return self._gpu_room(pod, where)

    def _gpu_room(self, pod: Pod, where: Assignment) -> str:
        n = where.node
        for g in where.gpus:
            if not self.gpu_exists[n, g] or self.gpu_left[n, g] < pod.gpu_milli:
                return f"pod {pod.name}: GPU {g} of node {n} lacks room"
            if self.gpu_memory_left[n, g] < pod.gpu_memory_mib:
                return f"pod {pod.name}: GPU {g} of node {n} lacks GPU memory"
        return ""

    def copy(self) -> ClusterState:
        """A copy whose free resources and node list are its own (capacity arrays shared
        until a node joins or leaves the copy)."""
        twin = copy.copy(self)
        for name in _MUTABLE:
            setattr(twin, name, getattr(self, name).copy())
        return twin


#: What :meth:`ClusterState.place`, :meth:`ClusterState.join` and
#: :meth:`ClusterState.leave` change in place, so what a copy must own.
_MUTABLE = (
    "cpu_left",
    "memory_left",
    "gpu_left",
    "gpu_memory_left",
    "affinity",
    "present",
    "cpu_capacity",
    "memory_capacity",
    "gpu_count",
    "gpu_exists",
    "model_index",
    "_allowed_by_spec",
    "_index_of",
)


def _append(rows: npt.NDArray[_T], fill: object) -> npt.NDArray[_T]:
    """``rows`` with one more row (axis 0) filled with ``fill``."""
    extra = np.full((1, *rows.shape[1:]), fill, dtype=rows.dtype)
    return np.concatenate([rows, extra])
