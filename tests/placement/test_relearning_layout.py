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


def test_first_of_equal_matches_its_definition() -> None:
    """The slot-by-slot pass keeps exactly the fitting slots with no earlier fitting slot of
    the same milli left (the [node, slot, slot] definition), on random states."""
    from arkgpu.placement.fgd import first_of_equal  # noqa: PLC0415

    rng = np.random.default_rng(7)
    for _ in range(300):
        n, g = int(rng.integers(1, 40)), int(rng.integers(1, 10))
        left = rng.choice([0, 100, 250, 500, 1000], size=(n, g)).astype(np.int64)
        fits = rng.random((n, g)) < 0.7
        same = (left[:, :, None] == left[:, None, :]) & fits[:, None, :]
        earlier = np.tril(np.ones((g, g), dtype=np.bool_), k=-1)
        expected = fits & ~(same & earlier[None]).any(axis=2)
        assert np.array_equal(first_of_equal(left, fits), expected)
