"""A grouping genetic algorithm for re-packing, after the dual-chromosome GAs of containers.

Tan, Ma, Mei et al. evolve container-to-VM groupings with two chromosomes (one
for which group an item belongs to, one for the order in which a decoder packs
them). Here a node's running pods are its group, and a solution is:

- a *keep* chromosome: one bit per movable pod, 1 = stay in its group (same
  node and GPUs) when the decoder reaches it;
- an *order* chromosome: a permutation of the movable and the waiting pods.

Only a neighbourhood is opened: the ``nodes`` nodes with the most GPU milli
left (where fragments lie); their running pods are movable, the rest of the
cluster stays put but may receive pods. The decoder empties the neighbourhood,
puts back the kept pods in order, places the other movable pods by best fit
anywhere, then the waiting pods by best fit. A movable pod that finds no place
makes the solution infeasible (no pod is ever lost); a solution moving more
than K pods is penalised. Fitness: GPU milli admitted, minus a small cost per
move (so that of equal gains the one that moves less wins).

The *hybrid* variant (the default) puts the greedy planner's plan into the
first population as one genome (its moved pods unkept, its targets used as
hints by the decoder), so the GA never returns less than the greedy plan.

Selection is by binary tournament with two elites; crossover is uniform on the
keep bits and order crossover (OX) on the permutation; mutation flips keep
bits to 0 at rate ``K / movable`` (about K moves per child) and swaps two
positions of the order.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from arkgpu.model.cluster import Assignment, ClusterState
from arkgpu.model.resources import Pod
from arkgpu.placement.defrag import DefragProblem, Plan, best_fit, clone, fits, greedy_plan

#: Fitness cost of one move, in milli-GPU: far below any admitted pod (>= 10
#: milli in practice) so it only breaks ties between equal gains.
MOVE_COST = 1e-3
#: Fitness penalty per move beyond K, in milli-GPU: above any possible gain.
OVER_BUDGET = 1e7


@dataclass(frozen=True, slots=True)
class GaConfig:
    """Search settings of the grouping GA."""

    population: int = 24
    """Individuals per generation: small, since one decode costs tens of ms."""
    generations: int = 40
    """Generations at most; with 24 individuals about 1000 decodes."""
    time_limit_s: float = 55.0
    """Stop after this wall time, the greedy seed included (the budget is 60 s for K = 200)."""
    nodes: int = 48
    """Neighbourhood: nodes with the most GPU milli left whose pods may move."""


@dataclass(slots=True)
class _Genome:
    keep: npt.NDArray[np.bool_]
    order: npt.NDArray[np.int64]
    fitness: float = -np.inf
    plan: Plan | None = None


class GroupingGa:
    """Dual-chromosome grouping GA over one :class:`DefragProblem`."""

    def __init__(
        self,
        problem: DefragProblem,
        max_moves: int,
        config: GaConfig,
        rng: np.random.Generator,
        seed_plan: Plan | None = None,
    ) -> None:
        self.problem, self.max_moves, self.config, self.rng = problem, max_moves, config, rng
        self.seed_plan = seed_plan or Plan()
        left = problem.state.gpu_left.sum(axis=1)
        hood = set(np.argsort(-left, kind="stable")[: config.nodes].tolist())
        hood |= {problem.running[i][1].node for i in self.seed_plan.moves}
        hood |= {w.node for w in self.seed_plan.admits.values()}
        self.movable = [i for i, (_, w) in enumerate(problem.running) if w.node in hood]
        self.base = clone(problem.state)
        for i in self.movable:
            self.base.remove(*problem.running[i])
        self.items = len(self.movable) + len(problem.waiting)

    def decode(self, genome: _Genome) -> tuple[float, Plan]:
        """Pack by the genome; return fitness and the plan."""
        state, plan = clone(self.base), Plan()
        running, m = self.problem.running, len(self.movable)
        moving = []
        for g in genome.order:
            if g < m and genome.keep[g]:
                pod, where = running[self.movable[g]]
                if fits(state, pod, where):
                    state.place(pod, where)
                    continue
            moving.append(int(g))
        for g in (g for g in moving if g < m):
            pod = running[self.movable[g]][0]
            target = self._hinted(state, pod, self.seed_plan.moves.get(self.movable[g]))
            if target is None:
                return -OVER_BUDGET * 10, plan
            state.place(pod, target)
            if target != running[self.movable[g]][1]:
                plan.moves[self.movable[g]] = target
        for g in genome.order:
            if g >= m:
                pod = self.problem.waiting[g - m]
                target = self._hinted(state, pod, self.seed_plan.admits.get(int(g - m)))
                if target is not None:
                    state.place(pod, target)
                    plan.admits[int(g - m)] = target
        moves = len(plan.moves)
        over = max(0, moves - self.max_moves)
        return plan.gain_milli(self.problem) - MOVE_COST * moves - OVER_BUDGET * over, plan

    @staticmethod
    def _hinted(state: ClusterState, pod: Pod, hint: Assignment | None) -> Assignment | None:
        """The seed plan's place when given and free, else best fit."""
        if hint is not None and fits(state, pod, hint):
            return hint
        return best_fit(state, pod)

    def _seeded(self) -> _Genome:
        """The seed plan as a genome: its moved pods unkept, its admitted pods first."""
        moved = set(self.seed_plan.moves)
        keep = np.array([i not in moved for i in self.movable], dtype=np.bool_)
        m = len(self.movable)
        first = [m + w for w in self.seed_plan.admits]
        rest = [g for g in range(self.items) if g not in set(first)]
        return _Genome(keep, np.array(rest[:m] + first + rest[m:], dtype=np.int64))

    def _random(self) -> _Genome:
        m = len(self.movable)
        flip = self.rng.random(m) < self.max_moves / max(m, 1)
        return _Genome(~flip, self.rng.permutation(self.items).astype(np.int64))

    def _evaluate(self, genome: _Genome) -> _Genome:
        genome.fitness, genome.plan = self.decode(genome)
        return genome

    def _child(self, a: _Genome, b: _Genome) -> _Genome:
        m = len(self.movable)
        keep = np.where(self.rng.random(m) < 0.5, a.keep, b.keep)
        keep &= ~(self.rng.random(m) < self.max_moves / max(m, 1) / 2)
        order = _order_crossover(a.order, b.order, self.rng)
        i, j = self.rng.integers(self.items, size=2)
        order[[i, j]] = order[[j, i]]
        return _Genome(keep, order)

    def _pick(self, population: list[_Genome]) -> _Genome:
        i, j = (int(x) for x in self.rng.integers(len(population), size=2))
        a, b = population[i], population[j]
        return a if a.fitness >= b.fitness else b

    def run(self) -> Plan:
        """Evolve and return the best plan found (the empty plan if nothing beats it)."""
        started = time.perf_counter()
        if self.items == 0 or not self.problem.waiting:
            return Plan()
        population = [self._evaluate(self._seeded())]
        population += [self._evaluate(self._random()) for _ in range(self.config.population - 1)]
        for _ in range(self.config.generations):
            if time.perf_counter() - started > self.config.time_limit_s:
                break
            population.sort(key=lambda g: -g.fitness)
            children = population[:2]
            while len(children) < self.config.population:
                children.append(
                    self._evaluate(self._child(self._pick(population), self._pick(population)))
                )
            population = children
        best = max(population, key=lambda g: g.fitness)
        if best.plan is None or best.fitness <= 0:
            return Plan()
        return best.plan


def _order_crossover(
    a: npt.NDArray[np.int64], b: npt.NDArray[np.int64], rng: np.random.Generator
) -> npt.NDArray[np.int64]:
    """OX: a slice of ``a`` in place, the rest in ``b``'s order."""
    n = len(a)
    i, j = sorted(int(x) for x in rng.integers(n + 1, size=2))
    middle = a[i:j]
    taken = np.zeros(n, dtype=np.bool_)
    taken[middle] = True
    rest = b[~taken[b]]
    return np.concatenate([rest[:i], middle, rest[i:]]).astype(np.int64)


def ga_plan(
    problem: DefragProblem,
    max_moves: int,
    rng: np.random.Generator,
    config: GaConfig | None = None,
    hybrid: bool = True,
) -> Plan:
    """Plan by the grouping GA; ``hybrid`` seeds it with the greedy plan (counted in the time)."""
    config = config or GaConfig()
    started = time.perf_counter()
    seed_plan = greedy_plan(problem, max_moves) if hybrid else None
    left = max(config.time_limit_s - (time.perf_counter() - started), 0.0)
    limited = GaConfig(config.population, config.generations, left, config.nodes)
    return GroupingGa(problem, max_moves, limited, rng, seed_plan).run()
