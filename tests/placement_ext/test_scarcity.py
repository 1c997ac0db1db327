"""The scarcity term: nodes that alone can host a shape are kept for it."""

from __future__ import annotations

import numpy as np

from arkgpu.model.cluster import ClusterState
from arkgpu.model.resources import Node, Pod
from arkgpu.placement.arkgpu import ArkgpuConfig, ArkgpuPolicy
from arkgpu.placement.fragmentation import FragTables, TypicalPods
from arkgpu.placement.scarcity import hosting_copies, hosting_loss, scarcity

# Nine 8-GPU nodes with 96 cores and one with 128: only the last can host an
# 8-GPU pod asking for 120 cores (phi = 8 / 80 = 0.1).
NODES = [Node(f"g2-{i}", 96000, 1 << 19, 8, "G2") for i in range(9)]
NODES.insert(0, Node("g3", 128000, 1 << 19, 8, "G3"))
BIG = Pod("big", 120000, 1 << 12, 8, 1000)
MID = Pod("mid", 88000, 1 << 12, 8, 1000)
SMALL = Pod("small", 4000, 1 << 10, 1, 1000)
SPEC_P100 = Pod("p", 500, 1, 1, 1000, frozenset({"P100"}))


def test_only_shapes_that_few_gpus_can_host_weigh() -> None:
    """weight = freq * demand * max(0, 1/phi - 2): 0.1 * 8000 * 8 for the big shape, 0 otherwise."""
    state = ClusterState.from_nodes(NODES)
    typical = TypicalPods.from_pods([BIG] + [MID] * 4 + [SMALL] * 5)
    weights = dict(
        zip(
            zip(typical.num.tolist(), typical.cpu.tolist(), strict=True),
            scarcity(state, typical, typical.access(state)).weights.tolist(),
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
    assert scarcity(state, typical, typical.access(state)).weights.tolist() == [0.0]


def test_hosting_loss_charges_the_share_of_copies_taken_away() -> None:
    """Per shape: weight x (copies before - after) / copies when empty; gains are not credited."""
    weights = np.array([5.0, 7.0, 11.0])
    before = np.array([[2, 1, 0], [0, 4, 2]])
    after = np.array([[1, 1, 1], [0, 0, 0]])
    empty = np.array([[2, 1, 1], [4, 4, 2]])
    assert hosting_loss(weights, before, after, empty).tolist() == [2.5, 18.0]


def test_copies_are_bounded_by_gpus_cpu_and_model() -> None:
    """A 4-GPU T4 node with 10 cores: two 4-core 1-GPU pods fit; none that names the P100."""
    state = ClusterState.from_nodes([Node("t4", 10000, 1 << 16, 4, "T4")])
    typical = TypicalPods.from_pods(
        [Pod("a", 4000, 1, 1, 1000), Pod("b", 1000, 1, 2, 1000), SPEC_P100]
    )
    tables = FragTables.compute(state.gpu_left, typical)
    copies = hosting_copies(tables, state.cpu_left, typical.access(state), typical)
    by_shape = dict(zip(typical.cpu.tolist(), copies[0].tolist(), strict=True))
    assert by_shape == {4000: 2, 1000: 2, 500: 0}


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


def test_pods_that_fit_anywhere_leave_a_named_model_alone_before_its_last_gpu() -> None:
    """A 4-GPU V100 node (index 0) and two 8-GPU G2 nodes; 1% of the pods may only run on
    the V100, too few to move FGD's integer score. A pod that fits anywhere goes to a G2
    although the V100 has GPUs to spare, twice: every GPU taken from it is charged. (With
    hosting as yes/no only the V100's last GPU would be, and the tie would give it away.)"""
    nodes = [Node("v100", 64000, 1 << 18, 4, "V100M32")] + [
        Node(f"g2-{i}", 96000, 1 << 19, 8, "G2") for i in range(2)
    ]
    v100_only = Pod("v", 4000, 1 << 10, 1, 1000, frozenset({"V100M32"}))
    history = [v100_only] * 4 + [Pod(f"s{i}", 1000 + i, 1, 1, 1000) for i in range(396)]
    state = ClusterState.from_nodes(nodes)
    policy = ArkgpuPolicy(state)
    policy.prime(state, history)
    rng = np.random.default_rng(0)
    anywhere = Pod("a", 4000, 1 << 10, 1, 1000)
    for _ in range(2):
        where = policy.choose(state, anywhere, rng)
        assert where is not None
        assert nodes[where.node].gpu_model == "G2"
        state.place(anywhere, where)
    where = policy.choose(state, v100_only, rng)
    assert where is not None
    assert nodes[where.node].gpu_model == "V100M32"


def test_a_shape_asking_no_cpu_is_hosted_by_a_node_without_cpu_left() -> None:
    """Copies of a 0-CPU shape count GPUs only: taking one of four GPUs of the only T4 node
    costs a quarter of the shape's weight even when the node's CPU is all used."""
    nodes = [Node("t4", 8000, 1 << 16, 4, "T4")] + [
        Node(f"g2-{i}", 96000, 1 << 19, 8, "G2") for i in range(4)
    ]
    state = ClusterState.from_nodes(nodes)
    typical = TypicalPods.from_pods(
        [Pod("t", 0, 1, 1, 1000, frozenset({"T4"}))] + [Pod("a", 1000, 1, 1, 1000)] * 3
    )
    found = scarcity(state, typical, typical.access(state))
    weight = float(found.weights.max())
    assert weight > 0
    full = FragTables.compute(state.gpu_left[:1], typical)
    one_taken = FragTables.compute(np.array([[0, 1000, 1000, 1000, 0, 0, 0, 0]]), typical)
    no_cpu = np.array([0])
    lost = found.loss(np.array([0]), (full, no_cpu), (one_taken, no_cpu))
    assert lost.tolist() == [weight / 4]
