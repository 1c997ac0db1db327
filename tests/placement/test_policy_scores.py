"""Each policy's node scores and GPU choice on small cases computed by hand."""

from __future__ import annotations

import numpy as np
import pytest

from arkgpu.model.cluster import Assignment
from arkgpu.placement import POLICIES, PolicyContext
from arkgpu.placement.dotprod import option_scores
from arkgpu.placement.fgd import FgdPolicy
from arkgpu.placement.fragmentation import FragTables, TypicalPods, fragmentation
from arkgpu.placement.heuristics import BestFitPolicy, ClusteringPolicy, PackingPolicy
from placement.placement_helpers import make_state, pod

RNG = np.random.default_rng(0)


def test_bestfit_scores_tightest_node_highest() -> None:
    """n0: 100(1 - .5*60000/128000 - .5*1500/8000) = 67; n1: 17; normalised: 100, 0."""
    state = make_state((64000, 1 << 20, 2, "P100"), (96000, 1 << 20, 8, "G2"))
    p = pod(cpu=4000, milli=500)
    scores = BestFitPolicy().scores(state, np.array([0, 1]), p)
    assert scores.tolist() == [100, 0]
    assert BestFitPolicy().choose(state, p, RNG) == Assignment(0, (0,))


def test_packing_three_cases() -> None:
    """Idle 2-GPU node: 31; share fits a GPU with 400 left: 96; a used node's free GPU: 49."""
    state = make_state(
        (64000, 1 << 20, 2, "P100"), (64000, 1 << 20, 2, "P100"), (64000, 1 << 20, 4, "T4")
    )
    state.place(pod(milli=600), Assignment(1, (0,)))
    state.place(pod(milli=1000), Assignment(2, (0,)))
    scores = PackingPolicy().scores(state, np.array([0, 1, 2]), pod(milli=300))
    assert scores.tolist() == [31, 96, 49]
    whole = PackingPolicy().scores(state, np.array([0, 2]), pod(gpus=2, milli=1000))
    assert whole.tolist() == [31, 48]


def test_packing_best_fit_gpu_inside_node() -> None:
    """Inside the node the share goes to the GPU with the least room that fits."""
    state = make_state((64000, 1 << 20, 4, "T4"))
    state.place(pod(milli=300), Assignment(0, (1,)))
    state.place(pod(milli=600), Assignment(0, (2,)))
    assert PackingPolicy().choose(state, pod(milli=350), RNG) == Assignment(0, (2,))


def test_clustering_bands() -> None:
    """Only shares: 75 + 25*6500//8000 = 95; idle 8-GPU: 25; only 1-GPU pods: 25*1000//8000."""
    state = make_state(
        (64000, 1 << 20, 2, "P100"), (96000, 1 << 20, 8, "G2"), (96000, 1 << 20, 8, "G2")
    )
    state.place(pod(milli=500), Assignment(0, (0,)))
    state.place(pod(milli=1000), Assignment(2, (0,)))
    scores = ClusteringPolicy().scores(state, np.array([0, 1, 2]), pod(milli=200))
    assert scores.tolist() == [95, 25, 3]


def test_dotprod_prefers_partial_gpu_with_smaller_dot_product() -> None:
    """Partial GPU (500 left): 1 - (.5*.03125 + .0625*.0375)/2; free: 1 - (.015625+.125*.0375)/2."""
    state = make_state((64000, 1 << 20, 2, "P100"))
    state.place(pod(cpu=0, milli=500), Assignment(0, (0,)))
    p = pod(cpu=4000, milli=300)
    options = option_scores(state, np.array([0]), p)[0]
    assert options[0] == pytest.approx(1 - (0.015625 + 0.00234375) / 2)
    assert options[-1] == pytest.approx(1 - (0.015625 + 0.0046875) / 2)
    assert np.isneginf(options[1])
    assert POLICIES.create("dotprod", PolicyContext(state, [])).choose(state, p, RNG) == Assignment(
        0, (0,)
    )


def _two_shape_typical() -> TypicalPods:
    shapes = [pod(cpu=1000, milli=500), pod(cpu=1000, milli=1000)]
    return TypicalPods.from_pods(shapes * 5)


def test_fragmentation_by_hand() -> None:
    """GPUs [700, 1000]: half-GPU shapes fit (0 fragment), whole-GPU ones strand 700: 0.5*700."""
    state = make_state((10000, 1 << 20, 2, "P100"))
    state.place(pod(cpu=0, milli=300), Assignment(0, (0,)))
    typical = _two_shape_typical()
    tables = FragTables.compute(state.gpu_left, typical)
    frag = fragmentation(tables, state.cpu_left, typical.access(state), typical)
    assert frag.tolist() == pytest.approx([350.0])


def test_fgd_takes_gpu_that_strands_least() -> None:
    """GPU0 (700 -> 200): fragmentation 350 -> 200 (score 53); GPU1: up to 600 (43)."""
    state = make_state((10000, 1 << 20, 2, "P100"))
    state.place(pod(cpu=0, milli=300), Assignment(0, (0,)))
    policy = FgdPolicy(state, _two_shape_typical())
    assert policy.choose(state, pod(cpu=1000, milli=500), RNG) == Assignment(0, (0,))


def test_typical_pods_cover_threshold_and_renormalise() -> None:
    """Shapes of 60%, 30%, 10%: 95% needs all three; 85% the top two, renormalised 2/3, 1/3."""
    pods = [pod(milli=100)] * 6 + [pod(milli=200)] * 3 + [pod(milli=300)]
    assert TypicalPods.from_pods(pods).milli.tolist() == [100, 200, 300]
    top = TypicalPods.from_pods(pods, threshold=0.85)
    assert top.milli.tolist() == [100, 200]
    assert top.freq.tolist() == pytest.approx([2 / 3, 1 / 3])


def test_hami_binpack_and_spread_disagree() -> None:
    """Binpack picks the fuller node and GPU; spread the emptier ones."""
    state = make_state((64000, 1 << 20, 2, "P100"), (64000, 1 << 20, 2, "P100"))
    state.place(pod(milli=600), Assignment(0, (1,)))
    p = pod(milli=300)
    ctx = PolicyContext(state, [])
    assert POLICIES.create("hami-binpack", ctx).choose(state, p, RNG) == Assignment(0, (1,))
    assert POLICIES.create("hami-spread", ctx).choose(state, p, RNG) == Assignment(1, (0,))


def test_random_uses_only_feasible_nodes_and_all_of_them() -> None:
    """Over many draws Random picks each feasible node and never the one without room."""
    state = make_state(
        (64000, 1 << 20, 2, "P100"), (1000, 1 << 20, 2, "P100"), (64000, 1 << 20, 2, "T4")
    )
    policy = POLICIES.create("random", PolicyContext(state, []))
    rng = np.random.default_rng(7)
    chosen = {policy.choose(state, pod(cpu=4000, milli=500), rng).node for _ in range(200)}  # type: ignore[union-attr]
    assert chosen == {0, 2}


def test_gpu_spec_restricts_every_policy() -> None:
    """A pod that may only use T4 lands on the T4 node under every policy, or fails."""
    state = make_state((64000, 1 << 20, 2, "P100"), (64000, 1 << 20, 2, "T4"))
    p = pod(milli=500, spec=frozenset({"T4"}))
    for name in POLICIES.names():
        where = POLICIES.create(name, PolicyContext(state, [p])).choose(state, p, RNG)
        assert where is not None
        assert where.node == 1, name


def test_no_room_means_no_assignment() -> None:
    """A pod of 4 whole GPUs fails on a 2-GPU cluster under every policy."""
    state = make_state((64000, 1 << 20, 2, "P100"))
    p = pod(gpus=4)
    for name in POLICIES.names():
        assert POLICIES.create(name, PolicyContext(state, [p])).choose(state, p, RNG) is None


def test_registry_rejects_duplicates_and_unknown_names() -> None:
    """Registering a taken name raises; asking for an unknown one lists the known ones."""
    with pytest.raises(ValueError, match="registered twice"):
        POLICIES.register("fgd")(lambda ctx: POLICIES.create("fgd", ctx))
    with pytest.raises(ValueError, match=r"known: .*random"):
        POLICIES.create("nosuch", PolicyContext(make_state((1, 1, 0, "")), []))
