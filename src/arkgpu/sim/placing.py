"""The FGD placement experiment: pods arrive one by one and never leave.

Protocol (Weng et al., USENIX ATC 2023, and the FGD authors' simulator):

1. From the seed, draw extra pods uniformly with replacement from the trace
   until the GPU requests would pass ``inflate`` (1.3) times the cluster's GPU
   capacity; then shuffle original and extra pods together.
2. Place each pod on arrival with the policy, or record it as failed.
3. Measure at every whole percent of capacity arrived (0..130%): the share of
   GPU capacity allocated (milli-GPU, and GPUs with anything on them), and
   FGD's fragmentation of the cluster (of capacity, and of idle GPU milli).

The workload draw and the policy's tie-breaks use separate streams spawned from
the seed, so every policy sees the same arrivals for the same seed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from arkgpu.model.cluster import ClusterState, FloatArray
from arkgpu.model.resources import Node, Pod
from arkgpu.placement import POLICIES, PolicyContext
from arkgpu.placement.fragmentation import TypicalPods, cluster_fragmentation


@dataclass(frozen=True, slots=True)
class ExperimentConfig:
    """How a placement run is set up."""

    inflate: float = 1.3
    """GPU requests to arrive, as a multiple of cluster GPU capacity (FGD: 1.3)."""
    seed: int = 42
    """Seed of the workload draw and of the policy's tie-breaks (FGD used 42..51)."""
    max_checkpoint_pct: int = 130
    """Last arrived percentage measured; checkpoints are 0, 1, ..., this."""


@dataclass(slots=True)
class RunResult:
    """One policy, one seed: the curves over arrived GPU requests and the run's costs."""

    policy: str
    seed: int
    arrived_pct: FloatArray
    """Checkpoints: arrived GPU requests as % of capacity."""
    allocation_pct: FloatArray
    """Milli-GPU allocated as % of capacity at each checkpoint."""
    gpu_allocation_pct: FloatArray
    """GPUs with any allocation as % of all GPUs at each checkpoint."""
    frag_pct: FloatArray
    """FGD fragmentation as % of capacity at each checkpoint."""
    frag_idle_pct: FloatArray
    """FGD fragmentation as % of idle GPU milli at each checkpoint."""
    pods_arrived: int
    pods_failed: int
    decision_s: FloatArray = field(repr=False)
    """Wall time of each placement decision (seconds)."""
    wall_s: float = 0.0
    cpu_s: float = 0.0
    """CPU time of the run (process time), less sensitive than wall time to a busy machine."""

    def at(self, pct: int) -> float:
        """Unallocated GPU % (100 minus milli allocation) when ``pct`` % has arrived."""
        return float(100.0 - self.allocation_pct[pct])


def inflate_and_shuffle(
    pods: Sequence[Pod], capacity_milli: int, inflate: float, rng: np.random.Generator
) -> list[Pod]:
    """FGD's workload tuning: GPU requests brought to ``inflate`` x capacity, then shuffled.

    Below the target, pods drawn uniformly with replacement are appended until
    the next would pass it; above it, pods drawn at random are removed until
    the rest fits under it.
    """
    if not any(p.total_gpu_milli for p in pods):
        raise ValueError("the trace has no GPU pod: nothing to tune to a GPU target")
    target = inflate * capacity_milli
    workload = list(pods)
    total = sum(p.total_gpu_milli for p in pods)
    while total > target:
        total -= workload.pop(int(rng.integers(len(workload)))).total_gpu_milli
    while True:
        extra = pods[int(rng.integers(len(pods)))]
        if total + extra.total_gpu_milli > target:
            break
        total += extra.total_gpu_milli
        workload.append(extra)
    order = rng.permutation(len(workload))
    return [workload[i] for i in order]


@dataclass(slots=True)
class _Curves:
    """Measurements taken at checkpoints while the run goes on."""

    typical: TypicalPods
    alloc: list[float] = field(default_factory=list)
    gpus: list[float] = field(default_factory=list)
    frag: list[float] = field(default_factory=list)
    frag_idle: list[float] = field(default_factory=list)

    def record(self, state: ClusterState) -> None:
        capacity = state.total_gpu_milli
        frag = cluster_fragmentation(state, self.typical)
        idle = capacity - state.allocated_gpu_milli
        in_use = (state.gpu_exists & (state.gpu_left < 1000)).sum()
        self.alloc.append(100.0 * state.allocated_gpu_milli / capacity)
        self.gpus.append(100.0 * in_use / state.gpu_count.sum())
        self.frag.append(100.0 * frag / capacity)
        self.frag_idle.append(100.0 * frag / idle if idle else 0.0)


def run_placement(
    nodes: Sequence[Node],
    pods: Sequence[Pod],
    policy: str,
    config: ExperimentConfig,
    progress: Callable[[int, int], None] | None = None,
) -> RunResult:
    """Run one policy and seed; ``progress(done, total)`` is called now and then."""
    started, started_cpu = time.perf_counter(), time.process_time()
    state = ClusterState.from_nodes(nodes)
    workload_rng, policy_rng = (
        np.random.default_rng(s) for s in np.random.SeedSequence(config.seed).spawn(2)
    )
    arrivals = inflate_and_shuffle(pods, state.total_gpu_milli, config.inflate, workload_rng)
    chooser = POLICIES.create(policy, PolicyContext(state, pods))
    curves = _Curves(TypicalPods.from_pods(pods))
    checkpoints = np.arange(config.max_checkpoint_pct + 1) * state.total_gpu_milli / 100.0
    decisions = np.empty(len(arrivals))
    arrived, failed, k = 0, 0, 0
    for i, pod in enumerate(arrivals):
        arrived += pod.total_gpu_milli
        while k < len(checkpoints) and checkpoints[k] < arrived:
            curves.record(state)
            k += 1
        t0 = time.perf_counter()
        where = chooser.choose(state, pod, policy_rng)
        decisions[i] = time.perf_counter() - t0
        if where is None:
            failed += 1
        else:
            state.place(pod, where)
        if progress is not None and i % 500 == 0:
            progress(i, len(arrivals))
    for _ in range(k, len(checkpoints)):
        curves.record(state)
    return RunResult(
        policy=policy,
        seed=config.seed,
        arrived_pct=np.arange(len(checkpoints), dtype=np.float64),
        allocation_pct=np.array(curves.alloc),
        gpu_allocation_pct=np.array(curves.gpus),
        frag_pct=np.array(curves.frag),
        frag_idle_pct=np.array(curves.frag_idle),
        pods_arrived=len(arrivals),
        pods_failed=failed,
        decision_s=decisions,
        wall_s=time.perf_counter() - started,
        cpu_s=time.process_time() - started_cpu,
    )
