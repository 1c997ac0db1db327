"""What the ``arkgpu`` policy learns from the arrivals, and the task that re-learns it.

:class:`ShapeLearner` counts pod shapes as they arrive. :func:`relearn_task`
takes a snapshot between two decisions (the counts, and the GPU and CPU left
per node) and returns a task that builds everything the scores use from it:
typical shapes, per-node fragmentation tables, scarcity weights, the demand
of ``gpu_spec`` classes against the GPU models left and, after the warm-up,
share prices. The task reads only the snapshot and the cluster's
fixed description (GPU models, capacities), so it may run on another thread
(:mod:`arkgpu.placement.relearning`); the tracker catches up with the nodes
that changed since the snapshot on its next refresh.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from arkgpu.model.arrays import BoolArray, FloatArray, IntArray
from arkgpu.model.cluster import ClusterState
from arkgpu.model.resources import MILLI_PER_GPU, Pod
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


def relearn_task(
    state: ClusterState,
    learner: ShapeLearner,
    values: ShareValues,
    popularity: float,
    with_prices: bool,
) -> Callable[[], Learned]:
    """Snapshot now (counts, GPU and CPU left); the returned task computes from it alone."""
    shapes = Counter(learner.shapes)
    gpu_left, cpu_left = state.gpu_left.copy(), state.cpu_left.copy()

    def run() -> Learned:
        typical = TypicalPods.from_counts(shapes, popularity)
        access = typical.access(state)
        return Learned(
            typical=typical,
            access=access,
            tables=FragTables.compute(gpu_left, typical),
            seen_cpu=cpu_left,
            seen_gpu=gpu_left,
            scarcity=scarcity(state, typical, access),
            spec_demand=_spec_demand(state, shapes, gpu_left),
            prices=values.solve(shapes) if with_prices else None,
        )

    return run


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
