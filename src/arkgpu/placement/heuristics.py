"""The FGD paper's baseline policies: Random, BestFit, GPU packing, GPU clustering.

Each follows the node score of the FGD authors' public simulator
(hkust-adsl/kubernetes-scheduler-simulator), including its integer arithmetic,
since truncation decides ties, and ties go to the earliest node in node order
(:meth:`~arkgpu.placement.ranking.Ranking.best`). Inside the chosen
node every one of them uses the simulator's default ``best`` GPU choice
(:func:`~arkgpu.placement.base.best_fit_gpus`).
"""

from __future__ import annotations

import numpy as np

from arkgpu.model.arrays import IntArray
from arkgpu.model.cluster import ClusterState, affinity_column
from arkgpu.model.resources import MILLI_PER_GPU, Pod
from arkgpu.placement.base import (
    MAX_NODE_SCORE,
    MAX_SPEC_CPU,
    MAX_SPEC_GPU,
    POLICIES,
    Ask,
    Policy,
    PolicyContext,
    best_fit_gpus,
    fits_gpu,
    free_gpu_count,
    node_gpu_left,
)
from arkgpu.placement.ranking import Ranking


class ScoredPolicy(Policy):
    """Filter, score every feasible node, best first (earliest on ties), best-fit GPUs."""

    def ranked(self, ask: Ask) -> Ranking:
        """The feasible candidates, their :meth:`scores` and best-fit GPUs."""
        state, pod, nodes = ask.state, ask.pod, ask.fitting()
        scores = self.scores(state, nodes, pod) if len(nodes) else nodes
        return Ranking(ask, nodes, scores, lambda i: best_fit_gpus(state, int(nodes[i]), pod))

    def scores(self, state: ClusterState, nodes: IntArray, pod: Pod) -> IntArray:
        """Integer score of each candidate node; higher is better."""
        raise NotImplementedError


class RandomPolicy(Policy):
    """Random: a uniformly drawn feasible node, and a uniformly drawn GPU with room for a share.

    The FGD simulator draws the node in its PreScore step and, with its ``random``
    GPU selection, the GPU for a share; whole GPUs are the lowest-indexed free ones.
    The drawn node scores 1, every other feasible node 0.
    """

    def ranked(self, ask: Ask) -> Ranking:
        """A uniformly drawn feasible candidate first; GPUs drawn when asked for."""
        state, pod, rng, nodes = ask.state, ask.pod, ask.rng, ask.fitting()
        scores = np.zeros(len(nodes), dtype=np.int64)
        if len(nodes):
            scores[rng.integers(len(nodes))] = 1

        def gpus(i: int) -> tuple[int, ...]:
            node = int(nodes[i])
            if not pod.is_gpu_share:
                return best_fit_gpus(state, node, pod)
            fits = np.flatnonzero(fits_gpu(state, pod, node))
            return (int(fits[rng.integers(len(fits))]),)

        return Ranking(ask, nodes, scores, gpus)


def normalize_scores(scores: IntArray) -> IntArray:
    """kube-scheduler style min-max normalisation to 0..100 in integer arithmetic."""
    low, high = int(scores.min()), int(scores.max())
    if high == low:
        return np.zeros_like(scores)
    return (scores - low) * MAX_NODE_SCORE // (high - low)


class BestFitPolicy(ScoredPolicy):
    """BestFit: least CPU and GPU left after placement, equally weighted.

    ``score = 100 * (1 - 0.5 (cpu_left - cpu) / 128000 - 0.5 (gpu_left - gpu) / 8000)``,
    truncated, then min-max normalised over the feasible nodes.
    """

    def scores(self, state: ClusterState, nodes: IntArray, pod: Pod) -> IntArray:
        """Tightest fit scores highest."""
        cpu = (state.cpu_left[nodes] - pod.cpu_milli) / MAX_SPEC_CPU
        gpu = (node_gpu_left(state, nodes) - pod.total_gpu_milli) / MAX_SPEC_GPU
        raw = ((1.0 - (0.5 * cpu + 0.5 * gpu)) * MAX_NODE_SCORE).astype(np.int64)
        return normalize_scores(raw)


class PackingPolicy(ScoredPolicy):
    """GPU packing: prefer partly used GPUs, then free GPUs on used nodes, then idle nodes.

    - a share that fits on partly used GPUs: ``max(100 - sum(pct_left) / 10, 50)``,
      ``pct_left`` the integer percent left on each GPU it would use;
    - it needs wholly free GPUs of a node in use: ``max(50 - free GPUs used, 33)``;
    - the node is idle: ``max(33 - its GPUs, its GPUs)``.

    Pods without GPU score 0 everywhere.
    """

    def scores(self, state: ClusterState, nodes: IntArray, pod: Pod) -> IntArray:
        """Score of each node by the three cases above."""
        if pod.num_gpu == 0:
            return np.zeros(len(nodes), dtype=np.int64)
        free = free_gpu_count(state, nodes)
        idle = np.maximum(MAX_NODE_SCORE // 3 - free, free)
        if pod.is_gpu_share:
            fits = fits_gpu(state, pod)[nodes]
            tightest = np.where(fits, state.gpu_left[nodes], MILLI_PER_GPU + 1).min(axis=1)
            shared = np.maximum(MAX_NODE_SCORE - (tightest * 100 // MILLI_PER_GPU) // 10, 50)
            fresh = np.full(len(nodes), MAX_NODE_SCORE // 2 - 1)
            in_use = np.where(tightest == MILLI_PER_GPU, fresh, shared)
        else:
            in_use = np.full(
                len(nodes), max(MAX_NODE_SCORE // 2 - pod.num_gpu, MAX_NODE_SCORE // 3)
            )
        return np.where(free == state.gpu_count[nodes], idle, in_use).astype(np.int64)


class ClusteringPolicy(ScoredPolicy):
    """GPU clustering: put pods of the same GPU kind together (share, 1-GPU, 2-GPU...).

    Bands of 25 points, fuller nodes higher within a band:
    only this kind on the node (75..100), this kind among others (50..75),
    no GPU pod yet (25..50), only other kinds (0..25). The in-band term is
    ``25 * (8000 - gpu_left) // 8000``. Pods without GPU score 0 everywhere.
    """

    def scores(self, state: ClusterState, nodes: IntArray, pod: Pod) -> IntArray:
        """Band plus fullness for each node."""
        if pod.num_gpu == 0:
            return np.zeros(len(nodes), dtype=np.int64)
        kinds = state.affinity[nodes]
        same = kinds[:, affinity_column(pod)] > 0
        distinct = (kinds > 0).sum(axis=1)
        band = np.where(same, np.where(distinct == 1, 3, 2), np.where(distinct == 0, 1, 0))
        quarter = MAX_NODE_SCORE // 4
        fullness = quarter * (MAX_SPEC_GPU - node_gpu_left(state, nodes)) // MAX_SPEC_GPU
        return np.asarray(fullness + band * quarter, dtype=np.int64)


@POLICIES.register("random")
def _random(context: PolicyContext) -> RandomPolicy:
    return RandomPolicy()


@POLICIES.register("bestfit")
def _bestfit(context: PolicyContext) -> BestFitPolicy:
    return BestFitPolicy()


@POLICIES.register("packing")
def _packing(context: PolicyContext) -> PackingPolicy:
    return PackingPolicy()


@POLICIES.register("clustering")
def _clustering(context: PolicyContext) -> ClusteringPolicy:
    return ClusteringPolicy()
