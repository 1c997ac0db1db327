"""Level-2 split, level-1 placement and the adjustment unit (pure policies, fake predictor)."""

import math

import pytest

from arkgpu.colocation.adjusting import AdjustmentUnit
from arkgpu.colocation.observations import BeObservation, LcObservation
from arkgpu.colocation.sizing import BiasedPredictor, LcDemand, ShareSizer
from arkgpu.placement.lc_placing import GpuSnapshot, choose_gpu_for_be, choose_gpu_for_lc

DEMAND = LcDemand("m", target_ms=20.0, rate_rps=200.0, max_batch=16, max_queue_delay_ms=2.0)


def test_required_share_is_hand_checkable(fake_sizer: ShareSizer) -> None:
    """latency = 1 + b/s ms; at 200 req/s with margin 1.2 and b=1, throughput needs
    1000 s / (s + 1) >= 240, i.e. s >= 0.316; latency 2 + 2(1 + 1/s) <= 16 needs s >= 1/6."""
    share = fake_sizer.required_share(DEMAND)
    assert share == pytest.approx(0.32)
    plan = fake_sizer.plan(DEMAND)
    assert plan is not None
    assert plan[1] == 1


def test_required_share_grows_with_rate_and_slowdown(fake_sizer: ShareSizer) -> None:
    """More load or more interference never needs less share; impossible load gives None."""
    shares = [fake_sizer.required_share(DEMAND.at_rate(r)) for r in (50, 100, 200, 400, 600)]
    assert all(s is not None for s in shares)
    assert shares == sorted(shares)  # type: ignore[type-var]
    base = fake_sizer.required_share(DEMAND)
    slowed = fake_sizer.required_share(DEMAND, slowdown=1.3)
    assert base is not None
    assert slowed is not None
    assert slowed > base
    assert fake_sizer.required_share(DEMAND.at_rate(1e6)) is None


def test_pessimistic_predictor_sizes_larger(fake_sizer: ShareSizer) -> None:
    """A predictor biased 10% slow asks for more share than the unbiased one."""
    biased = ShareSizer(BiasedPredictor(fake_sizer.predictor, 1.1))
    a, b = fake_sizer.required_share(DEMAND), biased.required_share(DEMAND)
    assert a is not None
    assert b is not None
    assert b > a


def test_placement_refuses_a_gpu_that_cannot_meet_every_target(fake_sizer: ShareSizer) -> None:
    """A GPU whose LC services would need more than the whole GPU at peak is not chosen;
    among the GPUs that fit, the one with the most spare share wins; memory must fit."""
    heavy = DEMAND.at_rate(400.0)
    full = GpuSnapshot(0, 10_000, (heavy, heavy))
    light = GpuSnapshot(1, 10_000, (DEMAND.at_rate(50.0),))
    empty: GpuSnapshot[LcDemand] = GpuSnapshot(2, 10_000)
    assert choose_gpu_for_lc(heavy, 1000, [full, light, empty], fake_sizer) == 2
    assert choose_gpu_for_lc(heavy, 1000, [full, light], fake_sizer) == 1
    assert choose_gpu_for_lc(heavy, 1000, [full], fake_sizer) is None
    assert choose_gpu_for_lc(DEMAND, 20_000, [light, empty], fake_sizer) is None
    assert choose_gpu_for_be(1000, [full, light, empty], fake_sizer) == 2


def _obs(rate: float, p99: float, queued: int = 0) -> LcObservation:
    return LcObservation("lc", DEMAND.at_rate(rate), p99, queued)


def test_adjustment_unit_raises_under_a_load_step_and_gives_back_after(
    fake_sizer: ShareSizer,
) -> None:
    """A load step raises the LC share at once; when load falls the share drains back to
    the low-load level within a few periods, and BE gets the rest every period (shares in
    basis points)."""
    unit = AdjustmentUnit(fake_sizer)
    bes = [BeObservation("be", "m", 32)]
    low = [unit.step([_obs(100.0, 5.0)], bes).lc_bp["lc"] for _ in range(5)][-1]
    step = unit.step([_obs(400.0, 5.0)], bes)
    assert step.lc_bp["lc"] > low * 1.5
    assert step.be_bp["be"] == 10_000 - step.lc_bp["lc"]
    shares = [unit.step([_obs(100.0, 5.0)], bes).lc_bp["lc"] for _ in range(30)]
    assert shares[0] > shares[-1]
    assert abs(shares[-1] - low) <= 110


def test_adjustment_unit_boosts_on_measured_tail_latency(fake_sizer: ShareSizer) -> None:
    """p99 above the violation ratio adds raise_step (0.1 = 1000 bp) per period; a low p99
    drains release_step (0.02 = 200 bp) per period; a queue over a full batch raises again."""
    unit = AdjustmentUnit(fake_sizer)
    base = unit.step([_obs(200.0, math.nan)], []).lc_bp["lc"]
    hot = [unit.step([_obs(200.0, 19.0)], []).lc_bp["lc"] for _ in range(3)]
    assert hot == [base + 1000, base + 2000, base + 3000]
    cool = unit.step([_obs(200.0, 5.0)], []).lc_bp["lc"]
    assert cool == base + 2800
    queued = unit.step([_obs(200.0, 5.0, queued=100)], []).lc_bp["lc"]
    assert queued > cool


def test_overloaded_gpu_gives_lc_everything_and_be_nothing(fake_sizer: ShareSizer) -> None:
    """When LC needs exceed the GPU their shares are scaled to the whole GPU and BE gets 0."""
    unit = AdjustmentUnit(fake_sizer)
    obs = [LcObservation(n, DEMAND.at_rate(700.0), 30.0) for n in ("a", "b")]
    split = unit.step(obs, [BeObservation("be", "m", 32)])
    assert sum(split.lc_bp.values()) == 10_000
    assert split.be_bp["be"] == 0
