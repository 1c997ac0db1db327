"""The FGD placement experiment: pods arrive one by one and never leave.

Protocol (Weng et al., USENIX ATC 2023, and the FGD authors' simulator,
hkust-adsl/kubernetes-scheduler-simulator, whose ``Simulate`` this follows step
by step):

1. From the seed, shuffle the trace's pods, then tune the GPU requests to
   ``inflate`` (1.3) times the cluster's GPU capacity: below it, pods drawn
   uniformly with replacement are appended *after* the shuffled trace until the
   next would pass the target; above it, random pods are removed and the rest
   keep their order.
2. Shuffle the node order: the FGD simulator renames every node with a prefix
   from a random permutation on each run, and its score ties go to the
   smallest name, so ties follow a random node order fixed for the run.
3. Place each pod on arrival with the policy, or record it as failed.
4. Measure at every whole percent of capacity arrived (0..130%): the share of
   GPU capacity allocated (milli-GPU, and GPUs with anything on them), and
   FGD's fragmentation of the cluster (of capacity, and of idle GPU milli).

The workload, the node order and the policy's own draws use separate streams
spawned from the seed, so every policy sees the same arrivals and nodes for the
same seed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from arkgpu.model.arrays import FloatArray, IntArray
from arkgpu.model.cluster import Assignment, ClusterState
from arkgpu.model.resources import Node, Pod
from arkgpu.placement import POLICIES, Policy, PolicyContext
from arkgpu.placement.fragmentation import TypicalPods, cluster_fragmentation


@dataclass(frozen=True, slots=True)
class ExperimentConfig:
    """How a placement run is set up."""

    inflate: float = 1.3
    """GPU requests to arrive, as a multiple of cluster GPU capacity (FGD: 1.3)."""
    seed: int = 42
    """Seed of the workload draw, the node order and the policy's own draws (FGD used 42..51)."""
    max_checkpoint_pct: int = 130
    """Last arrived percentage measured; checkpoints are 0, 1, ..., this."""
    shuffle_nodes: bool = True
    """Draw the node order (and so the tie-break order) per seed, as the FGD
    simulator does; False keeps the node list's order, the protocol of the
    figures measured before 2026-12-03 (docs/PLACEMENT.md, "Protocol")."""


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
    cpu_only_failed: IntArray
    """CPU-only pods that found no room (or were refused) by each checkpoint."""
    cpu_only_failed_cores: FloatArray
    """Their CPU, in cores, by each checkpoint."""
    decision_s: FloatArray = field(repr=False)
    """Wall time of each placement decision (seconds)."""
    wall_s: float = 0.0
    cpu_s: float = 0.0
    """CPU time of the run (process time), less sensitive than wall time to a busy machine."""

    def at(self, pct: int) -> float:
        """Unallocated GPU % (100 minus milli allocation) when ``pct`` % has arrived."""
        return float(100.0 - self.allocation_pct[pct])

    def cpu_only_failed_at(self, pct: int) -> tuple[int, float]:
        """CPU-only pods failed, and their cores, when ``pct`` % has arrived."""
        return int(self.cpu_only_failed[pct]), float(self.cpu_only_failed_cores[pct])


def seed_streams(seed: int) -> tuple[np.random.Generator, ...]:
    """The workload, policy and node-order streams of ``seed``.

    Independent children of one ``SeedSequence``; a child depends only on its
    index, so adding a stream leaves the others as they were.
    """
    return tuple(np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(3))


def shuffle_and_tune(
    pods: Sequence[Pod], capacity_milli: int, inflate: float, rng: np.random.Generator
) -> list[Pod]:
    """FGD's workload: the trace shuffled, then its GPU requests tuned to ``inflate`` x capacity.

    Below the target, pods drawn uniformly with replacement are appended after
    the shuffled trace until the next would pass it; above it, pods drawn at
    random are removed until the rest fits under it, the rest keeping their
    order. On a trace below the target every pod arrives once before any extra
    one (the default trace asks for 98% of capacity).
    """
    if not any(p.total_gpu_milli for p in pods):
        raise ValueError("the trace has no GPU pod: nothing to tune to a GPU target")
    target = inflate * capacity_milli
    workload = [pods[i] for i in rng.permutation(len(pods))]
    total = sum(p.total_gpu_milli for p in pods)
    while total > target:
        total -= workload.pop(int(rng.integers(len(workload)))).total_gpu_milli
    while True:
        extra = pods[int(rng.integers(len(pods)))]
        if total + extra.total_gpu_milli > target:
            break
        total += extra.total_gpu_milli
        workload.append(extra)
    return workload


def arrivals_for(pods: Sequence[Pod], capacity_milli: int, config: ExperimentConfig) -> list[Pod]:
    """The arrival sequence of ``config.seed``: :func:`shuffle_and_tune` on its workload stream."""
    return shuffle_and_tune(pods, capacity_milli, config.inflate, seed_streams(config.seed)[0])


def nodes_for(nodes: Sequence[Node], config: ExperimentConfig) -> list[Node]:
    """The node order of ``config.seed`` (ties go to the earlier node), or the list's own."""
    if not config.shuffle_nodes:
        return list(nodes)
    return [nodes[i] for i in seed_streams(config.seed)[2].permutation(len(nodes))]


def decide(
    policy: Policy,
    state: ClusterState,
    pod: Pod,
    rng: np.random.Generator,
    waited_s: float | None = None,
) -> Assignment | None:
    """One decision through the scheduler's interface; the caller applies it.

    A first offer (``waited_s`` None) tells the policy of the arrival
    (:meth:`~arkgpu.placement.base.Policy.observe`) before ranking; a pod that
    waited is ranked only. Every node is a candidate; the best-ranked one wins.
    """
    if waited_s is None:
        policy.observe(state, pod)
        return policy.rank(state, pod, rng).best()
    return policy.rank(state, pod, rng, waited_s=waited_s).best()


@dataclass(frozen=True, slots=True)
class RunSetup:
    """What one seeded run starts from."""

    state: ClusterState
    """The empty cluster, nodes in the seed's order."""
    arrivals: list[Pod]
    policy_rng: np.random.Generator
    """The stream for the policy's own draws (Random's)."""


def set_up(nodes: Sequence[Node], pods: Sequence[Pod], config: ExperimentConfig) -> RunSetup:
    """Cluster, arrivals and policy stream of one run of the protocol (module docstring)."""
    state = ClusterState.from_nodes(nodes_for(nodes, config))
    arrivals = arrivals_for(pods, state.total_gpu_milli, config)
    return RunSetup(state, arrivals, seed_streams(config.seed)[1])


Offered = tuple[Pod, Assignment | None, float]
"""One arrival of the FGD protocol: the pod, where it went (None: failed), decision seconds."""


def offer_arrivals(
    setup: RunSetup, policy: Policy, go_on: Callable[[int], bool]
) -> Iterator[Offered]:
    """The FGD protocol's arrival loop: each pod offered once, in order, placed if it fits.

    Before each decision ``go_on(arrived)`` is called with the GPU milli
    arrived so far, this pod included (the experiment measures its checkpoints
    there); the loop stops when it returns False.
    """
    state, rng, arrived = setup.state, setup.policy_rng, 0
    for pod in setup.arrivals:
        arrived += pod.total_gpu_milli
        if not go_on(arrived):
            return
        t0 = time.perf_counter()
        where = decide(policy, state, pod, rng)
        took = time.perf_counter() - t0
        if where is not None:
            state.place(pod, where)
        yield pod, where, took


@dataclass(slots=True)
class _Curves:
    """Measurements taken at checkpoints while the run goes on."""

    typical: TypicalPods
    alloc: list[float] = field(default_factory=list)
    gpus: list[float] = field(default_factory=list)
    frag: list[float] = field(default_factory=list)
    frag_idle: list[float] = field(default_factory=list)
    cpu_failed: list[int] = field(default_factory=list)
    cpu_failed_milli: list[int] = field(default_factory=list)
    _cpu_only: tuple[int, int] = (0, 0)
    """CPU-only pods failed so far, and their CPU milli."""

    def count_failure(self, pod: Pod) -> None:
        if pod.num_gpu == 0:
            pods, milli = self._cpu_only
            self._cpu_only = (pods + 1, milli + pod.cpu_milli)

    def record(self, state: ClusterState) -> None:
        capacity = state.total_gpu_milli
        frag = cluster_fragmentation(state, self.typical)
        idle = capacity - state.allocated_gpu_milli
        in_use = (state.gpu_exists & (state.gpu_left < 1000)).sum()
        self.alloc.append(100.0 * state.allocated_gpu_milli / capacity)
        self.gpus.append(100.0 * in_use / state.gpu_count.sum())
        self.frag.append(100.0 * frag / capacity)
        self.frag_idle.append(100.0 * frag / idle if idle else 0.0)
        self.cpu_failed.append(self._cpu_only[0])
        self.cpu_failed_milli.append(self._cpu_only[1])


def run_placement(
    nodes: Sequence[Node],
    pods: Sequence[Pod],
    policy: str,
    config: ExperimentConfig,
    progress: Callable[[int, int], None] | None = None,
) -> RunResult:
    """Run one policy and seed; ``progress(done, total)`` is called now and then."""
    started, started_cpu = time.perf_counter(), time.process_time()
    setup = set_up(nodes, pods, config)
    state, arrivals = setup.state, setup.arrivals
    chooser = POLICIES.create(policy, PolicyContext(state, pods))
    curves = _Curves(TypicalPods.from_pods(pods))
    checkpoints = np.arange(config.max_checkpoint_pct + 1) * state.total_gpu_milli / 100.0
    decisions = np.empty(len(arrivals))
    failed, k = 0, 0

    def record_until(arrived: int) -> bool:
        nonlocal k
        while k < len(checkpoints) and checkpoints[k] < arrived:
            curves.record(state)
            k += 1
        return True

    for i, (pod, where, took) in enumerate(offer_arrivals(setup, chooser, record_until)):
        decisions[i] = took
        if where is None:
            failed += 1
            curves.count_failure(pod)
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
        cpu_only_failed=np.array(curves.cpu_failed, dtype=np.int64),
        cpu_only_failed_cores=np.array(curves.cpu_failed_milli, dtype=np.float64) / 1000.0,
        decision_s=decisions,
        wall_s=time.perf_counter() - started,
        cpu_s=time.process_time() - started_cpu,
    )
