"""FGD: place each pod where it increases the cluster's fragmentation least.

Node score, as in the FGD simulator: ``int(100 * sigmoid((F_before - F_after) / 1000))``
with ``F`` the node's fragmentation (:mod:`arkgpu.placement.fragmentation`)
before and after the pod lands; ties between nodes go to the earliest in node
order (:func:`~arkgpu.placement.base.pick_best`). A
GPU-share pod tries every GPU with room and keeps the one of highest integer
score (lowest index on ties); whole-GPU pods take the lowest-indexed free GPUs.

The policy keeps per-node fragmentation tables in a
:class:`~arkgpu.placement.fragmentation.FragTracker`, which refreshes only the
nodes whose state changed since its last call.
"""

from __future__ import annotations

import numpy as np

from arkgpu.model.arrays import FloatArray, IntArray
from arkgpu.model.cluster import Assignment, ClusterState
from arkgpu.model.resources import Pod
from arkgpu.placement.base import (
    MAX_NODE_SCORE,
    POLICIES,
    PolicyContext,
    best_fit_gpus,
    pick_best,
)
from arkgpu.placement.fragmentation import Candidates, FragTracker, TypicalPods


def frag_score(before: FloatArray, after: FloatArray) -> IntArray:
    """FGD's integer score of a fragmentation change (higher is better)."""
    return (MAX_NODE_SCORE / (1.0 + np.exp(-(before - after) / 1000.0))).astype(np.int64)


class FgdPolicy:
    """Fragmentation gradient descent over the workload's typical pods."""

    def __init__(self, state: ClusterState, typical: TypicalPods) -> None:
        self.tracker = FragTracker(state, typical)

    def choose(self, state: ClusterState, pod: Pod, rng: np.random.Generator) -> Assignment | None:
        """Score every feasible node (and GPU for shares) by fragmentation change."""
        tracker = self.tracker
        c = tracker.candidates(state, pod)
        if c is None:
            return None
        if pod.is_gpu_share:
            return self._choose_share(state, pod, c)
        after = tracker.frag(c.nodes, tracker.after_whole(c.base, pod), c.cpu_after)
        node = int(c.nodes[pick_best(frag_score(c.before, after))])
        return Assignment(node, best_fit_gpus(state, node, pod))

    def _choose_share(self, state: ClusterState, pod: Pod, c: Candidates) -> Assignment:
        nodes, base, before, cpu_after = c.nodes, c.base, c.before, c.cpu_after
        rows, slots = distinct_share_options(state, nodes, pod)
        left = state.gpu_left[nodes[rows], slots]
        after = self.tracker.after_share(base, rows, left, pod.gpu_milli)
        option = frag_score(before[rows], self.tracker.frag(nodes[rows], after, cpu_after[rows]))
        best = np.full(len(nodes), -1, dtype=np.int64)
        np.maximum.at(best, rows, option)
        i = pick_best(best)
        mine = np.flatnonzero((rows == i) & (option == best[i]))
        return Assignment(int(nodes[i]), (int(slots[mine].min()),))


def distinct_share_options(
    state: ClusterState, nodes: IntArray, pod: Pod
) -> tuple[IntArray, IntArray]:
    """(row into nodes, GPU slot) for each GPU with room, one per distinct milli left per node.

    GPUs of a node with the same milli left give the same outcome; the lowest slot stands for them.
    """
    left = state.gpu_left[nodes]
    fits = state.gpu_exists[nodes] & (left >= pod.gpu_milli)
    same_earlier = (left[:, :, None] == left[:, None, :]) & fits[:, None, :]
    earlier = np.tril(np.ones((left.shape[1], left.shape[1]), dtype=np.bool_), k=-1)
    duplicate = (same_earlier & earlier[None, :, :]).any(axis=2)
    rows, slots = np.nonzero(fits & ~duplicate)
    return rows.astype(np.int64), slots.astype(np.int64)


@POLICIES.register("fgd")
def _fgd(context: PolicyContext) -> FgdPolicy:
    return FgdPolicy(context.state, TypicalPods.from_pods(context.workload))
