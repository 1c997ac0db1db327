"""What the ``arkgpu`` policy learns from the arrivals, and the task that re-learns it.

:class:`ShapeLearner` counts pod shapes as they arrive. :func:`relearn_task`
takes a snapshot between two decisions (the counts, and the GPU and CPU left
per node) and returns a task that builds everything the scores use from it:
typical shapes, per-node fragmentation tables, scarcity weights, the demand
of ``gpu_spec`` classes against the GPU models left and, after the warm-up,
share prices. The task reads only the snapshot and the cluster's
fixed description (GPU models, capacities), so it may run on another thread
(:mod:`arkgpu.placement.relearning`), or, pickled, in another process; the
tracker catches up with the nodes that changed since the snapshot on its next
refresh.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from arkgpu.model.arrays import BoolArray, FloatArray, IntArray
from arkgpu.model.cluster import ClusterState
from arkgpu.model.resources import MILLI_PER_GPU, Node, Pod
from arkgpu.placement.arkgpu_values import PriceTables, ShareValues
from arkgpu.placement.fragmentation import FragTables, Shape, TypicalPods
from arkgpu.placement.scarcity import Scarcity, scarcity
from arkgpu.placement.spec_demand import Arrived, ClassKey, SpecDemand, spec_demand


@dataclass(slots=True)
class ShapeLearner:
    """Counts of pod shapes and share classes among the arrivals so far."""

    shapes: Counter[Shape] = field(default_factory=Counter)
    gpu_pods: int = 0
    gpu_milli: int = 0
    gpu_cpu: int = 0
    gpu_memory: int = 0

    def observe(self, pod: Pod) -> None:
        """Count one arrival."""
        self.shapes[pod.shape] += 1
        if pod.num_gpu > 0:
            self.gpu_pods += 1
            self.gpu_milli += pod.total_gpu_milli
            self.gpu_cpu += pod.cpu_milli
            self.gpu_memory += pod.memory_mib

    def stranded(self, gpu_left: IntArray, cpu_left: IntArray, mem_left: IntArray) -> FloatArray:
        """GPU milli left that the CPU and memory left cannot serve at the GPU pods' mean ratio."""
        if self.gpu_milli == 0:
            return np.zeros(len(gpu_left))
        cpu_ok = cpu_left * (self.gpu_milli / max(self.gpu_cpu, 1))
        mem_ok = mem_left * (self.gpu_milli / max(self.gpu_memory, 1))
        return np.asarray(np.maximum(gpu_left - np.minimum(cpu_ok, mem_ok), 0.0))

    def typical(self, popularity: float) -> TypicalPods:
        """Most frequent shapes covering ``popularity`` of arrivals, frequencies renormalised."""
        return TypicalPods.from_counts(self.shapes, popularity)


@dataclass(frozen=True, slots=True)
class Learned:
    """One re-learning's result, from a snapshot taken between two decisions."""

    typical: TypicalPods
    access: BoolArray
    tables: FragTables
    """Per-node tables of the snapshot's GPUs left."""
    seen_cpu: IntArray
    seen_gpu: IntArray
    """The snapshot the tables describe."""
    scarcity: Scarcity
    spec_demand: SpecDemand
    prices: PriceTables | None
    """None during the warm-up, or when there is no share to price."""
    layout: int = 0
    """:attr:`ClusterState.layout` of the snapshot: a result for another layout (nodes
    joined since) has arrays sized for the old node count and is not installed."""


@dataclass(frozen=True, slots=True)
class RelearnTask:
    """One re-learning's inputs, taken between two decisions; calling it computes the result.

    ``state`` is read only for the cluster's fixed description (capacities, GPU
    models); the snapshot proper is the copies in the other fields. Pickled (for
    a worker process, :class:`~arkgpu.placement.relearning.ProcessSolver`), the
    live state is replaced by :class:`FixedCluster`, a copy of that description
    without the node objects: the pickle is the snapshot, so it must be made
    between decisions, and the process computes the same :class:`Learned`.
    """

    state: ClusterState
    shapes: Counter[Shape]
    gpu_left: IntArray
    cpu_left: IntArray
    values: ShareValues
    popularity: float
    with_prices: bool
    layout: int = 0
    """The live state's :attr:`ClusterState.layout` when the snapshot was taken."""

    def __call__(self) -> Learned:
        """Everything the scores use, from the snapshot alone."""
        state, shapes, gpu_left = self.state, self.shapes, self.gpu_left
        typical = TypicalPods.from_counts(shapes, self.popularity)
        access = typical.access(state)
        return Learned(
            typical=typical,
            access=access,
            tables=FragTables.compute(gpu_left, typical),
            seen_cpu=self.cpu_left,
            seen_gpu=gpu_left,
            scarcity=scarcity(state, typical, access),
            spec_demand=_spec_demand(state, shapes, gpu_left),
            prices=self.values.solve(shapes) if self.with_prices else None,
            layout=self.layout,
        )

    def __reduce__(self) -> tuple[Callable[..., RelearnTask], tuple[object, ...]]:
        fixed = FixedCluster.of(self.state)
        rest = (self.shapes, self.gpu_left, self.cpu_left, self.values)
        return _rebuild_task, (fixed, *rest, self.popularity, self.with_prices, self.layout)


@dataclass(frozen=True, slots=True)
class FixedCluster:
    """What re-learning reads of a :class:`ClusterState` beyond the snapshot: each node's
    capacities and GPU model, as arrays (cheap to pickle: no node objects)."""

    cpu_capacity: IntArray
    memory_capacity: IntArray
    gpu_count: IntArray
    gpu_exists: BoolArray
    model_index: IntArray
    model_names: tuple[str, ...]

    @classmethod
    def of(cls, state: ClusterState) -> FixedCluster:
        """Copies of ``state``'s fixed description."""
        return cls(
            state.cpu_capacity.copy(),
            state.memory_capacity.copy(),
            state.gpu_count.copy(),
            state.gpu_exists.copy(),
            state.model_index.copy(),
            state.model_names,
        )

    def state(self) -> ClusterState:
        """An empty cluster with these nodes (named by their row: re-learning reads no name)."""
        nodes = tuple(
            Node(str(i), int(cpu), int(mem), int(gpus), self.model_names[int(model)])
            for i, (cpu, mem, gpus, model) in enumerate(
                zip(
                    self.cpu_capacity,
                    self.memory_capacity,
                    self.gpu_count,
                    self.model_index,
                    strict=True,
                )
            )
        )
        return ClusterState(
            nodes,
            self.cpu_capacity,
            self.memory_capacity,
            self.gpu_count,
            self.gpu_exists,
            self.model_index,
            self.model_names,
        )


def _rebuild_task(
    fixed: FixedCluster,
    shapes: Counter[Shape],
    gpu_left: IntArray,
    cpu_left: IntArray,
    values: ShareValues,
    popularity: float,
    with_prices: bool,
    layout: int,
) -> RelearnTask:
    """A pickled :class:`RelearnTask`, over a replica of the cluster's fixed description."""
    return RelearnTask(
        fixed.state(), shapes, gpu_left, cpu_left, values, popularity, with_prices, layout
    )


def relearn_task(
    state: ClusterState,
    learner: ShapeLearner,
    values: ShareValues,
    popularity: float,
    with_prices: bool,
) -> RelearnTask:
    """Snapshot now (counts, GPU and CPU left); the returned task computes from it alone."""
    return RelearnTask(
        state,
        Counter(learner.shapes),
        state.gpu_left.copy(),
        state.cpu_left.copy(),
        values,
        popularity,
        with_prices,
        state.layout,
    )


def _spec_demand(state: ClusterState, shapes: Counter[Shape], gpu_left: IntArray) -> SpecDemand:
    milli: Counter[ClassKey] = Counter()
    pods: Counter[ClassKey] = Counter()
    for (_, gpu_milli, num, spec), count in shapes.items():
        if num > 0:
            key = (spec, gpu_milli < MILLI_PER_GPU)
            milli[key] += count * num * gpu_milli
            pods[key] += count
    free = np.where(gpu_left >= MILLI_PER_GPU, gpu_left, 0).sum(axis=1)
    partial = np.where(gpu_left < MILLI_PER_GPU, gpu_left, 0).sum(axis=1)
    supply = np.vstack(
        [
            np.bincount(
                state.model_index, weights=w.astype(np.float64), minlength=len(state.model_names)
            )
            for w in (free, partial)
        ]
    ).astype(np.float64)
    arrived = {key: Arrived(float(milli[key]), pods[key]) for key in milli}
    return spec_demand(state.model_names, supply, arrived)
