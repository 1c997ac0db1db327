"""The LP lower bound and the clairvoyant packer: exact on hand-made cases, below every policy."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arkgpu.model.cluster import ClusterState
from arkgpu.model.resources import Node, Pod
from arkgpu.placement import POLICIES, PolicyContext
from arkgpu.placement.bounds import cutting_stock_prices, lp_bound
from arkgpu.placement.bounds_offline import clairvoyant, gpu_pods_first, lp_first

TWO_GPUS = [Node("n", 32000, 65536, 2, "T4")]


def share(milli: int, spec: frozenset[str] = frozenset()) -> Pod:
    return Pod("s", 1000, 1024, 1, milli, spec)


@pytest.mark.parametrize(
    ("pods", "expected"),
    [
        ([share(600)] * 3, 40.0),  # two 600s fit, one per GPU
        ([share(600), share(600), share(400)], 20.0),  # 600+400 and 600
        ([Pod("w", 1000, 1024, 1, 1000), share(600), share(600)], 20.0),
        ([share(250)] * 8, 0.0),
        ([share(300)] * 7, 10.0),  # three per GPU, one left out
    ],
)
def test_lp_bound_on_hand_made_cases(pods: list[Pod], expected: float) -> None:
    """The LP optimum equals the best packing where the relaxation is exact."""
    assert lp_bound(TWO_GPUS, pods).unallocated_pct == pytest.approx(expected, abs=1e-6)


def test_lp_bound_keeps_gpu_models_exact() -> None:
    """Shares that may only run on T4 cannot use the P100: by model the bound is tighter."""
    nodes = [Node("t", 8000, 65536, 1, "T4"), Node("p", 8000, 65536, 1, "P100")]
    pods = [share(600, frozenset({"T4"}))] * 2
    assert lp_bound(nodes, pods, by_model=True).unallocated_pct == pytest.approx(70.0)
    assert lp_bound(nodes, pods, by_model=False).unallocated_pct == pytest.approx(40.0)


def test_cutting_stock_prices_of_one_size() -> None:
    """One size alone costs 1 / (copies per GPU) of a GPU."""
    assert cutting_stock_prices([250], [8.0])[0] == pytest.approx(0.25)
    assert cutting_stock_prices([300], [9.0])[0] == pytest.approx(1 / 3)


def test_cutting_stock_prices_sum_to_the_gpus_needed() -> None:
    """Strong duality: sum of prices x counts is the fractional GPU count (600+400 pairs)."""
    y = cutting_stock_prices([600, 400], [10.0, 10.0])
    assert float(np.dot(y, [10, 10])) == pytest.approx(10.0)


NODES = [
    Node("g2", 64000, 1 << 18, 8, "G2"),
    Node("t4", 24000, 1 << 17, 4, "T4"),
    Node("p100", 16000, 1 << 16, 2, "P100"),
]
pods_strategy = st.lists(
    st.one_of(
        st.builds(lambda c, m: Pod("s", c, 1024, 1, m), st.integers(0, 20000), st.integers(1, 999)),
        st.builds(lambda k: Pod("w", 2000, 2048, k, 1000), st.sampled_from([1, 2, 4])),
        st.builds(lambda m: Pod("t", 1000, 1024, 1, m, frozenset({"T4"})), st.integers(1, 1000)),
    ),
    min_size=1,
    max_size=30,
)


def _online(policy: str, pods: list[Pod], nodes: list[Node] = NODES) -> float:
    state = ClusterState.from_nodes(nodes)
    chooser = POLICIES.create(policy, PolicyContext(state, pods))
    rng = np.random.default_rng(0)
    for p in pods:
        where = chooser.choose(state, p, rng)
        if where is not None:
            state.place(p, where)
    return 100.0 * (1 - state.allocated_gpu_milli / state.total_gpu_milli)


@settings(max_examples=15, deadline=None)
@given(pods=pods_strategy)
def test_bound_is_below_every_policy_and_the_clairvoyant(pods: list[Pod]) -> None:
    """No online policy nor the offline packer leaves less unallocated than the LP bound."""
    bound = lp_bound(NODES, pods).unallocated_pct
    assert clairvoyant(NODES, pods).unallocated_pct >= bound - 1e-6
    for policy in ("arkgpu", "fgd", "bestfit"):
        assert _online(policy, pods) >= bound - 1e-6


def test_lp_bound_says_which_pods_it_leaves_out() -> None:
    """Two GPUs; a whole-GPU pod, a 600, two 810s: the LP packs 1000 and 810, drops the rest."""
    pods = [Pod("w", 1000, 1024, 1, 1000), share(600), share(810), share(810)]
    bound = lp_bound(TWO_GPUS, pods)
    assert bound.unallocated_pct == pytest.approx(9.5)
    assert bound.left_out == pytest.approx({600: 1.0, 810: 1.0})
    assert lp_bound(TWO_GPUS, [share(250)] * 8).left_out == {}


def test_lp_bound_leaves_out_pods_no_empty_node_can_host() -> None:
    """A 4-GPU pod on 2-GPU nodes, or one asking more CPU than any node has, is placed by
    no scheduler: the bound leaves it out (and says so) instead of counting it packed."""
    nodes = [Node("a", 32000, 65536, 2, "T4"), Node("b", 32000, 65536, 2, "P100")]
    too_wide = Pod("w4", 8000, 1024, 4, 1000)
    too_hungry = Pod("cpu", 64000, 1024, 1, 1000)
    wrong_model = Pod("v", 1000, 1024, 2, 1000, frozenset({"V100M32"}))
    fits = Pod("ok", 1000, 1024, 2, 1000)
    bound = lp_bound(nodes, [too_wide, too_hungry, wrong_model, fits])
    assert bound.unhostable == 3
    assert bound.unallocated_pct == pytest.approx(50.0)
    assert bound.left_out == {1000: 7.0}
    assert lp_bound(nodes, [too_wide, fits]).unallocated_pct == pytest.approx(50.0)
    assert lp_bound(nodes, [fits, fits]).unhostable == 0


def test_clairvoyant_lets_cpu_only_pods_wait_for_gpu_pods() -> None:
    """A CPU-only pod that comes first would take the cores a whole-GPU pod needs; online
    it is placed and the GPU stays idle, offline it waits and fails instead."""
    node = [Node("n", 16000, 65536, 1, "T4")]
    cpu_only = Pod("c", 12000, 1024, 0, 0)
    gpu_pod = Pod("g", 8000, 1024, 1, 1000)
    assert gpu_pods_first([cpu_only, gpu_pod, cpu_only]) == [gpu_pod, cpu_only, cpu_only]
    assert _online("arkgpu", [cpu_only, gpu_pod], node) == pytest.approx(100.0)
    packed = clairvoyant(node, [cpu_only, gpu_pod])
    assert packed.unallocated_pct == pytest.approx(0.0)
    assert (packed.placed, packed.failed) == (1, 1)
    assert packed.by_method["arkgpu primed, GPU pods first"] == pytest.approx(0.0)
    assert packed.by_method["arkgpu primed, given order"] == pytest.approx(100.0)
    assert min(packed.by_method.values()) == packed.unallocated_pct


def test_holding_back_what_the_lp_leaves_out_beats_the_arrival_order() -> None:
    """One node of 2 GPUs; an 810 share, then four 470s. Placed in order, the 810 takes a
    GPU and leaves 190 no 470 fits (1,750 of 2,000 milli). The LP leaves the 810 out and
    pairs the 470s; packed first, they fill both GPUs to 940 and the 810 no longer fits."""
    node = [Node("n", 64000, 1 << 18, 2, "T4")]
    big, half = Pod("big", 1000, 1024, 1, 810), Pod("half", 1000, 1024, 1, 470)
    pods = [big, half, half, half, half]
    bound = lp_bound(node, pods)
    assert bound.left_out == {810: pytest.approx(1.0)}
    assert lp_first(pods, bound.left_out) == [half, half, half, half, big]
    packed = clairvoyant(node, pods, bound)
    assert packed.by_method["arkgpu primed, given order"] == pytest.approx(12.5)
    assert packed.by_method["arkgpu primed, the LP's pods first"] == pytest.approx(6.0)
    assert packed.unallocated_pct == pytest.approx(6.0)
    assert packed.failed == 1
