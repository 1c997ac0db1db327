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

    def reasons(self, nodes: IntArray) -> list[str]:
        """:meth:`reason` of each of ``nodes`` (the same words), in one pass over the state:
        a filter over 1,000 candidates of a full cluster asks for hundreds of them."""
        chosen = np.isin(nodes, self.nodes).tolist()
        refused = [False] * len(nodes) if self.refused is None else np.isin(nodes, self.refused)
        unfit = unfit_reasons(self.ask.state, self.ask.pod, nodes)
        return [
            "" if c else self.refusal if r else u or "not among the candidates"
            for c, r, u in zip(chosen, list(refused), unfit, strict=True)
        ]

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


def unfit_reasons(state: ClusterState, pod: Pod, nodes: IntArray) -> list[str]:
    """:func:`unfit_reason` of each of ``nodes`` (the same words), the state read once."""
    feasible = feasible_nodes(state, pod, nodes).tolist()
    rows = zip(
        nodes.tolist(),
        state.present[nodes].tolist(),
        state.cpu_left[nodes].tolist(),
        state.memory_left[nodes].tolist(),
        state.allowed_nodes(pod)[nodes].tolist(),
        fits_gpu(state, pod, nodes).sum(axis=1).tolist(),
        strict=True,
    )
    return [
        "" if ok else _unfit_words(state, pod, node, present, cpu, memory, allowed, room)
        for ok, (node, present, cpu, memory, allowed, room) in zip(feasible, rows, strict=True)
    ]


def _unfit_words(
    state: ClusterState,
    pod: Pod,
    node: int,
    present: bool,
    cpu: int,
    memory: int,
    allowed: bool,
    room: int,
) -> str:
    name = state.nodes[node].name
    if not present:
        return f"node {name} has left the cluster"
    if cpu < pod.cpu_milli:
        return f"node {name} has {cpu} CPU (milli-cores) left, the pod asks for {pod.cpu_milli}"
    if memory < pod.memory_mib:
        return f"node {name} has {memory} memory (MiB) left, the pod asks for {pod.memory_mib}"
    if not allowed:
        model = state.nodes[node].gpu_model or "no GPU"
        admitted = ", ".join(sorted(pod.gpu_spec))
        return f"node {name} has GPU model {model}; the pod's GPU models are {admitted}"
    memory_asked = f" and {pod.gpu_memory_mib} MiB of GPU memory" if pod.gpu_memory_mib else ""
    return (
        f"node {name} has {room} GPUs with {pod.gpu_milli} milli-GPU{memory_asked} left, "
        f"the pod asks for {pod.num_gpu}"
    )


def unfit_reason(state: ClusterState, pod: Pod, node: int) -> str:
    """Which part of :func:`~arkgpu.placement.base.feasible_nodes` ``node`` fails, in
    words; "" when it fits."""
    return unfit_reasons(state, pod, np.array([node], dtype=np.int64))[0]
