"""Defragmentation by re-packing: move at most K running pods to let waiting pods in.

A :class:`DefragProblem` is a cluster state with the running pods and where
they run, and the pods waiting for room. A :class:`Plan` moves some running
pods (each to a new node and GPUs) and admits some waiting pods. It is applied
as a batch: every moved pod is taken off first, then every moved pod is put
in its new place, then the admitted pods; :func:`apply_plan` checks every step
with :meth:`ClusterState.place`, so an invalid plan raises and no pod is lost.
The gain is the GPU milli of the admitted pods.

:func:`greedy_plan` is the baseline planner: waiting pods, largest GPU demand
first, each admitted where the fewest running pods need to move and each of
those fits elsewhere right away (best fit), until K moves are spent.
:mod:`arkgpu.placement.defrag_ga` is the grouping GA.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from arkgpu.model.arrays import IntArray
from arkgpu.model.cluster import Assignment, ClusterState, PlacementError
from arkgpu.model.resources import MILLI_PER_GPU, Pod
from arkgpu.placement.base import feasible_nodes, fits_gpu


@dataclass(frozen=True, slots=True)
class DefragProblem:
    """The cluster at the measuring point, its running pods and the pods waiting."""

    state: ClusterState
    running: tuple[tuple[Pod, Assignment], ...]
    waiting: tuple[Pod, ...]


@dataclass(slots=True)
class Plan:
    """Moves of running pods (index into ``running``) and admissions of waiting pods."""

    moves: dict[int, Assignment] = field(default_factory=dict)
    admits: dict[int, Assignment] = field(default_factory=dict)

    def gain_milli(self, problem: DefragProblem) -> int:
        """GPU milli of the admitted waiting pods."""
        return sum(problem.waiting[i].total_gpu_milli for i in self.admits)


def apply_plan(problem: DefragProblem, plan: Plan) -> ClusterState:
    """A copy of the state with the plan carried out; PlacementError if any step does not fit."""
    state = copy.deepcopy(problem.state)
    for i in plan.moves:
        pod, where = problem.running[i]
        state.remove(pod, where)
    for i, where in plan.moves.items():
        state.place(problem.running[i][0], where)
    for i, where in plan.admits.items():
        state.place(problem.waiting[i], where)
    return state


def best_fit(state: ClusterState, pod: Pod, exclude: int = -1) -> Assignment | None:
    """Tightest place for ``pod``: fullest GPU for a share, fewest free GPUs otherwise."""
    ok = feasible_nodes(state, pod)
    if exclude >= 0:
        ok[exclude] = False
    nodes = np.flatnonzero(ok)
    if len(nodes) == 0:
        return None
    if pod.is_gpu_share:
        left = np.where(fits_gpu(state, pod)[nodes], state.gpu_left[nodes], MILLI_PER_GPU + 1)
        row, slot = divmod(int(np.argmin(left)), left.shape[1])
        return Assignment(int(nodes[row]), (slot,))
    free = (state.gpu_left[nodes] == MILLI_PER_GPU).sum(axis=1)
    node = int(nodes[np.lexsort((state.cpu_left[nodes], free))[0]])
    gpus = np.flatnonzero(state.gpu_exists[node] & (state.gpu_left[node] == MILLI_PER_GPU))
    return Assignment(node, tuple(int(g) for g in gpus[: pod.num_gpu]))


def fits(state: ClusterState, pod: Pod, where: Assignment) -> bool:
    """Whether :meth:`ClusterState.place` would accept ``pod`` on ``where``."""
    return not state.why_not(pod, where)


def clone(state: ClusterState) -> ClusterState:
    """A copy whose free resources are its own (:meth:`ClusterState.copy`)."""
    return state.copy()


Resident = tuple[int, Pod, Assignment]
"""(index into ``running``, pod, where it runs now)."""


def evictions(
    state: ClusterState, residents: Sequence[Resident], pod: Pod, node: int
) -> list[int] | None:
    """Few residents of ``node`` to take off so that ``pod`` fits there; None if it never can.

    Whole GPUs: empty the GPUs with the fewest pods. A share: the GPU whose
    residents free the room with the fewest pods, largest first. Then CPU-only
    pods, largest first, until CPU and memory suffice.
    """
    by_gpu: dict[int, list[Resident]] = {}
    for r in residents:
        for g in r[2].gpus:
            by_gpu.setdefault(g, []).append(r)
    gpus = [int(g) for g in np.flatnonzero(state.gpu_exists[node])]
    if len(gpus) < pod.num_gpu:
        return None
    out: list[Resident] = []
    if pod.is_gpu_share:
        options = [_free_share(state, node, g, by_gpu.get(g, []), pod.gpu_milli) for g in gpus]
        out = min(options, key=len)
    elif pod.num_gpu:
        emptiest = sorted(gpus, key=lambda g: (len(by_gpu.get(g, [])), -state.gpu_left[node, g]))
        out = list({r[0]: r for g in emptiest[: pod.num_gpu] for r in by_gpu.get(g, [])}.values())
    cpu = int(state.cpu_left[node]) + sum(r[1].cpu_milli for r in out)
    mem = int(state.memory_left[node]) + sum(r[1].memory_mib for r in out)
    for r in sorted((r for r in residents if not r[2].gpus), key=lambda r: -r[1].cpu_milli):
        if cpu >= pod.cpu_milli and mem >= pod.memory_mib:
            break
        out.append(r)
        cpu, mem = cpu + r[1].cpu_milli, mem + r[1].memory_mib
    if cpu < pod.cpu_milli or mem < pod.memory_mib:
        return None
    return [r[0] for r in out]


def _free_share(
    state: ClusterState, node: int, gpu: int, on_gpu: list[Resident], milli: int
) -> list[Resident]:
    freed, out = int(state.gpu_left[node, gpu]), []
    for r in sorted(on_gpu, key=lambda r: -r[1].gpu_milli):
        if freed >= milli:
            break
        out.append(r)
        freed += r[1].gpu_milli
    return out


def place_on(state: ClusterState, pod: Pod, node: int) -> Assignment | None:
    """The pod on ``node`` (tightest GPU for a share, lowest free GPUs), or None."""
    if not feasible_nodes(state, pod)[node]:
        return None
    left = state.gpu_left[node]
    fits = np.flatnonzero(state.gpu_exists[node] & (left >= pod.gpu_milli))
    if pod.is_gpu_share:
        return Assignment(node, (int(fits[np.argmin(left[fits])]),))
    return Assignment(node, tuple(int(g) for g in fits[: pod.num_gpu]))


Attempt = tuple[ClusterState, dict[int, Assignment], Assignment]


def admit_on(
    state: ClusterState, running: Sequence[Pod], residents: Sequence[Resident], pod: Pod, node: int
) -> Attempt | None:
    """Evict from ``node``, admit ``pod`` there, re-place the evicted elsewhere (best fit)."""
    evict = evictions(state, residents, pod, node)
    if evict is None:
        return None
    trial = clone(state)
    where_now = {r[0]: r[2] for r in residents}
    for i in evict:
        trial.remove(running[i], where_now[i])
    where = place_on(trial, pod, node)
    if where is None:
        return None
    trial.place(pod, where)
    moves = {}
    for i in sorted(evict, key=lambda i: -running[i].total_gpu_milli):
        target = best_fit(trial, running[i])
        if target is None:
            return None
        trial.place(running[i], target)
        moves[i] = target
    return trial, moves, where


def greedy_plan(problem: DefragProblem, max_moves: int, candidates: int = 64) -> Plan:
    """Admit waiting pods, largest first, each where the fewest pods move, within ``max_moves``.

    ``candidates``: nodes tried per waiting pod, ranked by an estimate of the
    evictions needed (:func:`eviction_estimates`); each try copies the
    free-resource arrays, so this bounds the planner's time (64: about 15 s on
    the default trace on the 2-core machine; 16 found 2.8 GPUs where 64 found
    6.9 at K = 10 on BestFit's state).
    """
    state, plan = clone(problem.state), Plan()
    running = [pod for pod, _ in problem.running]
    residents: dict[int, dict[int, Resident]] = {}
    for i, (pod, where) in enumerate(problem.running):
        residents.setdefault(where.node, {})[i] = (i, pod, where)
    index = ResidentIndex.build(state, residents)
    order = sorted(range(len(problem.waiting)), key=lambda i: -problem.waiting[i].total_gpu_milli)
    for w in order:
        budget = max_moves - moved_count(plan, problem)
        pod = problem.waiting[w]
        best = _cheapest(state, running, residents, index, pod, budget, candidates)
        if best is None:
            continue
        state, moves, where = best
        touched = {where.node}
        for i, target in moves.items():
            old = plan.moves.get(i, problem.running[i][1])
            del residents[old.node][i]
            residents.setdefault(target.node, {})[i] = (i, running[i], target)
            touched |= {old.node, target.node}
        index.update(residents, touched)
        plan.moves.update(moves)
        plan.admits[w] = where
    return plan


@dataclass(slots=True)
class ResidentIndex:
    """Per GPU slot: running pods on it, and the largest share among them."""

    count: IntArray
    biggest: IntArray

    @classmethod
    def build(cls, state: ClusterState, residents: dict[int, dict[int, Resident]]) -> ResidentIndex:
        """Index every node's residents."""
        shape = state.gpu_left.shape
        index = cls(np.zeros(shape, dtype=np.int64), np.zeros(shape, dtype=np.int64))
        index.update(residents, set(residents))
        return index

    def update(self, residents: dict[int, dict[int, Resident]], nodes: set[int]) -> None:
        """Re-index the residents of ``nodes``."""
        for n in nodes:
            self.count[n] = 0
            self.biggest[n] = 0
            for _, pod, where in residents.get(n, {}).values():
                for g in where.gpus:
                    self.count[n, g] += 1
                    self.biggest[n, g] = max(self.biggest[n, g], pod.gpu_milli)


def eviction_estimates(state: ClusterState, index: ResidentIndex, pod: Pod) -> IntArray:
    """A quick guess, per node, of how many residents must leave for ``pod``; large if hopeless."""
    huge = 1 << 20
    starved = (state.cpu_left < pod.cpu_milli) | (state.memory_left < pod.memory_mib)
    if pod.is_gpu_share:
        left = state.gpu_left
        guess = np.where(
            left >= pod.gpu_milli, 0, np.where(left + index.biggest >= pod.gpu_milli, 1, 3)
        )
        gpu = np.where(state.gpu_exists, guess, huge).min(axis=1)
    elif pod.num_gpu:
        counts = np.sort(np.where(state.gpu_exists, index.count, huge), axis=1)
        gpu = counts[:, : pod.num_gpu].sum(axis=1) if counts.shape[1] >= pod.num_gpu else huge
    else:
        gpu = np.zeros(len(state.nodes), dtype=np.int64)
    allowed = state.allowed_nodes(pod) if pod.num_gpu else state.gpu_count >= 0
    ok = allowed & (state.gpu_count >= pod.num_gpu)
    return np.asarray(np.where(ok, gpu + starved, huge), dtype=np.int64)


def _cheapest(
    state: ClusterState,
    running: Sequence[Pod],
    residents: dict[int, dict[int, Resident]],
    index: ResidentIndex,
    pod: Pod,
    budget: int,
    candidates: int,
) -> Attempt | None:
    guess = eviction_estimates(state, index, pod)
    ranked = [int(n) for n in np.argsort(guess, kind="stable")[:candidates] if guess[n] <= budget]
    best: Attempt | None = None
    for node in ranked:
        found = admit_on(state, running, list(residents.get(node, {}).values()), pod, node)
        if found is None or len(found[1]) > budget:
            continue
        if best is None or len(found[1]) < len(best[1]):
            best = found
            if len(found[1]) <= guess[node]:
                break
    return best


def validate(problem: DefragProblem, plan: Plan) -> ClusterState:
    """Apply the plan and check that every running pod is still placed exactly once."""
    state = apply_plan(problem, plan)
    if any(i < 0 or i >= len(problem.running) for i in plan.moves):
        raise PlacementError("plan moves a pod that is not running")
    expected = problem.state.allocated_gpu_milli + plan.gain_milli(problem)
    if state.allocated_gpu_milli != expected:
        raise PlacementError("plan changes the GPU milli of the running pods")
    return state


def moved_count(plan: Plan, problem: DefragProblem) -> int:
    """Running pods whose place the plan changes."""
    return sum(1 for i, where in plan.moves.items() if where != problem.running[i][1])


def plan_summary(problem: DefragProblem, plan: Plan, seconds: float) -> dict[str, float | int]:
    """Figures of a plan: GPUs gained, pods moved, gain per move, wall time."""
    gained = plan.gain_milli(problem) / MILLI_PER_GPU
    moved = moved_count(plan, problem)
    return {
        "gpus_gained": gained,
        "pods_moved": moved,
        "pods_admitted": len(plan.admits),
        "gpus_gained_per_move": gained / moved if moved else 0.0,
        "wall_s": seconds,
    }


def waiting_demand(waiting: Sequence[Pod]) -> int:
    """GPU milli the waiting pods ask for."""
    return sum(p.total_gpu_milli for p in waiting)
