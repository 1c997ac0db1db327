"""What every placement policy shares: the policy protocol, its registry, the filter.

A policy is built once from the cluster (and, in the FGD protocol only, the
trace it will see), told of each arriving pod (:meth:`Policy.observe`, its
only learning call), then asked to rank candidate nodes for the pod
(:meth:`Policy.rank`). It reads the
:class:`~arkgpu.model.cluster.ClusterState` and never changes it: the caller
(simulator or scheduler extender) applies the answer.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from arkgpu.model.arrays import BoolArray, IntArray
from arkgpu.model.cluster import Assignment, ClusterState
from arkgpu.model.resources import MILLI_PER_GPU, Pod

if TYPE_CHECKING:
    from arkgpu.placement.ranking import Ranking

_ALL = slice(None)

#: Largest node the FGD simulator normalises by: 128 cores (milli-CPU).
MAX_SPEC_CPU = 128_000

#: Largest node the FGD simulator normalises by: 8 GPUs (milli-GPU).
MAX_SPEC_GPU = 8_000
#: Score range of a Kubernetes score plugin.
MAX_NODE_SCORE = 100


@dataclass(frozen=True, slots=True)
class Ask:
    """One pod to rank, with what the ranking may read."""

    state: ClusterState
    """The cluster (read, never changed)."""
    pod: Pod
    """The pod to place."""
    rng: np.random.Generator
    """The policy's generator (Random's draws)."""
    candidates: IntArray | None = None
    """Nodes to consider (state indices, in the caller's order); None for every node."""
    waited_s: float = 0.0
    """Seconds the pod has waited since it was created (0 on its first offer)."""

    def fitting(self) -> IntArray:
        """The candidates that pass the feasibility check, in candidate order."""
        return fitting_nodes(self.state, self.pod, self.candidates)


class Policy(ABC):
    """A level-1 placement policy, shaped for a scheduler.

    :meth:`observe` is the only call that changes what the policy has learned;
    :meth:`rank` reads the state and the learned measures and changes neither.
    The simulator calls ``observe`` once per pod when it arrives (not when a
    waiting pod is offered again), then ``rank``; the scheduler extender does
    the same on its filter call. A policy implements :meth:`ranked`.
    """

    def observe(self, state: ClusterState, pod: Pod) -> None:  # noqa: B027 - most learn nothing
        """Learn from one arriving pod, before it is ranked; nothing for most policies."""

    def rank(
        self,
        state: ClusterState,
        pod: Pod,
        rng: np.random.Generator,
        candidates: IntArray | None = None,
        waited_s: float = 0.0,
    ) -> Ranking:
        """Which of ``candidates`` (all nodes when None) fit, their scores and GPU slots;
        ``waited_s``: how long the pod has waited since it was created."""
        return self.ranked(Ask(state, pod, rng, candidates, waited_s))

    @abstractmethod
    def ranked(self, ask: Ask) -> Ranking:
        """:meth:`rank` of one :class:`Ask`."""

    def choose(self, state: ClusterState, pod: Pod, rng: np.random.Generator) -> Assignment | None:
        """A first offer: learn from ``pod``, then take the best-ranked node (None if none fits)."""
        self.observe(state, pod)
        return self.rank(state, pod, rng).best()

    def choose_again(
        self, state: ClusterState, pod: Pod, rng: np.random.Generator, waited_s: float
    ) -> Assignment | None:
        """A pod offered again after waiting ``waited_s``: ranked, not learned from twice."""
        return self.rank(state, pod, rng, waited_s=waited_s).best()


@dataclass(frozen=True, slots=True)
class PolicyContext:
    """What a policy is built from: the cluster, and for the FGD protocol only, the trace."""

    state: ClusterState
    workload: Sequence[Pod] = ()
    """The trace's pods (before inflation), as the FGD simulator gives FGD; empty
    for a scheduler, which knows no future: a policy then learns from
    :meth:`Policy.observe` alone."""


PolicyFactory = Callable[[PolicyContext], Policy]


class PolicyRegistry:
    """Policies by name; each policy module registers itself with :meth:`register`."""

    def __init__(self) -> None:
        self._factories: dict[str, PolicyFactory] = {}

    def register(self, name: str) -> Callable[[PolicyFactory], PolicyFactory]:
        """Decorator registering a policy factory under ``name``; a duplicate name raises."""

        def add(factory: PolicyFactory) -> PolicyFactory:
            if name in self._factories:
                raise ValueError(f"placement policy {name!r} is registered twice")
            self._factories[name] = factory
            return factory

        return add

    def names(self) -> list[str]:
        """Registered names, in registration order."""
        return list(self._factories)

    def create(self, name: str, context: PolicyContext) -> Policy:
        """Build the policy called ``name``; unknown names raise with the known ones listed."""
        try:
            factory = self._factories[name]
        except KeyError:
            known = ", ".join(self._factories)
            raise ValueError(f"unknown placement policy {name!r} (known: {known})") from None
        return factory(context)


#: The registry every built-in policy module adds itself to at import.
POLICIES = PolicyRegistry()


def fits_gpu(state: ClusterState, pod: Pod, at: int | slice | IntArray = _ALL) -> BoolArray:
    """[node, slot]: GPU slots (of all nodes, or those ``at``) with room for one of the
    pod's GPUs: its share and, when it asks for any, its GPU memory."""
    fits = state.gpu_exists[at] & (state.gpu_left[at] >= pod.gpu_milli)
    if pod.gpu_memory_mib:
        fits &= state.gpu_memory_left[at] >= pod.gpu_memory_mib
    return fits


def feasible_nodes(state: ClusterState, pod: Pod, nodes: IntArray | None = None) -> BoolArray:
    """The feasibility check: which nodes (all, or ``nodes``) can take the pod.

    A node fits when it is present and has the CPU, the memory and ``num_gpu``
    GPUs each with the share (and GPU memory) left, of a model the pod's
    gpu_spec admits. :func:`arkgpu.placement.ranking.unfit_reason` says in
    words which of these fails.
    """
    at: slice | IntArray = slice(None) if nodes is None else nodes
    ok = (state.cpu_left[at] >= pod.cpu_milli) & (state.memory_left[at] >= pod.memory_mib)
    ok &= state.present[at]
    if pod.num_gpu == 0:
        return ok
    ok &= state.allowed_nodes(pod)[at]
    free = fits_gpu(state, pod, at).sum(axis=1)
    return np.asarray(ok & (free >= pod.num_gpu), dtype=np.bool_)


def fitting_nodes(state: ClusterState, pod: Pod, candidates: IntArray | None) -> IntArray:
    """Indices of the nodes among ``candidates`` (all when None) that fit, in their order."""
    if candidates is None:
        return np.flatnonzero(feasible_nodes(state, pod))
    return candidates[feasible_nodes(state, pod, candidates)]


def pick_best(scores: npt.NDArray[np.generic]) -> int:
    """Index of the highest score; ties go to the lowest index.

    The FGD authors' simulator changed kube-scheduler's random tie-break to
    "smallest node name" for reproducibility; node names follow node order,
    which the experiment draws per seed as the simulator's random name
    prefixes do (:mod:`arkgpu.sim.placing`).
    """
    return int(np.argmax(scores))


def best_fit_gpus(state: ClusterState, node: int, pod: Pod) -> tuple[int, ...]:
    """The FGD simulator's default GPU choice inside a node.

    A GPU-share pod takes the GPU with the least room that still fits (lowest
    index on ties); whole-GPU pods take the lowest-indexed free GPUs.
    """
    if pod.num_gpu == 0:
        return ()
    left = state.gpu_left[node]
    fits = np.flatnonzero(fits_gpu(state, pod, node))
    if pod.is_gpu_share:
        return (int(fits[np.argmin(left[fits])]),)
    return tuple(int(g) for g in fits[: pod.num_gpu])


def node_gpu_left(state: ClusterState, nodes: IntArray) -> IntArray:
    """Milli-GPU left in all, for each of ``nodes``."""
    return np.asarray(state.gpu_left[nodes].sum(axis=1), dtype=np.int64)


def free_gpu_count(state: ClusterState, nodes: IntArray) -> IntArray:
    """Wholly free GPUs, for each of ``nodes``."""
    return np.asarray((state.gpu_left[nodes] == MILLI_PER_GPU).sum(axis=1), dtype=np.int64)
