"""What a policy answers for one pod: which candidate nodes fit, their scores, the GPUs.

:class:`Ranking` is the one answer every caller reads. The simulator takes
:meth:`Ranking.best` (the highest score, the earliest node on ties, as the
FGD simulator's tie-break by node name); the scheduler extender reads
:meth:`Ranking.verdicts` (per candidate: fits or a reason a person can read,
and a score) and, for the node it binds, :meth:`Ranking.slots`. Scores are
compared within one ranking only; higher is better.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from arkgpu.model.arrays import IntArray
from arkgpu.model.cluster import Assignment, ClusterState, PlacementError
from arkgpu.model.resources import Pod
from arkgpu.placement.base import Ask, feasible_nodes, fits_gpu, pick_best

_NONE: IntArray = np.zeros(0, dtype=np.int64)

SlotChooser = Callable[[int], tuple[int, ...]]
"""GPU slots for the ``i``-th fitting node of a ranking."""


@dataclass(frozen=True, slots=True)
class NodeVerdict:
    """One candidate node's answer, as a scheduler extender's filter and prioritize need it."""

    node: str
    """Node name."""
    fits: bool
    """The node can take the pod and the policy accepts it there."""
    reason: str
    """Why it does not fit, for a person; "" when it fits."""
    score: float
    """The policy's score (higher is better; comparable within one pod's ranking); 0 when
    it does not fit."""


@dataclass(frozen=True, slots=True)
class Ranking:
    """A policy's answer for one pod over a set of candidate nodes."""

    ask: Ask
    """The state, pod and candidates ranked."""
    nodes: IntArray
    """Candidates that fit and the policy accepts, in candidate order."""
    scores: npt.NDArray[np.generic]
    """Score of each of :attr:`nodes`; higher is better."""
    chooser: SlotChooser
    """GPU slots on ``nodes[i]`` (may draw from the policy's generator, as Random does)."""
    refused: IntArray | None = None
    """Candidates with room that the policy turned away (None: none)."""
    refusal: str = ""
    """Why the policy turned :attr:`refused` away."""

    @classmethod
    def empty(cls, ask: Ask) -> Ranking:
        """No candidate fits."""
        return cls(ask, _NONE, _NONE, _no_slots)

    def best(self) -> Assignment | None:
        """The highest score (the earliest node on ties) and its GPUs; None if nothing fits."""
        if len(self.nodes) == 0:
            return None
        i = pick_best(self.scores)
        return Assignment(int(self.nodes[i]), self.chooser(i))

    def slots(self, node: int) -> tuple[int, ...]:
        """GPU slots the policy gives the pod on ``node``, one of :attr:`nodes`."""
        rows = np.flatnonzero(self.nodes == node)
        if len(rows) == 0:
            raise PlacementError(
                f"pod {self.ask.pod.name} cannot go to node {node}: {self.reason(node)}"
            )
        return self.chooser(int(rows[0]))

    def reason(self, node: int) -> str:
        """Why ``node`` is not among :attr:`nodes`; "" when it is."""
        if (self.nodes == node).any():
            return ""
        if self.refused is not None and (self.refused == node).any():
            return self.refusal
        return unfit_reason(self.ask.state, self.ask.pod, node) or "not among the candidates"

    def verdicts(self) -> list[NodeVerdict]:
        """Per candidate, in candidate order: fits (with its score) or the reason it does not."""
        names = self.ask.state.nodes
        asked = np.arange(len(names)) if self.ask.candidates is None else self.ask.candidates
        score = dict(zip(self.nodes.tolist(), self.scores.tolist(), strict=True))
        return [
            NodeVerdict(names[n].name, True, "", float(score[n]))
            if n in score
            else NodeVerdict(names[n].name, False, self.reason(n), 0.0)
            for n in asked.tolist()
        ]


def _no_slots(i: int) -> tuple[int, ...]:
    raise IndexError(f"no fitting node {i}: the ranking is empty")


def unfit_reason(state: ClusterState, pod: Pod, node: int) -> str:
    """Which part of :func:`~arkgpu.placement.base.feasible_nodes` ``node`` fails, in
    words; "" when it fits."""
    if feasible_nodes(state, pod, np.array([node]))[0]:
        return ""
    name = state.nodes[node].name
    if not state.present[node]:
        return f"node {name} has left the cluster"
    for what, left, need in (
        ("CPU (milli-cores)", state.cpu_left[node], pod.cpu_milli),
        ("memory (MiB)", state.memory_left[node], pod.memory_mib),
    ):
        if left < need:
            return f"node {name} has {left} {what} left, the pod asks for {need}"
    if not state.allowed_nodes(pod)[node]:
        model = state.nodes[node].gpu_model or "no GPU"
        return f"node {name} has {model}, the pod's gpu_spec admits {sorted(pod.gpu_spec)}"
    room = int(fits_gpu(state, pod, node).sum())
    memory = f" and {pod.gpu_memory_mib} MiB of GPU memory" if pod.gpu_memory_mib else ""
    return (
        f"node {name} has {room} GPUs with {pod.gpu_milli} milli-GPU{memory} left, "
        f"the pod asks for {pod.num_gpu}"
    )
