"""DotProd: Tetris-style alignment of the pod's request with what a node has left.

Following the FGD simulator's ``share`` dimension extension and ``max``
normalisation, each node offers one or more options, each a vector
``(cpu_left, gpu_left)``: every partly used GPU with room for a GPU-share pod,
plus one option for its wholly free GPUs taken together when they can hold the
request. Vectors of node and pod are divided by (128000, 8000); an option
scores ``1 - (node . pod) / 2`` (smaller dot product is better). A node scores
``int(100 * best option)``; the chosen GPU is that of the best option (the
first on float ties; partly used GPUs by index come before free ones).
"""

from __future__ import annotations

import numpy as np

from arkgpu.model.arrays import FloatArray, IntArray
from arkgpu.model.cluster import ClusterState
from arkgpu.model.resources import MILLI_PER_GPU, Pod
from arkgpu.placement.base import (
    MAX_NODE_SCORE,
    MAX_SPEC_CPU,
    MAX_SPEC_GPU,
    POLICIES,
    Ask,
    Policy,
    PolicyContext,
    free_gpu_count,
)
from arkgpu.placement.ranking import Ranking


def option_scores(state: ClusterState, nodes: IntArray, pod: Pod) -> FloatArray:
    """[node, option]: option scores, -inf where an option does not exist.

    Options 0..G-1 are the partly used GPU slots; option G is the free GPUs together.
    """
    request = pod.total_gpu_milli
    cpu_term = state.cpu_left[nodes] / MAX_SPEC_CPU * (pod.cpu_milli / MAX_SPEC_CPU)
    gpu_scale = request / MAX_SPEC_GPU / MAX_SPEC_GPU
    left = state.gpu_left[nodes]
    shared = left * gpu_scale + cpu_term[:, None]
    partial = state.gpu_exists[nodes] & (left < MILLI_PER_GPU) & (left >= request)
    if request >= MILLI_PER_GPU:
        partial[:] = False
    free = free_gpu_count(state, nodes)
    whole = free * MILLI_PER_GPU * gpu_scale + cpu_term
    dots = np.concatenate([shared, whole[:, None]], axis=1)
    valid = np.concatenate([partial, (free * MILLI_PER_GPU >= request)[:, None]], axis=1)
    return np.where(valid, 1.0 - dots / 2.0, -np.inf)


def _free_gpus(state: ClusterState, node: int, count: int) -> tuple[int, ...]:
    free = np.flatnonzero(state.gpu_exists[node] & (state.gpu_left[node] == MILLI_PER_GPU))
    return tuple(int(g) for g in free[:count])


class DotProductPolicy(Policy):
    """Node with the least aligned leftover; GPU by the same score."""

    def ranked(self, ask: Ask) -> Ranking:
        """Each feasible candidate scored by its best option; GPUs of that option."""
        state, pod, nodes = ask.state, ask.pod, ask.fitting()
        options = option_scores(state, nodes, pod)
        scores = (MAX_NODE_SCORE * options.max(axis=1, initial=-np.inf)).astype(np.int64)

        def gpus(i: int) -> tuple[int, ...]:
            node = int(nodes[i])
            if pod.num_gpu == 0:
                return ()
            best = int(np.argmax(options[i]))
            if best < options.shape[1] - 1:
                return (best,)
            return _free_gpus(state, node, pod.num_gpu)

        return Ranking(ask, nodes, scores, gpus)


@POLICIES.register("dotprod")
def _dotprod(context: PolicyContext) -> DotProductPolicy:
    return DotProductPolicy()
