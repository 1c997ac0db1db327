"""The arkgpu policy: invariants of its placements and of its learned measures."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arkgpu.model.cluster import ClusterState
from arkgpu.model.resources import Node, Pod
from arkgpu.placement import POLICIES, PolicyContext
from arkgpu.placement.arkgpu import ArkgpuConfig, ArkgpuPolicy
from arkgpu.placement.arkgpu_learning import ShapeLearner
from arkgpu.placement.arkgpu_values import _remainder_values
from arkgpu.placement.base import feasible_nodes
from arkgpu.traces.catalog import all_node_list
from arkgpu.traces.fgd_variants import read_default, rebuild, write_rows
from arkgpu.traces.openb import load_nodes, load_pods

NODES = [
    Node("g2", 64000, 1 << 18, 8, "G2"),
    Node("t4", 32000, 1 << 17, 4, "T4"),
    Node("p100", 16000, 1 << 16, 2, "P100"),
    Node("cpu", 32000, 1 << 17, 0, ""),
]

pods_strategy = st.lists(
    st.one_of(
        st.builds(lambda c, m: Pod("s", c, 1024, 1, m), st.integers(0, 40000), st.integers(1, 999)),
        st.builds(
            lambda c, k: Pod("w", c, 2048, k, 1000),
            st.integers(0, 40000),
            st.sampled_from([1, 2, 4, 8]),
        ),
        st.builds(
            lambda c, m: Pod("c", c, m, 0, 0), st.integers(0, 40000), st.integers(0, 1 << 17)
        ),
        st.builds(lambda m: Pod("t", 1000, 1024, 1, m, frozenset({"T4"})), st.integers(1, 1000)),
        st.builds(lambda k: Pod("v", 1000, 1024, k, 1000, frozenset({"P100"})), st.integers(1, 2)),
    ),
    min_size=1,
    max_size=60,
)


@settings(max_examples=30, deadline=None)
@given(pods=pods_strategy, relearn=st.sampled_from([1, 3, 256]))
def test_never_overcommits_and_respects_gpu_spec(pods: list[Pod], relearn: int) -> None:
    """Whatever arrives, however often prices are re-learned, placements fit and obey gpu_spec."""
    state = ClusterState.from_nodes(NODES)
    policy = ArkgpuPolicy(state, ArkgpuConfig(relearn_every=relearn, warmup=2))
    rng = np.random.default_rng(0)
    for p in pods:
        where = policy.choose(state, p, rng)
        if where is None:
            continue
        if p.gpu_spec:
            assert state.model_names[state.model_index[where.node]] in p.gpu_spec
        if p.num_gpu == 0:
            assert where.gpus == ()
        state.place(p, where)  # raises PlacementError on any over-commit
    assert (state.gpu_left >= 0).all()
    assert (state.cpu_left >= 0).all()
    assert (state.memory_left >= 0).all()


def test_refuses_only_when_no_node_fits() -> None:
    """None exactly when no node has room: an 8-GPU pod on a cluster with at most 4 free GPUs."""
    state = ClusterState.from_nodes(NODES[1:])
    policy = POLICIES.create("arkgpu", PolicyContext(state, []))
    rng = np.random.default_rng(0)
    assert policy.choose(state, Pod("big", 1000, 1024, 8, 1000), rng) is None
    assert policy.choose(state, Pod("four", 1000, 1024, 4, 1000), rng) is not None


def test_reserve_keeps_the_cores_free_gpus_need_for_gpu_pods() -> None:
    """One node, 32 cores, 2 GPUs; a GPU pod at 8 cores per GPU takes one GPU, so the free
    GPU needs 8 of the 24 cores left. A 12-core CPU-only pod fits in the other 16 under both
    settings; a second one would leave 12 and strand the GPU: ``arkgpu`` places it,
    ``arkgpu-reserve`` refuses it though it fits, and its GPU pod still finds room."""
    gpu_pod, cpu_pod = Pod("g", 8000, 1024, 1, 1000), Pod("c", 12000, 1024, 0, 0)
    rng = np.random.default_rng(0)
    for name, second_placed in (("arkgpu", True), ("arkgpu-reserve", False)):
        state = ClusterState.from_nodes([Node("n", 32000, 1 << 17, 2, "T4")])
        policy = POLICIES.create(name, PolicyContext(state, []))
        for pod in (gpu_pod, cpu_pod):
            where = policy.choose(state, pod, rng)
            assert where is not None, name
            state.place(pod, where)
        assert feasible_nodes(state, cpu_pod).any()
        where = policy.choose(state, cpu_pod, rng)
        assert (where is not None) == second_placed, name
        if where is not None:
            state.place(cpu_pod, where)
        assert (policy.choose(state, gpu_pod, rng) is not None) == (not second_placed), name


def test_reserve_holds_a_cpu_only_pod_back_only_until_its_longest_wait() -> None:
    """Offered again, the CPU-only pod the reserve turned away is still refused after
    299 s of waiting and placed after 300 s (``reserve_max_wait_s``), as a new
    arrival would not be."""
    gpu_pod, cpu_pod = Pod("g", 8000, 1024, 1, 1000), Pod("c", 12000, 1024, 0, 0)
    rng = np.random.default_rng(0)
    state = ClusterState.from_nodes([Node("n", 32000, 1 << 17, 2, "T4")])
    policy = ArkgpuPolicy(state, ArkgpuConfig(reserve_gpu_cpu=True))
    for pod in (gpu_pod, cpu_pod):
        where = policy.choose(state, pod, rng)
        assert where is not None
        state.place(pod, where)
    assert policy.choose(state, cpu_pod, rng) is None
    assert policy.choose_again(state, cpu_pod, rng, 299.0) is None
    assert policy.choose_again(state, cpu_pod, rng, 300.0) is not None


def test_learner_counts_arrivals_and_covers_popular_shapes() -> None:
    """Learned frequencies are arrival counts over the covered shapes, most frequent first."""
    learner = ShapeLearner()
    for pod in (
        [Pod("a", 1000, 1, 1, 500)] * 6 + [Pod("b", 2000, 1, 2, 1000)] * 3 + [Pod("c", 1, 1, 0, 0)]
    ):
        learner.observe(pod)
    typical = learner.typical(0.9)
    assert list(typical.milli) == [500, 1000]
    assert np.allclose(typical.freq, [6 / 9, 3 / 9])
    assert learner.gpu_pods == 9
    assert learner.gpu_milli == 6 * 500 + 3 * 2000


def test_stranding_counts_gpus_the_cpu_left_cannot_serve() -> None:
    """At 4 cores per GPU seen, a node with 2 free GPUs and 4 cores left strands one GPU."""
    learner = ShapeLearner()
    learner.observe(Pod("a", 4000, 1000, 1, 1000))
    stranded = learner.stranded(
        np.array([2000, 2000]), np.array([4000, 8000]), np.array([10**6, 10**6])
    )
    assert list(stranded) == [1000.0, 0.0]


@settings(max_examples=40, deadline=None)
@given(
    items=st.lists(
        st.tuples(st.integers(1, 1000), st.floats(0, 1000, allow_nan=False)), min_size=1, max_size=6
    )
)
def test_pattern_loss_is_never_negative(items: list[tuple[int, float]]) -> None:
    """V is non-decreasing and V[r] >= y_i + V[r - s_i]: putting a share never gains value."""
    value = _remainder_values(items)
    assert (np.diff(value) >= -1e-9).all()
    for size, price in items:
        r = np.arange(size, 1001)
        assert (value[r] - price - value[r - size] >= -1e-6).all()


@settings(max_examples=60, deadline=None)
@given(
    items=st.lists(
        st.tuples(st.integers(1, 1000), st.floats(0, 1000, allow_nan=False)), min_size=0, max_size=6
    )
)
def test_remainder_values_match_the_textbook_recurrence(items: list[tuple[int, float]]) -> None:
    """The blockwise tables equal V[r] = max(V[r-1], max_i V[r-s_i] + y_i), r = 1..1000."""
    expected = np.zeros(1001)
    for r in range(1, 1001):
        fits = [expected[r - s] + y for s, y in items if s <= r]
        expected[r] = max([expected[r - 1], *fits])
    assert np.allclose(_remainder_values(items), expected)


def test_prices_steer_a_share_to_complete_a_pattern() -> None:
    """With 470s and 530s learned, a 530 goes to the GPU where a 470 left 530, not a fresh one.

    FGD's one-step measure alone would see both as fits; the pattern loss of a
    fresh GPU is positive (a 470 can no longer pair with this 530's partner).
    """
    nodes = [Node("a", 64000, 1 << 18, 2, "G2"), Node("b", 64000, 1 << 18, 2, "G2")]
    state = ClusterState.from_nodes(nodes)
    policy = ArkgpuPolicy(state)
    history = [Pod("x", 1000, 1024, 1, 470), Pod("y", 1000, 1024, 1, 530)] * 40
    policy.prime(state, history)
    state.place(history[0], policy.choose(state, history[0], np.random.default_rng(0)))  # type: ignore[arg-type]
    used = int(np.flatnonzero(state.gpu_left.ravel() == 530)[0])
    where = policy.choose(state, Pod("z", 1000, 1024, 1, 530), np.random.default_rng(0))
    assert where is not None
    assert where.node * 2 + where.gpus[0] == used


def test_prime_counts_whole_workload() -> None:
    """Priming learns every shape given before the first arrival."""
    state = ClusterState.from_nodes(NODES)
    policy = ArkgpuPolicy(state)
    policy.prime(
        state, [Pod("a", 1000, 1, 1, 300), Pod("a", 1000, 1, 1, 300), Pod("b", 1, 1, 0, 0)]
    )
    assert policy.learner.shapes == Counter(
        {(1000, 300, 1, frozenset()): 2, (1, 0, 0, frozenset()): 1}
    )
    assert (300, frozenset()) in policy.values.price


def test_prices_pool_gpu_specs_of_one_size_but_tables_follow_specs() -> None:
    """A size costs the same whatever its gpu_spec; a model only counts sizes its specs admit."""
    nodes = [Node("t", 64000, 1 << 18, 4, "T4"), Node("p", 64000, 1 << 18, 4, "P100")]
    state = ClusterState.from_nodes(nodes)
    policy = ArkgpuPolicy(state)
    t4 = frozenset({"T4"})
    history = [Pod("a", 1000, 1, 1, 500), Pod("b", 1000, 1, 1, 500, t4)] * 5
    history += [Pod("c", 1000, 1, 1, 300, t4)] * 9
    policy.prime(state, history)
    price = policy.values.price
    assert price[(500, frozenset())] == price[(500, t4)]
    p100, t4_row = (policy.values.models.index(m) for m in ("P100", "T4"))
    assert policy.values.table[t4_row, 300] == pytest.approx(price[(300, t4)])
    assert policy.values.table[p100, 300] == 0.0  # no 300 may run on a P100


def test_fgd_gpuspec33_pods_land_only_on_models_they_name(tmp_path: Path) -> None:
    """FGD's own gpu_spec strings (multi-model, repeated models, A10) on the 1,523 openb nodes.

    A pod is refused only when no node could take it.
    """
    path = tmp_path / "openb_pod_list_gpuspec33.csv"
    write_rows(rebuild("gpuspec33", read_default()), path)
    pods = load_pods(path)
    state = ClusterState.from_nodes(load_nodes(all_node_list()))
    policy = ArkgpuPolicy(state)
    rng = np.random.default_rng(1)
    placed = Counter[bool | None]()
    for i in rng.permutation(len(pods))[:2500]:
        p = pods[i]
        where = policy.choose(state, p, rng)
        if where is None:  # G3-only pods run out of G3 GPUs early in this file
            assert not feasible_nodes(state, p).any(), p
            placed[None] += 1
            continue
        if p.gpu_spec:
            assert state.model_names[state.model_index[where.node]] in p.gpu_spec
        state.place(p, where)
        placed[bool(p.gpu_spec)] += 1
    assert placed[True] > 500
    assert placed[None] < placed[False] / 10
    assert (state.gpu_left >= 0).all()


def test_share_prices_are_bagged_by_default() -> None:
    """600s and 400s in equal numbers tie two dual vertices; the policy prices between them.

    With the plain duals a 600 costs either 1/2 or all of a GPU (a vertex);
    with the default bootstrap mean it costs strictly between, and a 600 and a
    400 still make exactly one GPU.
    """
    pods = [Pod("a", 1000, 1024, 1, 600)] * 100 + [Pod("b", 1000, 1024, 1, 400)] * 100

    def price(config: ArkgpuConfig) -> tuple[float, float]:
        state = ClusterState.from_nodes(NODES)
        policy = ArkgpuPolicy(state, config)
        policy.prime(state, pods)
        return policy.values.price[(600, frozenset())], policy.values.price[(400, frozenset())]

    plain, bagged = price(ArkgpuConfig(price_resamples=0)), price(ArkgpuConfig())
    assert min(abs(plain[0] - 500), abs(plain[0] - 1000)) < 1e-6
    assert 500 < bagged[0] < 1000
    assert bagged[0] + bagged[1] == pytest.approx(1000)
