"""Re-learning results and the cluster's layout: a result computed before nodes joined is
never installed after them (its per-node arrays are sized for the old node count)."""

from __future__ import annotations

import numpy as np

from arkgpu.model.cluster import ClusterState
from arkgpu.model.resources import Node, Pod
from arkgpu.placement.arkgpu import ArkgpuPolicy
from arkgpu.placement.arkgpu_learning import Learned
from arkgpu.placement.relearning import LaggedSolver


def _node(i: int) -> Node:
    return Node(f"n{i}", 64000, 1 << 18, 8, "A100-80GB")


def _share(i: int) -> Pod:
    return Pod(f"p{i}", 1000, 2048, 1, 250)


def test_a_result_from_before_nodes_joined_is_not_installed_after_them() -> None:
    """A re-learning submitted over 4 nodes comes back after 2 more joined: the policy keeps
    tables of 6 rows, learns again, and ranks the new nodes; the late result is dropped."""
    state = ClusterState.from_nodes([_node(i) for i in range(4)])
    solver: LaggedSolver[Learned] = LaggedSolver(lag=3)
    policy = ArkgpuPolicy(state, solver=solver)
    rng = np.random.default_rng(0)
    policy.observe(state, _share(0))  # the first arrival submits a re-learning (4 nodes)
    assert solver._pending
    assert solver._pending[0][1].tables.total.shape[0] == 4
    state.join(_node(4))
    state.join(_node(5))
    for i in range(1, 8):  # the lagged 4-node result falls due among these arrivals
        policy.observe(state, _share(i))
        assert policy.tracker.tables.total.shape[0] == len(state.nodes) == 6, i
        ranking = policy.rank(state, _share(100 + i), rng, np.arange(6), 0.0)
        assert sorted(ranking.nodes.tolist()) == list(range(6))
    assert policy.choose(state, _share(9), rng) is not None
