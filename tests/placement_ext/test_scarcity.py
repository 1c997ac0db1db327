"""The scarcity term: nodes that alone can host a shape are kept for it."""

from __future__ import annotations

import numpy as np

from arkgpu.model.cluster import ClusterState
from arkgpu.model.resources import Node, Pod
from arkgpu.placement.arkgpu import ArkgpuConfig, ArkgpuPolicy
from arkgpu.placement.fragmentation import TypicalPods
from arkgpu.placement.scarcity import hosting_loss, scarcity_weights

# Nine 8-GPU nodes with 96 cores and one with 128: only the last can host an
# 8-GPU pod asking for 120 cores (phi = 8 / 80 = 0.1).
NODES = [Node(f"g2-{i}", 96000, 1 << 19, 8, "G2") for i in range(9)]
NODES.insert(0, Node("g3", 128000, 1 << 19, 8, "G3"))
BIG = Pod("big", 120000, 1 << 12, 8, 1000)
MID = Pod("mid", 88000, 1 << 12, 8, 1000)
SMALL = Pod("small", 4000, 1 << 10, 1, 1000)


def test_only_shapes_that_few_gpus_can_host_weigh() -> None:
    """weight = freq * demand * max(0, 1/phi - 2): 0.1 * 8000 * 8 for the big shape, 0 otherwise."""
    state = ClusterState.from_nodes(NODES)
    typical = TypicalPods.from_pods([BIG] + [MID] * 4 + [SMALL] * 5)
    weights = dict(
        zip(
            zip(typical.num.tolist(), typical.cpu.tolist(), strict=True),
            scarcity_weights(state, typical, typical.access(state)).tolist(),
            strict=True,
        )
    )
    assert weights[(8, 120000)] == 0.1 * 8000 * (1 / 0.1 - 2)
    assert weights[(8, 88000)] == 0.0
    assert weights[(1, 4000)] == 0.0


def test_a_shape_no_node_can_host_weighs_nothing() -> None:
    """phi = 0: no placement can spoil a host that does not exist."""
    state = ClusterState.from_nodes(NODES)
    typical = TypicalPods.from_pods([Pod("huge", 200000, 1, 8, 1000)])
    assert scarcity_weights(state, typical, typical.access(state)).tolist() == [0.0]


def test_hosting_loss_counts_only_hosting_taken_away() -> None:
    """Shapes hostable before and not after are charged; gained hosting is not credited."""
    weights = np.array([5.0, 7.0, 11.0])
    before = np.array([[True, True, False], [False, True, True]])
    after = np.array([[False, True, True], [False, False, False]])
    assert hosting_loss(weights, before, after).tolist() == [5.0, 18.0]


# A workload where the big shape is rare (0.4% of the typical pods): FGD's
# integer score then ties the G3 and a G2 for an 88-core 8-GPU pod.
HISTORY = [BIG] * 4 + [MID] * 100 + [Pod(f"s{i}", 1000 + i, 1, 1, 1000) for i in range(896)]


def first_choice(policy: ArkgpuPolicy, state: ClusterState) -> str:
    policy.prime(state, HISTORY)
    where = policy.choose(state, MID, np.random.default_rng(0))
    assert where is not None
    state.place(MID, where)
    return NODES[where.node].name


def test_the_policy_keeps_the_only_big_node_for_the_big_pods() -> None:
    """The 88-core pod fills a G2 node, and the 120-core pod that follows finds the G3."""
    state = ClusterState.from_nodes(NODES)
    policy = ArkgpuPolicy(state)
    assert first_choice(policy, state).startswith("g2")
    big = policy.choose(state, BIG, np.random.default_rng(0))
    assert big is not None
    assert NODES[big.node].name == "g3"


def test_without_the_term_the_g3_is_taken_first() -> None:
    """The same case with the term off: the lowest-index tie-break gives the G3 away."""
    state = ClusterState.from_nodes(NODES)
    policy = ArkgpuPolicy(state, ArkgpuConfig(scarcity_milli_per_point=float("inf")))
    assert first_choice(policy, state) == "g3"
