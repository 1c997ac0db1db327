"""Level 1 as the scheduler extender serves it: node names in, verdicts and a binding out.

:class:`Scheduler` keeps a :class:`~arkgpu.model.cluster.ClusterState`, one
policy (built with :func:`build_policy`, which needs no future trace) and its
random generator. Per pod, the extender calls

1. :meth:`Scheduler.arrived` once, when the pod is first seen: the policy's
   only learning call (:meth:`~arkgpu.placement.base.Policy.observe`);
2. :meth:`Scheduler.filter_and_score` with the candidate node names
   (kube-scheduler's filter and prioritize): per node, fits or a reason, and
   a score;
3. :meth:`Scheduler.assign` for the node kube-scheduler chose (bind): the GPU
   slots and the compute share on each, taken in the state.

:meth:`Scheduler.adopt` counts a pod placed earlier (after a restart) where it is;
:meth:`Scheduler.release` gives a leaving pod's resources back;
:meth:`Scheduler.join` and :meth:`Scheduler.leave` follow the node inventory.
The simulator reaches the same policy methods through
:func:`arkgpu.sim.placing.decide`, with every node a candidate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from arkgpu.model.arrays import IntArray
from arkgpu.model.cluster import Assignment, ClusterState, PlacementError
from arkgpu.model.resources import MILLI_PER_GPU, Node, Pod
from arkgpu.model.shares import share_bp
from arkgpu.placement.base import POLICIES, Policy, PolicyContext
from arkgpu.placement.lc_checking import LcCheck
from arkgpu.placement.ranking import NodeVerdict, Ranking


@dataclass(frozen=True, slots=True)
class Binding:
    """Where a pod runs, as the extender writes it on bind."""

    node: str
    """Node name."""
    gpus: tuple[int, ...]
    """GPU slots on the node (empty for a pod without GPU)."""
    share_bp: int
    """Compute share of each of those GPUs, basis points (the limiter's unit)."""
    gpu_memory_mib: int
    """GPU memory of each of those GPUs, MiB (0: not limited by the request)."""


def build_policy(name: str, state: ClusterState) -> Policy:
    """The registered policy ``name`` for a scheduler: no trace, it learns from arrivals."""
    return POLICIES.create(name, PolicyContext(state))


def best_verdict(verdicts: Sequence[NodeVerdict]) -> NodeVerdict | None:
    """The fitting verdict of highest score, the earliest on ties (what ``Ranking.best`` takes)."""
    best: NodeVerdict | None = None
    for v in verdicts:
        if v.fits and (best is None or v.score > best.score):
            best = v
    return best


class Scheduler:
    """One cluster state and one policy, addressed by node and pod names.

    With an :class:`~arkgpu.placement.lc_checking.LcCheck`, a pod carrying LC
    attributes fits a node only where the predictor says every LC service on
    the GPUs the policy picks still meets its target, and is bound with the
    predicted share; without one, a pod's share is its milli-GPU request.
    """

    def __init__(
        self,
        state: ClusterState,
        policy: Policy,
        rng: np.random.Generator,
        lc_check: LcCheck[Any] | None = None,
    ) -> None:
        self.state, self.policy, self.rng, self.lc_check = state, policy, rng, lc_check
        self._running: dict[str, tuple[Pod, Assignment]] = {}

    def join(self, node: Node) -> None:
        """A node joined the cluster (or came back)."""
        self.state.join(node)

    def leave(self, name: str) -> None:
        """A node left; its pods must have been released first."""
        self.state.leave(name)

    def arrived(self, pod: Pod) -> None:
        """A pod was created: the policy learns from it (once per pod, not per retry)."""
        self.policy.observe(self.state, pod)

    def filter_and_score(
        self, pod: Pod, candidates: Sequence[str], waited_s: float = 0.0
    ) -> list[NodeVerdict]:
        """Per candidate, in order: fits with a score, or the reason it does not."""
        ranking = self.policy.rank(self.state, pod, self.rng, self._indices(candidates), waited_s)
        verdicts = ranking.verdicts()
        check = self.lc_check
        if check is None or pod.lc is None:
            return verdicts
        return [self._lc_verdict(check, ranking, v) if v.fits else v for v in verdicts]

    def _lc_verdict(
        self, check: LcCheck[Any], ranking: Ranking, verdict: NodeVerdict
    ) -> NodeVerdict:
        """``verdict`` of a node the policy accepts, unless the LC check refuses its GPUs."""
        i = self.state.node_index(verdict.node)
        where = Assignment(i, ranking.slots(i))
        judged = check.judge(self.state, ranking.ask.pod, where)
        return verdict if judged.fits else NodeVerdict(verdict.node, False, judged.reason, 0.0)

    def assign(self, pod: Pod, node: str, waited_s: float = 0.0) -> Binding:
        """Bind ``pod`` to ``node``: the policy's GPUs there, taken in the state."""
        if pod.name in self._running:
            raise PlacementError(f"pod {pod.name} is already bound")
        i = self.state.node_index(node)
        ranking = self.policy.rank(self.state, pod, self.rng, self._indices([node]), waited_s)
        where = Assignment(i, ranking.slots(i))
        share = share_bp(pod.gpu_milli / MILLI_PER_GPU) if pod.num_gpu else 0
        if self.lc_check is not None:
            judged = self.lc_check.judge(self.state, pod, where)
            if not judged.fits:
                raise PlacementError(f"pod {pod.name}: {judged.reason}")
            share = judged.share_bp if pod.lc is not None and where.gpus else share
        self.state.place(pod, where)
        self._running[pod.name] = (pod, where)
        if self.lc_check is not None:
            self.lc_check.bound(pod, where)
        return Binding(node, where.gpus, share, pod.gpu_memory_mib)

    def adopt(self, pod: Pod, node: str, gpus: tuple[int, ...]) -> None:
        """Count ``pod`` as running on the GPU slots ``gpus`` of ``node``, a placement made
        before (the extender rebuilding its state from the API server after a restart): no
        policy is asked; PlacementError when the state cannot hold it."""
        if pod.name in self._running:
            raise PlacementError(f"pod {pod.name} is already bound")
        where = Assignment(self.state.node_index(node), gpus)
        self.state.place(pod, where)
        self._running[pod.name] = (pod, where)
        if self.lc_check is not None:
            self.lc_check.bound(pod, where)

    def release(self, name: str) -> None:
        """The pod ``name`` left: its resources go back to its node."""
        try:
            pod, where = self._running.pop(name)
        except KeyError:
            raise PlacementError(f"no running pod called {name!r}") from None
        self.state.remove(pod, where)
        if self.lc_check is not None:
            self.lc_check.released(pod, where)

    def _indices(self, names: Sequence[str]) -> IntArray:
        return np.array([self.state.node_index(n) for n in names], dtype=np.int64)
