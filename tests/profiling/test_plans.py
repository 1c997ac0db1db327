"""The plan: which points it holds, their names, and how long it is expected to take."""

from __future__ import annotations

import pytest

from arkgpu.profiling.plans import (
    FAKE_DEFAULT,
    TORCH_DEFAULT,
    Plan,
    Timing,
    all_pairs,
    default_plan,
    estimate_s,
    point_s,
)
from arkgpu.profiling.torch_backend import TorchBackend
from arkgpu.profiling.workers import FakeBackend


def test_solo_points_cover_every_model_batch_and_share_then_pairs_follow() -> None:
    """Solo points are the full grid, model by model; pair points come after them."""
    plan = Plan(("m1", "m2"), (1, 8), (0.5, 1.0), pairs=(("m1", "m2"),), pair_shares=((0.3, 0.7),))
    solo = plan.solo_points()
    assert len(solo) == 8
    assert [p.model for p in solo[:4]] == ["m1"] * 4
    assert {(p.batch, p.share) for p in solo} == {(1, 0.5), (1, 1.0), (8, 0.5), (8, 1.0)}
    pairs = plan.pair_points()
    assert len(pairs) == 1
    assert (pairs[0].a.share, pairs[0].b.share, pairs[0].a.batch) == (0.3, 0.7, 4)
    assert plan.points() == [*solo, *pairs]
    keys = [p.key for p in plan.points()]
    assert len(set(keys)) == len(keys)
    assert all("/" not in k and " " not in k for k in keys)


def test_keys_are_file_safe_for_paths_and_specs() -> None:
    """A TorchScript path or a fake spec still gives a plain file name."""
    plan = Plan(("net=/tmp/a b.pt", "x:10:2"), (1,), (1.0,))
    assert [p.key for p in plan.points()] == ["solo_net--tmp-a-b.pt_b1_s1", "solo_x-10-2_b1_s1"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"models": ()}, "models"),
        ({"shares": (0.0,)}, "shares"),
        ({"shares": (1.5,)}, "shares"),
        ({"batches": (0,)}, "batches"),
        ({"pairs": (("m1", "zz"),)}, "zz"),
        ({"pairs": (("m1", "m2"),), "pair_shares": ((0.6, 0.6),)}, "sum"),
        ({"models": ("a/b", "a-b")}, "file-safe"),
    ],
)
def test_a_bad_plan_is_refused_naming_what_is_wrong(
    kwargs: dict[str, object], message: str
) -> None:
    """Shares outside (0, 1], batch 0, unknown pair models, splits over a GPU are refused."""
    base: dict[str, object] = {"models": ("m1", "m2"), "batches": (1,), "shares": (1.0,)}
    with pytest.raises(ValueError, match=message):
        Plan(**{**base, **kwargs})  # type: ignore[arg-type]


def test_all_pairs_are_unordered_and_distinct() -> None:
    """Four models make six pairs, none with itself."""
    pairs = all_pairs(("a", "b", "c", "d"))
    assert len(pairs) == 6
    assert all(a != b for a, b in pairs)
    assert len({frozenset(p) for p in pairs}) == 6


def test_estimate_is_points_times_point_time_plus_worker_start_ups() -> None:
    """The documented formula, term by term."""
    timing = Timing(warmup_s=1.0, measure_s=2.0, overhead_s=0.5)
    plan = Plan(("a", "b"), (1, 2), (1.0,), pairs=(("a", "b"),), timing=timing)
    assert point_s(timing) == 3.5
    assert estimate_s(plan, startup_s=10.0) == pytest.approx(5 * 3.5 + 2 * 10.0)


def test_the_default_gpu_plan_has_four_models_and_fits_in_fifteen_minutes() -> None:
    """4 torchvision models, solo grid and all pairs, expected under 15 min (with 10% room)."""
    plan = default_plan("torch")
    assert plan is TORCH_DEFAULT
    assert len(plan.models) == 4
    assert len(plan.pair_points()) == 6 * len(plan.pair_shares)
    expected = estimate_s(plan, TorchBackend.startup_s)
    assert expected < 0.9 * 15 * 60
    assert len(plan.solo_points()) >= 48  # enough for level-1 curves of every model


def test_the_default_fake_plan_is_quick() -> None:
    """The fake driver's default plan takes under a minute."""
    plan = default_plan("fake")
    assert plan is FAKE_DEFAULT
    assert estimate_s(plan, FakeBackend.startup_s) < 60
