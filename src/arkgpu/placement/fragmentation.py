"""FGD's fragmentation measure (Weng et al., USENIX ATC 2023).

The *typical pods* are the most frequent pod shapes (CPU, GPU share, GPU
count, gpu_spec) of the workload that together make up 95% of its pods, with
their frequencies renormalised to sum to 1. For a node and a typical pod ``t``
of frequency ``p_t``, the GPU milli that ``t`` could not use counts as
fragment:

- if ``t`` could be placed there (it asks for GPUs, may use the node's model,
  finds ``num_gpu`` GPUs with at least ``gpu_milli`` left, and enough CPU),
  the fragment is what is left on the GPUs too small for it;
- otherwise (``t`` asks for no GPU, or lacks CPU, GPUs or access) it is all of
  the node's GPU milli left.

The node's fragmentation is ``sum_t p_t * fragment_t``; the cluster's is the sum
over nodes. This follows the FGD simulator's ``NodeGpuShareFragAmount`` summed
over every category but "satisfied".
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from arkgpu.model.arrays import BoolArray, FloatArray, IntArray
from arkgpu.model.cluster import ClusterState
from arkgpu.model.resources import Pod
from arkgpu.placement.base import fitting_nodes

#: Share of all pods that the typical shapes must cover (the FGD experiments' 95%).
POPULARITY_THRESHOLD = 0.95

#: A pod shape: (CPU milli, GPU milli per GPU, GPU count, gpu_spec).
Shape = tuple[int, int, int, frozenset[str]]


@dataclass(frozen=True, slots=True)
class TypicalPods:
    """The workload's typical pod shapes as arrays over shapes ``t``."""

    cpu: IntArray
    milli: IntArray
    num: IntArray
    freq: FloatArray
    specs: tuple[frozenset[str], ...]

    @classmethod
    def from_pods(cls, pods: Sequence[Pod], threshold: float = POPULARITY_THRESHOLD) -> TypicalPods:
        """Most frequent shapes of ``pods`` covering ``threshold`` of them (:meth:`from_counts`)."""
        return cls.from_counts(Counter(p.shape for p in pods), threshold)

    @classmethod
    def from_counts(
        cls, counts: Mapping[Shape, int], threshold: float = POPULARITY_THRESHOLD
    ) -> TypicalPods:
        """Most frequent shapes covering ``threshold`` of the pods, frequencies renormalised.

        Shapes are ordered by count, then (as the FGD simulator breaks ties)
        by larger CPU, GPU share, GPU count first.
        """
        ranked = sorted(counts.items(), key=lambda kv: (kv[1], kv[0][:3]), reverse=True)
        chosen: list[tuple[Shape, int]] = []
        covered, total = 0, sum(counts.values())
        for shape, count in ranked:
            if covered >= threshold * total:
                break
            chosen.append((shape, count))
            covered += count
        return cls(
            cpu=np.array([s[0] for s, _ in chosen], dtype=np.int64),
            milli=np.array([s[1] for s, _ in chosen], dtype=np.int64),
            num=np.array([s[2] for s, _ in chosen], dtype=np.int64),
            freq=np.array([c / covered for _, c in chosen], dtype=np.float64),
            specs=tuple(s[3] for s, _ in chosen),
        )

    def access(self, state: ClusterState) -> BoolArray:
        """[node, t]: shape ``t`` asks for GPUs and may use the node's GPU model."""
        if not self.specs:
            return np.zeros((len(state.nodes), 0), dtype=np.bool_)
        columns = [state.allowed_nodes(_spec_probe(spec)) for spec in self.specs]
        return np.stack(columns, axis=1) & (self.milli > 0)[None, :]


def _spec_probe(spec: frozenset[str]) -> Pod:
    return Pod(name="typical", cpu_milli=0, memory_mib=0, num_gpu=1, gpu_milli=1, gpu_spec=spec)


@dataclass(slots=True)
class FragTables:
    """Per node and shape: milli on GPUs too small for the shape, and GPUs big enough."""

    small_sum: IntArray
    """[node, t]: milli left on GPUs with less than ``milli_t`` left."""
    big_count: IntArray
    """[node, t]: GPUs with at least ``milli_t`` left."""
    total: IntArray
    """[node]: milli left on all GPUs."""

    @classmethod
    def compute(cls, gpu_left: IntArray, typical: TypicalPods) -> FragTables:
        """Build the tables for nodes given as rows of ``gpu_left`` (absent slots hold 0)."""
        big = gpu_left[:, None, :] >= typical.milli[None, :, None]
        small_sum = np.where(big, 0, gpu_left[:, None, :]).sum(axis=2)
        return cls(small_sum, big.sum(axis=2), gpu_left.sum(axis=1))


def satisfiable(
    tables: FragTables, cpu_left: IntArray, access: BoolArray, typical: TypicalPods
) -> BoolArray:
    """[node, t]: shape ``t`` asks for GPUs and fits on the node (GPUs, CPU, model)."""
    return np.asarray(
        access
        & (tables.big_count >= typical.num[None, :])
        & (cpu_left[:, None] >= typical.cpu[None, :]),
        dtype=np.bool_,
    )


def fragmentation(
    tables: FragTables, cpu_left: IntArray, access: BoolArray, typical: TypicalPods
) -> FloatArray:
    """Fragmentation of each node (milli-GPU) from its tables, CPU left and access."""
    satisfied = satisfiable(tables, cpu_left, access, typical)
    fragment = np.where(satisfied, tables.small_sum, tables.total[:, None])
    return np.asarray(fragment @ typical.freq, dtype=np.float64)


def cluster_fragmentation(state: ClusterState, typical: TypicalPods) -> float:
    """FGD's fragmentation of the whole cluster, in milli-GPU."""
    tables = FragTables.compute(state.gpu_left, typical)
    return float(fragmentation(tables, state.cpu_left, typical.access(state), typical).sum())


@dataclass(frozen=True, slots=True)
class Candidates:
    """The nodes that can take a pod, as FGD-style policies score them."""

    nodes: IntArray
    """Feasible node indices, ascending."""
    base: FragTables
    """Their tables now."""
    before: FloatArray
    """Their fragmentation now."""
    cpu_after: IntArray
    """Their CPU left once the pod is placed there."""


class FragTracker:
    """Per-node :class:`FragTables` kept in step with a cluster state.

    Each call to :meth:`refresh` recomputes only the nodes whose CPU or GPUs
    changed since the last one, so scoring a pod costs O(nodes x shapes)
    array work instead of a full recomputation.
    """

    def __init__(self, state: ClusterState, typical: TypicalPods) -> None:
        self.reset(state, typical)

    def reset(self, state: ClusterState, typical: TypicalPods) -> None:
        """Start over for ``typical`` shapes (for example after re-learning them)."""
        tables = FragTables.compute(state.gpu_left, typical)
        self.install(
            typical, typical.access(state), tables, state.cpu_left.copy(), state.gpu_left.copy()
        )

    def install(
        self,
        typical: TypicalPods,
        access: BoolArray,
        tables: FragTables,
        seen_cpu: IntArray,
        seen_gpu: IntArray,
    ) -> None:
        """Use ``tables`` built for ``typical`` from a snapshot of CPU and GPUs left (the
        tracker owns them from now on); :meth:`refresh` redoes the nodes changed since."""
        self.typical, self.access, self.tables = typical, access, tables
        self._seen_cpu, self._seen_gpu = seen_cpu, seen_gpu

    def refresh(self, state: ClusterState) -> None:
        """Recompute the tables of the nodes that changed since the last call (all of
        them when nodes were added to the state)."""
        if self._seen_gpu.shape != state.gpu_left.shape:
            self.reset(state, self.typical)
            return
        changed = np.flatnonzero(
            (state.cpu_left != self._seen_cpu) | (state.gpu_left != self._seen_gpu).any(axis=1)
        )
        if len(changed) == 0:
            return
        fresh = FragTables.compute(state.gpu_left[changed], self.typical)
        self.tables.small_sum[changed] = fresh.small_sum
        self.tables.big_count[changed] = fresh.big_count
        self.tables.total[changed] = fresh.total
        self._seen_cpu[changed] = state.cpu_left[changed]
        self._seen_gpu[changed] = state.gpu_left[changed]

    def candidates(
        self, state: ClusterState, pod: Pod, among: IntArray | None = None
    ) -> Candidates | None:
        """Refresh, then the feasible nodes (of all, or ``among``) for ``pod`` with their
        fragmentation; None when no node can take it."""
        self.refresh(state)
        nodes = fitting_nodes(state, pod, among)
        if len(nodes) == 0:
            return None
        base = self.of(nodes)
        cpu = state.cpu_left[nodes]
        return Candidates(nodes, base, self.frag(nodes, base, cpu), cpu - pod.cpu_milli)

    def of(self, nodes: IntArray) -> FragTables:
        """The tables of ``nodes``."""
        t = self.tables
        return FragTables(t.small_sum[nodes], t.big_count[nodes], t.total[nodes])

    def frag(self, nodes: IntArray, tables: FragTables, cpu_left: IntArray) -> FloatArray:
        """Fragmentation of ``nodes`` in the state that ``tables`` and ``cpu_left`` describe."""
        return fragmentation(tables, cpu_left, self.access[nodes], self.typical)

    def after_whole(self, base: FragTables, pod: Pod) -> FragTables:
        """Tables after ``pod`` takes ``num_gpu`` wholly free GPUs (or none) on each node."""
        cut = (self.typical.milli > 0)[None, :] * pod.num_gpu
        return FragTables(base.small_sum, base.big_count - cut, base.total - pod.total_gpu_milli)

    def after_share(
        self, base: FragTables, rows: IntArray, left: IntArray, milli: int
    ) -> FragTables:
        """Tables of ``base[rows]`` after a share of ``milli`` lands on a GPU with ``left``."""
        m = self.typical.milli[None, :]
        old, new = left[:, None], (left - milli)[:, None]
        small = base.small_sum[rows] - np.where(old < m, old, 0) + np.where(new < m, new, 0)
        big = base.big_count[rows] - (old >= m) + (new >= m)
        return FragTables(small, big, base.total[rows] - milli)
