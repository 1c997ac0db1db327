"""Cluster state: what every node and GPU has left, in numpy arrays.

Placement policies score all nodes at once, so the state is kept as arrays
indexed by node (and by GPU slot within a node) rather than as objects.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from arkgpu.model.arrays import BoolArray, IntArray
from arkgpu.model.resources import MILLI_PER_GPU, Node, Pod

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
    affinity: IntArray = field(init=False)
    """[node, column]: GPU pods on the node by kind (see :func:`affinity_column`)."""
    _allowed_by_spec: dict[frozenset[str], BoolArray] = field(init=False)

    def __post_init__(self) -> None:
        self.cpu_left = self.cpu_capacity.copy()
        self.memory_left = self.memory_capacity.copy()
        self.gpu_left = np.where(self.gpu_exists, MILLI_PER_GPU, 0).astype(np.int64)
        self.affinity = np.zeros((len(self.nodes), AFFINITY_COLUMNS), dtype=np.int64)
        self._allowed_by_spec = {}

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
        self._check(pod, where)
        n = where.node
        self.cpu_left[n] -= pod.cpu_milli
        self.memory_left[n] -= pod.memory_mib
        for g in where.gpus:
            self.gpu_left[n, g] -= pod.gpu_milli
        if pod.num_gpu > 0:
            self.affinity[n, affinity_column(pod)] += 1

    def remove(self, pod: Pod, where: Assignment) -> None:
        """Give back what :meth:`place` took for this pod."""
        n = where.node
        self.cpu_left[n] += pod.cpu_milli
        self.memory_left[n] += pod.memory_mib
        for g in where.gpus:
            self.gpu_left[n, g] += pod.gpu_milli
        if pod.num_gpu > 0:
            self.affinity[n, affinity_column(pod)] -= 1

    def _check(self, pod: Pod, where: Assignment) -> None:
        n = where.node
        if self.cpu_left[n] < pod.cpu_milli or self.memory_left[n] < pod.memory_mib:
            raise PlacementError(f"pod {pod.name}: node {n} lacks CPU or memory")
        if len(where.gpus) != pod.num_gpu or len(set(where.gpus)) != len(where.gpus):
            raise PlacementError(f"pod {pod.name}: needs {pod.num_gpu} distinct GPUs")
        for g in where.gpus:
            if not self.gpu_exists[n, g] or self.gpu_left[n, g] < pod.gpu_milli:
                raise PlacementError(f"pod {pod.name}: GPU {g} of node {n} lacks room")
        if pod.num_gpu and not self.allowed_nodes(pod)[n]:
            raise PlacementError(f"pod {pod.name}: node {n} has a GPU model outside gpu_spec")
