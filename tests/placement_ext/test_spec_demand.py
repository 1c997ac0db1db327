"""The gpu_spec demand term: models that constrained pods will need are kept for them."""

from __future__ import annotations

import numpy as np
import pytest

from arkgpu.model.cluster import Assignment, ClusterState
from arkgpu.model.resources import Node, Pod
from arkgpu.placement.arkgpu import ArkgpuConfig, ArkgpuPolicy
from arkgpu.placement.spec_demand import Arrived, spec_demand

MODELS = ("G2", "P100", "T4")
ANY: frozenset[str] = frozenset()
P100 = frozenset({"P100"})
P100_T4 = frozenset({"P100", "T4"})
MANY = 10**8  # pods seen: the estimate's standard error is negligible


def seen(milli: float, pods: int = MANY) -> Arrived:
    return Arrived(milli, pods)


def test_a_model_its_constrained_demand_saturates_costs_unconstrained_pods_all() -> None:
    """P100-only demand (10% of 10,000 left = 1,000) exceeds the P100's 800: every milli an
    unconstrained pod takes there is lost to it; G2 and T4 have room and cost nothing."""
    supply = np.array([8000.0, 800.0, 1200.0])
    found = spec_demand(MODELS, supply, {ANY: seen(90.0), P100: seen(10.0)})
    any_pod = Pod("a", 1000, 1, 1, 500)
    assert found.loss(any_pod, np.array([0, 1, 2])).tolist() == pytest.approx([0.0, 500.0, 0.0])
    p100_pod = Pod("p", 1000, 1, 1, 500, P100)
    assert found.loss(p100_pod, np.array([1])).tolist() == pytest.approx([0.0])


def test_room_left_for_the_constrained_demand_costs_nothing() -> None:
    """P100-only demand of 500 fits in the P100's 800: no model is worth more than another."""
    supply = np.array([8000.0, 800.0, 1200.0])
    found = spec_demand(MODELS, supply, {ANY: seen(95.0), P100: seen(5.0)})
    assert found.reduced.tolist() == [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]


def test_a_flexible_constrained_pod_is_sent_where_it_displaces_nobody() -> None:
    """P100-only pods saturate the P100; a P100|T4 pod on the P100 displaces one of them,
    on the T4 (room to spare) nothing. A 2-GPU pod loses for both GPUs."""
    supply = np.array([8000.0, 800.0, 1200.0])
    found = spec_demand(MODELS, supply, {ANY: seen(80.0), P100: seen(10.0), P100_T4: seen(10.0)})
    pod = Pod("pt", 1000, 1, 2, 1000, P100_T4)
    assert found.loss(pod, np.array([1, 2])).tolist() == pytest.approx([2000.0, 0.0])


def test_no_spec_no_loss() -> None:
    """Without constrained pods (every openb trace) the term is exactly zero; a spec naming
    no model of the cluster has nothing to keep; CPU-only pods lose nothing."""
    supply = np.array([8000.0, 800.0, 1200.0])
    assert spec_demand(MODELS, supply, {ANY: seen(100.0)}).reduced.size == 0
    a100 = frozenset({"A100"})
    assert spec_demand(MODELS, supply, {ANY: seen(90.0), a100: seen(10.0)}).reduced.size == 0
    found = spec_demand(MODELS, supply, {ANY: seen(90.0), P100: seen(10.0)})
    cpu_only = Pod("c", 1000, 1, 0, 0)
    assert found.loss(cpu_only, np.array([1])).tolist() == [0.0]


def test_a_class_seen_a_few_times_is_taken_one_standard_error_above_its_estimate() -> None:
    """P100-only pods are 7% of the demand, the P100 8% of the GPU milli left. Seen four
    times, their demand is taken at 7% x (1 + 1/2) = 10.5%: the P100 is kept for them.
    Seen 400 times, at 7.35%: it fits, and the P100 costs nothing."""
    supply = np.array([8000.0, 800.0, 1200.0])
    few = spec_demand(MODELS, supply, {ANY: seen(93.0, 50), P100: seen(7.0, 4)})
    assert few.reduced[0].tolist() == pytest.approx([0.0, 1.0, 0.0])
    many = spec_demand(MODELS, supply, {ANY: seen(93.0, 5000), P100: seen(7.0, 400)})
    assert many.reduced[0].tolist() == [0.0, 0.0, 0.0]


# One 2-GPU P100 node, half of one GPU already taken by a share, then two 8-GPU G2 nodes.
NODES = [Node("p100", 32000, 1 << 17, 2, "P100")] + [
    Node(f"g2-{i}", 96000, 1 << 19, 8, "G2") for i in range(2)
]
P100_POD = Pod("p", 4000, 1 << 10, 1, 1000, P100)
HALF = Pod("h", 2000, 1 << 10, 1, 500)
# By GPU demand, 21% may only use the P100, which is 11% of the GPUs.
HISTORY = [P100_POD] * 12 + [HALF] * 88


def place_half(config: ArkgpuConfig) -> str:
    state = ClusterState.from_nodes(NODES)
    state.place(HALF, Assignment(0, (0,)))
    policy = ArkgpuPolicy(state, config)
    policy.prime(state, HISTORY)
    where = policy.choose(state, HALF, np.random.default_rng(0))
    assert where is not None
    return NODES[where.node].gpu_model


def test_pods_that_fit_anywhere_leave_a_saturated_model_to_the_pods_that_need_it() -> None:
    """The P100-only pods need more than the P100 has: a share that fits anywhere starts a
    G2 GPU rather than complete the P100's half-used one."""
    assert place_half(ArkgpuConfig(scarcity_milli_per_point=float("inf"))) == "G2"


def test_without_the_term_the_saturated_model_is_taken() -> None:
    """The same case with the term off: FGD and the pattern loss complete the P100's GPU."""
    off = ArkgpuConfig(scarcity_milli_per_point=float("inf"), spec_milli_per_point=float("inf"))
    assert place_half(off) == "P100"
