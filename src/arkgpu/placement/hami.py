"""HAMi's node and GPU scheduling policies, ``binpack`` and ``spread``.

HAMi (Project-HAMi/HAMi, docs/develop/scheduler-policy.md) scores a node by
its GPU use after placement, ``(used + request) / allocatable``, and a GPU by
``(used_core + request_core) / 100% + (used_mem + request_mem) / total_mem``.
Binpack prefers the highest score, spread the lowest, at node and GPU level
alike. In the openb trace one share stands for both compute and memory, so
both terms are the GPU's milli in use. Node ties go to the earliest node in
node order, GPU ties to the lowest index. Pods without GPU are left to the
default kube-scheduler, modelled here by its least-allocated CPU score.
"""

from __future__ import annotations

import numpy as np

from arkgpu.model.arrays import IntArray
from arkgpu.model.cluster import ClusterState
from arkgpu.model.resources import MILLI_PER_GPU, Pod
from arkgpu.placement.base import (
    POLICIES,
    Ask,
    Policy,
    PolicyContext,
    fits_gpu,
    node_gpu_left,
)
from arkgpu.placement.ranking import Ranking


class HamiPolicy(Policy):
    """HAMi node and GPU policy; ``binpack`` (True) or ``spread`` (False)."""

    def __init__(self, binpack: bool) -> None:
        self.sign = 1.0 if binpack else -1.0

    def ranked(self, ask: Ask) -> Ranking:
        """Nodes by GPU use after placement, then GPUs by their own use."""
        state, pod, nodes = ask.state, ask.pod, ask.fitting()
        scores = self._node_scores(state, nodes, pod)
        return Ranking(ask, nodes, scores, lambda i: self._gpus(state, int(nodes[i]), pod))

    def _node_scores(self, state: ClusterState, nodes: IntArray, pod: Pod) -> np.ndarray:
        if pod.num_gpu == 0:
            return np.asarray(state.cpu_left[nodes] / state.cpu_capacity[nodes])
        capacity = state.gpu_count[nodes] * MILLI_PER_GPU
        used = capacity - node_gpu_left(state, nodes) + pod.total_gpu_milli
        return np.asarray(self.sign * used / capacity)

    def _gpus(self, state: ClusterState, node: int, pod: Pod) -> tuple[int, ...]:
        if pod.num_gpu == 0:
            return ()
        fits = np.flatnonzero(fits_gpu(state, pod, node))
        used = MILLI_PER_GPU - state.gpu_left[node, fits]
        order = np.argsort(-self.sign * used, kind="stable")
        return tuple(int(g) for g in fits[order[: pod.num_gpu]])


@POLICIES.register("hami-binpack")
def _binpack(context: PolicyContext) -> HamiPolicy:
    return HamiPolicy(binpack=True)


@POLICIES.register("hami-spread")
def _spread(context: PolicyContext) -> HamiPolicy:
    return HamiPolicy(binpack=False)
