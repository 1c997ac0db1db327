"""ArkGPU's level-1 placement policy: learned FGD, CPU stranding, cutting-stock share prices.

Online, like FGD: each pod is placed on arrival from the cluster state and the
pods seen so far; nothing is moved. Every option (a node, and for a GPU share
also the GPU) gets a score in FGD's points (0..100, higher is better)::

    score = frag_score - pattern_loss / PATTERN - stranding_increase / STRANDING
            - hosting_loss / SCARCITY - spec_loss / SPEC

and the best option wins; ties go to the lowest node index, then GPU slot.

1. ``frag_score``: FGD's integer score ``int(100 sigmoid(-dF / 1000))`` of the
   fragmentation change ``dF`` (:mod:`arkgpu.placement.fragmentation`), but over
   a shape distribution *learned from the arrivals so far* rather than given
   from the whole trace. The rounding to integers is kept on purpose: it makes
   options within a few tens of milli tie, and the lowest-index tie-break then
   consolidates pods on the same nodes. (Measured: the unrounded difference
   leaves 7.5% unallocated on the default trace, seed 42, against 5.0%.)
2. ``stranding_increase``: GPU milli that a node's CPU and memory left can no
   longer serve, at the mean CPU (memory) per milli-GPU of the GPU pods seen:
   ``max(0, gpu_left - min(cpu_left, mem_left * ratio) * milli_per_cpu)``,
   after minus before. FGD only sees CPU through its typical pods; GPUs left
   on CPU-starved nodes are fragmentation too.
3. ``pattern_loss`` of a GPU share, priced by the cutting-stock LP
   (:func:`arkgpu.placement.bounds.cutting_stock_prices`) over the learned
   share sizes: ``y_i`` is how much of a GPU a share of class ``i`` costs in
   the best fractional packing. ``V_m[r]``, the most price that fits in ``r``
   milli on a GPU of model ``m``, is what a GPU with ``r`` left can still be
   worth; a share on a GPU with ``r`` left loses ``V_m[r] - y_i - V_m[r - s_i]
   >= 0`` (:mod:`arkgpu.placement.arkgpu_values`). It is zero when the share
   continues a pattern of an optimal packing (a 470 beside a 470, a 320 in the
   350 left by a 650) and positive when it spoils one, which FGD's one-step
   measure cannot see.
4. ``hosting_loss`` (:mod:`arkgpu.placement.scarcity`): demand of the learned
   shapes that fewer than half of the GPUs could ever host, times the share of
   the node's hosting of them (copies it could host when empty) that the
   placement takes away, each scaled by how few hosts it has. It keeps the few
   nodes that alone fit a shape (the 128-core G3 nodes for 8-GPU 120-core pods,
   the nodes of a GPU model that some pods name in ``gpu_spec``) for that shape.
5. ``spec_loss`` (:mod:`arkgpu.placement.spec_demand`): where the pods with a
   ``gpu_spec`` still to come need more of their models than is left (a
   transportation LP over spec classes and models), the milli-GPU of that
   demand a placement on such a model displaces; zero when no pod names a model.

With :attr:`ArkgpuConfig.reserve_gpu_cpu` (policy ``arkgpu-reserve``) a
CPU-only pod may only take CPU that no free GPU needs (term 2 stays zero) and
is refused otherwise, until it has waited
:attr:`ArkgpuConfig.reserve_max_wait_s`; by default every pod that fits is
placed.

Shapes and prices are re-learned every :attr:`ArkgpuConfig.relearn_every`
GPU-pod arrivals; per-node tables are refreshed only for nodes that changed,
as in :mod:`arkgpu.placement.fgd`. Re-learning is a task over a snapshot
(:mod:`arkgpu.placement.arkgpu_learning`) run by a
:class:`~arkgpu.placement.relearning.Solver`: inline by default, or later, or
on a worker thread so that it stays off the decision path.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from arkgpu.model.arrays import FloatArray, IntArray
from arkgpu.model.cluster import ClusterState
from arkgpu.model.resources import Pod
from arkgpu.placement.arkgpu_learning import Learned, ShapeLearner, relearn_task
from arkgpu.placement.arkgpu_values import ShareValues
from arkgpu.placement.base import POLICIES, Ask, Policy, PolicyContext, best_fit_gpus
from arkgpu.placement.fgd import distinct_share_options, frag_score
from arkgpu.placement.fragmentation import (
    POPULARITY_THRESHOLD,
    Candidates,
    FragTables,
    FragTracker,
    TypicalPods,
)
from arkgpu.placement.ranking import Ranking
from arkgpu.placement.relearning import LaggedSolver, Solver
from arkgpu.placement.scarcity import Scarcity
from arkgpu.placement.spec_demand import SpecDemand

STRAND_TOLERANCE = 1e-9
"""Points of stranding that count as none (rounding of the float ratios)."""


@dataclass(frozen=True, slots=True)
class ArkgpuConfig:
    """Knobs of the ``arkgpu`` policy; none is read from a trace."""

    relearn_every: int = 256
    """GPU-pod arrivals between re-learning shapes and prices. Frequencies move
    by O(1/sqrt(n)) after n arrivals; every 256 keeps the drift at a few percent
    once a few thousand pods have come, and the re-solve (80 to 130 ms on the
    2-core machine: LP plus knapsack tables) falls on
    under 0.5% of decisions, outside the p99."""
    warmup: int = 32
    """GPU-pod arrivals before prices are learned: before that the cluster is
    nearly empty and the pattern loss is zero (learning starts at 1 arrival
    and doubles up to here, so the first shapes are known at once)."""
    pattern_milli_per_point: float = 4.0
    """Milli-GPU of pattern loss that cost one point of FGD's score. FGD's score
    moves about one point per 40 milli of fragmentation change near zero (slope
    of ``100 sigmoid(x / 1000)``); the pattern loss is a surer loss (what an
    optimal packing gives up) than FGD's one-step expectation, so it weighs 10x.
    Measured on default seed 42: 3.96% unallocated at 40, 3.91% at 10, 3.85% at
    4 and 3.85% at 1 milli/point: a flat optimum, not a fitted one."""
    stranding_milli_per_point: float = 20.0
    """Milli-GPU of new CPU/memory stranding that cost one point: twice the
    weight of fragmentation, since stranded GPUs are lost for every shape.
    Measured flat from 10 to 40 (4.18-4.19% on default seed 42 without prices)."""
    scarcity_milli_per_point: float = 20.0
    """Milli-GPU of lost hosting of scarce shapes (:mod:`arkgpu.placement.scarcity`)
    that cost one point: the same unit and weight as stranding, since both are
    GPU capacity made unusable for some pods."""
    spec_milli_per_point: float = 20.0
    """Milli-GPU of displaced ``gpu_spec`` demand (:mod:`arkgpu.placement.spec_demand`)
    that cost one point: the same unit and weight as stranding and scarcity,
    since it too is GPU capacity lost to the pods that needed it."""
    price_resamples: int = 16
    """Poisson bootstrap replicates of the share counts whose cutting-stock duals
    are averaged into the share prices (:mod:`arkgpu.placement.share_prices`);
    0 takes the plain duals of the counts. The number only sets the Monte Carlo
    error of that mean (the spread between tied dual vertices over
    ``sqrt(resamples)``), not what is estimated: 8 and 16 gave the same mean on
    gpushare40 (seeds 42-51, 5.176 and 5.177% unallocated). 16 keeps a
    re-learning, warm-started from the plain solve's patterns, within a few
    hundred ms."""
    popularity: float = POPULARITY_THRESHOLD
    """Share of pods the learned typical shapes cover (FGD's 95%): the tail of
    rare shapes costs time and barely moves the measure."""
    relearn_lag: int = 0
    """GPU-pod arrivals between a re-learning snapshot and its result taking
    effect, for the default :class:`~arkgpu.placement.relearning.LaggedSolver`.
    0 (inline) is what every figure in docs/BENCHMARKS.md used unless it says
    otherwise; a positive lag stands for a scheduler that re-learns off the
    request path and decides with the old measures meanwhile."""
    reserve_gpu_cpu: bool = False
    """Keep the CPU and memory that a node's free GPUs need for GPU pods: a
    CPU-only pod may only go where it strands no GPU milli (term 2 does not
    rise), and is refused, though it fits, where every node it fits would.
    Off by default, so the policy places every pod that fits, as FGD and the
    FGD protocol do; on (policy ``arkgpu-reserve``) it trades CPU-only pods
    for GPUs, which pays where CPU-only pods ask for the GPU nodes' spare CPU
    (docs/BENCHMARKS.md, "Keeping GPU nodes' CPU for GPU pods"). It is an
    operator's choice, like tainting GPU nodes, not a free gain."""
    reserve_max_wait_s: float = 300.0
    """With :attr:`reserve_gpu_cpu`: seconds a CPU-only pod is kept off the
    cores free GPUs need; offered again after waiting that long, it goes
    wherever it fits. Without it the reserve keeps a pod waiting for as long as
    no GPU pod comes, forever on an idle GPU node. 300 s is kube-scheduler's
    ``DefaultPodMaxInUnschedulablePodsDuration``, the longest a pod rejected
    with no cluster event to explain it stays unschedulable before it is tried
    again: one such retry, not more. The FGD protocol never offers a pod
    twice, so there a refusal stays a failure."""


class ArkgpuPolicy(Policy):
    """Learned fragmentation gradient plus LP pattern loss; see the module docstring."""

    def __init__(
        self,
        state: ClusterState,
        config: ArkgpuConfig | None = None,
        solver: Solver[Learned] | None = None,
    ) -> None:
        self.config = config or ArkgpuConfig()
        self.solver: Solver[Learned] = solver or LaggedSolver(self.config.relearn_lag)
        self.learner = ShapeLearner()
        self.values = ShareValues(state, self.config.price_resamples)
        self._next_learn = 1
        self.tracker = FragTracker(state, TypicalPods.from_counts({}))
        self.scarcity = Scarcity.none(len(state.nodes))
        self.spec_demand = SpecDemand.none()
        self._layout = state.layout

    def prime(self, state: ClusterState, pods: Sequence[Pod]) -> None:
        """Learn from ``pods`` before any arrival (the offline packer knows them all)."""
        for pod in pods:
            self.learner.observe(pod)
        self._install(self._task(state, with_prices=True)())
        self._next_learn = 1 << 62

    def _task(self, state: ClusterState, with_prices: bool) -> Callable[[], Learned]:
        return relearn_task(state, self.learner, self.values, self.config.popularity, with_prices)

    def _install(self, learned: Learned) -> None:
        self.tracker.install(
            learned.typical, learned.access, learned.tables, learned.seen_cpu, learned.seen_gpu
        )
        self.scarcity = learned.scarcity
        self.spec_demand = learned.spec_demand
        if learned.prices is not None:
            self.values.install(learned.prices)

    def _observe(self, state: ClusterState, pod: Pod) -> None:
        self.learner.observe(pod)
        n = self.learner.gpu_pods
        if pod.num_gpu > 0 and n >= self._next_learn:
            warm = n < self.config.warmup
            self.solver.submit(self._task(state, with_prices=not warm), n)
            self._next_learn = n * 2 if warm else n + self.config.relearn_every
        learned = self.solver.ready(n)
        if learned is not None and learned.layout == self._layout:
            self._install(learned)  # one from before a node joined waits for its successor

    def _strand(
        self,
        state: ClusterState,
        nodes: IntArray,
        pod: Pod,
        gpu_before: IntArray,
        gpu_after: IntArray,
    ) -> FloatArray:
        cpu, mem = state.cpu_left[nodes], state.memory_left[nodes]
        before = self.learner.stranded(gpu_before, cpu, mem)
        after = self.learner.stranded(gpu_after, cpu - pod.cpu_milli, mem - pod.memory_mib)
        return np.asarray((after - before) / self.config.stranding_milli_per_point)

    def _scarce(
        self,
        nodes: IntArray,
        before: FragTables,
        cpu_before: IntArray,
        after: FragTables,
        cpu_after: IntArray,
    ) -> FloatArray:
        """Points lost by options that take away hosting of scarce shapes."""
        lost = self.scarcity.loss(nodes, (before, cpu_before), (after, cpu_after))
        return lost / self.config.scarcity_milli_per_point

    def _spec(
        self, state: ClusterState, nodes: IntArray, pod: Pod, left: IntArray | None = None
    ) -> FloatArray:
        """Points lost by options that take GPU milli constrained pods will need."""
        if self.spec_demand.empty:
            return np.zeros(len(nodes))
        lost = self.spec_demand.loss(pod, state.model_index[nodes], left)
        return lost / self.config.spec_milli_per_point

    def observe(self, state: ClusterState, pod: Pod) -> None:
        """Count ``pod`` as an arrival; re-learn shapes and prices when due.

        Called once per pod, not when a waiting pod is offered again: the
        shapes learned are those of the pods that *arrive*, and counting every
        try would weigh the pods that wait (the large and CPU-hungry ones) as
        often as they are retried.
        """
        self._sync(state)
        self._observe(state, pod)

    def ranked(self, ask: Ask) -> Ranking:
        """Best score first (module docstring); lowest index on ties. A CPU-only pod that has
        waited :attr:`ArkgpuConfig.reserve_max_wait_s` is no longer kept off the cores free
        GPUs need."""
        state, pod = ask.state, ask.pod
        self._sync(state)
        tracker = self.tracker
        c = tracker.candidates(state, pod, ask.candidates)
        if c is None:
            return Ranking.empty(ask)
        if pod.is_gpu_share:
            return self._rank_share(ask, c)
        nodes, base, before, cpu_after = c.nodes, c.base, c.before, c.cpu_after
        after = tracker.after_whole(base, pod)
        strand = self._strand(state, nodes, pod, base.total, after.total)
        cost = tracker.frag(nodes, after, cpu_after) - before
        cost = (
            -frag_score(before, before + cost)
            + strand
            + self._scarce(nodes, base, state.cpu_left[nodes], after, cpu_after)
            + self._spec(state, nodes, pod)
        )
        ok = (
            strand <= STRAND_TOLERANCE
            if self._reserves(pod, ask.waited_s)
            else np.ones(len(nodes), dtype=np.bool_)
        )
        kept = nodes[ok]
        return Ranking(
            ask,
            kept,
            -cost[ok],
            lambda i: best_fit_gpus(state, int(kept[i]), pod),
            nodes[~ok],
            RESERVE_REASON,
        )

    def _reserves(self, pod: Pod, waited_s: float) -> bool:
        """Whether ``pod`` is kept off the cores that free GPUs need."""
        config = self.config
        return pod.num_gpu == 0 and config.reserve_gpu_cpu and waited_s < config.reserve_max_wait_s

    def _rank_share(self, ask: Ask, c: Candidates) -> Ranking:
        """Each node scores its best GPU's option; ties between GPUs go to the lowest slot."""
        state, pod = ask.state, ask.pod
        nodes, base, before, cpu_after = c.nodes, c.base, c.before, c.cpu_after
        rows, slots = distinct_share_options(state, nodes, pod)
        left = state.gpu_left[nodes[rows], slots]
        after = self.tracker.after_share(base, rows, left, pod.gpu_milli)
        change = self.tracker.frag(nodes[rows], after, cpu_after[rows]) - before[rows]
        cost = -frag_score(before[rows], before[rows] + change)
        loss = self.values.loss(state.model_index[nodes[rows]], left, pod)
        strand = self._strand(state, nodes, pod, base.total, base.total - pod.gpu_milli)[rows]
        scarce = self._scarce(
            nodes[rows], _rows(base, rows), state.cpu_left[nodes[rows]], after, cpu_after[rows]
        )
        spec = self._spec(state, nodes[rows], pod, left)
        option = -(cost + loss / self.config.pattern_milli_per_point + strand + scarce + spec)
        best = np.full(len(nodes), -np.inf)
        np.maximum.at(best, rows, option)

        def gpu(i: int) -> tuple[int, ...]:
            mine = np.flatnonzero((rows == i) & (option == best[i]))
            return (int(slots[mine[0]]),)

        return Ranking(ask, nodes, best, gpu)

    def _sync(self, state: ClusterState) -> None:
        """After nodes were added: rebuild the per-node tables and re-learn at the next arrival."""
        if state.layout == self._layout:
            return
        self._layout = state.layout
        self.values = ShareValues(state, self.config.price_resamples)
        self.tracker.reset(state, self.tracker.typical)
        self.scarcity = Scarcity.none(len(state.nodes))
        self.spec_demand = SpecDemand.none()
        self._next_learn = self.learner.gpu_pods


RESERVE_REASON = "the node's CPU is kept for its free GPUs (arkgpu-reserve)"
"""Why :attr:`ArkgpuConfig.reserve_gpu_cpu` turns a CPU-only pod away from a node with room."""


def _rows(tables: FragTables, rows: IntArray) -> FragTables:
    return FragTables(tables.small_sum[rows], tables.big_count[rows], tables.total[rows])


@POLICIES.register("arkgpu")
def _arkgpu(context: PolicyContext) -> ArkgpuPolicy:
    return ArkgpuPolicy(context.state)


@POLICIES.register("arkgpu-reserve")
def _arkgpu_reserve(context: PolicyContext) -> ArkgpuPolicy:
    return ArkgpuPolicy(context.state, ArkgpuConfig(reserve_gpu_cpu=True))
