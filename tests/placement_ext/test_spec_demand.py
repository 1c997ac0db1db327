"""The gpu_spec demand term: models that constrained pods will need are kept for them."""

from __future__ import annotations

import numpy as np
import pytest

from arkgpu.model.cluster import Assignment, ClusterState
from arkgpu.model.resources import Node, Pod
from arkgpu.placement.arkgpu import ArkgpuConfig, ArkgpuPolicy
from arkgpu.placement.spec_demand import FREE, Arrived, spec_demand

MODELS = ("G2", "P100", "T4")
ANY: frozenset[str] = frozenset()
P100 = frozenset({"P100"})
P100_T4 = frozenset({"P100", "T4"})
MANY = 10**8  # pods seen: the estimate's standard error is negligible


def seen(milli: float, pods: int = MANY) -> Arrived:
    return Arrived(milli, pods)


def whole(spec: frozenset[str]) -> tuple[frozenset[str], bool]:
    return (spec, False)


def shares(spec: frozenset[str]) -> tuple[frozenset[str], bool]:
    return (spec, True)


def supply(free: list[float], partial: list[float] | None = None) -> np.ndarray:
    return np.array([free, partial or [0.0] * len(free)])


ALL = np.array([0, 1, 2])


def test_a_model_its_constrained_demand_saturates_costs_unconstrained_pods_all() -> None:
    """P100-only demand (10% of 10,000 left = 1,000) exceeds the P100's 800: every milli an
    unconstrained pod takes there is lost to it; G2 and T4 have room and cost nothing. A
    share that starts a free P100 GPU takes the whole GPU from the P100-only pods."""
    found = spec_demand(
        MODELS, supply([8000.0, 800.0, 1200.0]), {whole(ANY): seen(90.0), whole(P100): seen(10.0)}
    )
    assert found.loss(Pod("a", 1000, 1, 1, 1000), ALL).tolist() == [0.0, 1000.0, 0.0]
    half = Pod("h", 1000, 1, 1, 500)
    assert found.loss(half, ALL, np.array([1000, 1000, 1000])).tolist() == [0.0, 1000.0, 0.0]
    with pytest.raises(ValueError, match="milli left"):
        found.loss(half, ALL)
    assert found.loss(Pod("p", 1000, 1, 1, 1000, P100), np.array([1])).tolist() == [0.0]


def test_a_share_may_fill_a_gap_whole_gpu_pods_cannot_use() -> None:
    """The P100-only pods are whole-GPU pods and saturate the P100's free GPUs; a share that
    fits anywhere loses nothing in a P100 GPU's gap, and all of a GPU if it starts one."""
    found = spec_demand(
        MODELS,
        supply([8000.0, 800.0, 1200.0], [0.0, 300.0, 0.0]),
        {whole(ANY): seen(90.0), whole(P100): seen(10.0)},
    )
    half = Pod("h", 1000, 1, 1, 300)
    on_p100 = np.array([1, 1])
    assert found.loss(half, on_p100, np.array([300, 1000])).tolist() == [0.0, 1000.0]


def test_room_left_for_the_constrained_demand_costs_nothing() -> None:
    """P100-only demand of 500 fits in the P100's 800: no model is worth more than another."""
    found = spec_demand(
        MODELS, supply([8000.0, 800.0, 1200.0]), {whole(ANY): seen(95.0), whole(P100): seen(5.0)}
    )
    assert found.u.tolist() == [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]


def test_a_flexible_constrained_pod_is_sent_where_it_displaces_nobody() -> None:
    """P100-only pods saturate the P100; a P100|T4 pod on the P100 displaces one of them,
    on the T4 (room to spare) nothing. A 2-GPU pod loses for both GPUs."""
    arrived = {whole(ANY): seen(80.0), whole(P100): seen(10.0), whole(P100_T4): seen(10.0)}
    found = spec_demand(MODELS, supply([8000.0, 800.0, 1200.0]), arrived)
    pod = Pod("pt", 1000, 1, 2, 1000, P100_T4)
    assert found.loss(pod, np.array([1, 2])).tolist() == pytest.approx([2000.0, 0.0])


def test_no_spec_no_loss() -> None:
    """Without constrained pods (every openb trace) the term is exactly zero; a spec naming
    no model of the cluster has nothing to keep; CPU-only pods lose nothing."""
    room = supply([8000.0, 800.0, 1200.0])
    none = spec_demand(MODELS, room, {whole(ANY): seen(100.0)})
    assert none.loss(Pod("a", 1000, 1, 1, 1000), ALL).tolist() == [0.0, 0.0, 0.0]
    a100 = frozenset({"A100"})
    assert spec_demand(MODELS, room, {whole(ANY): seen(90.0), whole(a100): seen(10.0)}).u.size == 0
    found = spec_demand(MODELS, room, {whole(ANY): seen(90.0), whole(P100): seen(10.0)})
    assert found.loss(Pod("c", 1000, 1, 0, 0), np.array([1])).tolist() == [0.0]


def test_a_class_seen_a_few_times_is_taken_one_standard_error_above_its_estimate() -> None:
    """P100-only pods are 7% of the demand, the P100 8% of the GPU milli left. Seen four
    times, their demand is taken at 7% x (1 + 1/2) = 10.5%: the P100 is kept for them.
    Seen 400 times, at 7.35%: it fits, and the P100 costs nothing."""
    room = supply([8000.0, 800.0, 1200.0])
    few = spec_demand(MODELS, room, {whole(ANY): seen(93.0, 50), whole(P100): seen(7.0, 4)})
    assert few.u[FREE].tolist() == pytest.approx([0.0, 1.0, 0.0])
    many = spec_demand(MODELS, room, {whole(ANY): seen(93.0, 5000), whole(P100): seen(7.0, 400)})
    assert many.u[FREE].tolist() == [0.0, 0.0, 0.0]


# One 2-GPU P100 node, then two 8-GPU G2 nodes.
NODES = [Node("p100", 32000, 1 << 17, 2, "P100")] + [
    Node(f"g2-{i}", 96000, 1 << 19, 8, "G2") for i in range(2)
]
P100_PAIR = Pod("p", 4000, 1 << 10, 2, 1000, P100)
HALF = Pod("h", 2000, 1 << 10, 1, 500)
WHOLE = Pod("w", 2000, 1 << 10, 1, 1000)
# By GPU demand 20% may only use the P100 (11% of the GPUs), in 2-GPU pods too rare
# (6% of the pods) for FGD's measure to keep the P100 for them.
HISTORY = [P100_PAIR] * 6 + [HALF] * 94
TERM_ON = ArkgpuConfig(scarcity_milli_per_point=float("inf"))
TERM_OFF = ArkgpuConfig(scarcity_milli_per_point=float("inf"), spec_milli_per_point=float("inf"))


def place_half(config: ArkgpuConfig, first: Pod) -> tuple[str, tuple[int, ...]]:
    """Where a share that fits anywhere goes once ``first`` holds the P100's GPU 0."""
    state = ClusterState.from_nodes(NODES)
    state.place(first, Assignment(0, (0,)))
    policy = ArkgpuPolicy(state, config)
    policy.prime(state, HISTORY)
    where = policy.choose(state, HALF, np.random.default_rng(0))
    assert where is not None
    return NODES[where.node].gpu_model, where.gpus


def test_a_share_that_fits_anywhere_does_not_start_a_gpu_of_a_saturated_model() -> None:
    """The P100-only pods need more than the P100 has: the share starts a G2 GPU rather than
    the P100's free one; with the term off, FGD's tie-break takes the P100's."""
    assert place_half(TERM_ON, WHOLE) == ("G2", (0,))
    assert place_half(TERM_OFF, WHOLE) == ("P100", (1,))


def test_a_share_that_fits_anywhere_may_fill_a_gap_whole_gpu_pods_cannot_use() -> None:
    """With half of the P100's GPU 0 taken, the share completes it: the P100-only pods are
    whole-GPU pods and could not use that half anyway."""
    assert place_half(TERM_ON, HALF) == ("P100", (0,))
