"""The node's decision code: split in basis points, lending, limits, observations."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arkgpu.colocation.deciding import ContainerDecision, ControlConfig, NodeController, lending_bp
from arkgpu.colocation.limiting import MIB, limits_for
from arkgpu.colocation.observations import (
    BeObservation,
    GpuObservations,
    LcObservation,
    observe_lc,
    peak_demand,
    peak_observation,
)
from arkgpu.colocation.sizing import LcDemand, ShareSizer
from arkgpu.colocation.splitting import apportion, equal_parts, split_gpu
from arkgpu.limiter.layout import MAX_LENDERS
from arkgpu.model.shares import SHARE_FULL_BP, share_bp, share_fraction
from arkgpu.predictor import Workload
from arkgpu.sim.colocation.scenarios import LcSpec
from colocation.colocation_helpers import FakePredictor

FRACTIONS = st.lists(st.floats(0.0, 1.0), max_size=10)


class Independent(FakePredictor):
    """The fake predictor without interference: what the split asks for is the plan alone."""

    def colocated_latency_ms(
        self, target: Workload, corunners: Sequence[Workload], gpu: str = "V100"
    ) -> float:
        """Level 2 = level 1."""
        del corunners
        return self.latency_ms(target.model, target.batch, target.share, gpu)


@given(st.floats(0.0, 1.0), st.integers(0, SHARE_FULL_BP))
def test_fraction_and_basis_points_convert_within_half_a_point(fraction: float, bp: int) -> None:
    """The one conversion: a fraction lands within half a basis point; bp survive a round trip."""
    assert abs(share_fraction(share_bp(fraction)) - fraction) <= 0.5 / SHARE_FULL_BP + 1e-12
    assert share_bp(share_fraction(bp)) == bp


@given(FRACTIONS, st.integers(0, 6), st.integers(0, 500))
def test_split_never_hands_out_more_than_the_gpu(
    fractions: list[float], n_be: int, floor: int
) -> None:
    """LC and BE shares of a GPU add up to at most 10000 bp, exactly 10000 when a BE job takes
    the rest; BE parts differ by at most one point; each LC keeps the floor where it fits."""
    lc = {f"lc{i}": f for i, f in enumerate(fractions)}
    split = split_gpu(lc, [f"be{j}" for j in range(n_be)], floor)
    total = sum(split.lc_bp.values()) + sum(split.be_bp.values())
    assert total <= SHARE_FULL_BP
    if n_be:
        assert total == SHARE_FULL_BP
        assert max(split.be_bp.values()) - min(split.be_bp.values()) <= 1
    if lc:
        assert min(split.lc_bp.values()) >= min(floor, SHARE_FULL_BP // len(lc))


@given(FRACTIONS, st.integers(0, 4), st.integers(0, SHARE_FULL_BP))
def test_split_hands_out_at_most_the_capacity_left_by_capped_pods(
    fractions: list[float], n_be: int, capacity: int
) -> None:
    """With part of the GPU held by pods the loop does not adjust (HAMi's caps), the split
    never hands out more than the rest; BE jobs take all of it that LC leaves."""
    lc = {f"lc{i}": f for i, f in enumerate(fractions)}
    split = split_gpu(lc, [f"be{j}" for j in range(n_be)], 100, capacity)
    total = sum(split.lc_bp.values()) + sum(split.be_bp.values())
    assert total <= capacity
    if n_be:
        assert total == capacity


def test_a_capped_pods_share_is_left_out_of_the_split() -> None:
    """BE jobs asking nothing in particular split what two capped pods (30 + 20) leave."""
    split = split_gpu({}, ["a", "b"], 100, SHARE_FULL_BP - 5000)
    assert split.be_bp == {"a": 2500, "b": 2500}
    squeezed = split_gpu({"lc": 0.9}, ["t"], 100, 4000)
    assert squeezed.lc_bp == {"lc": 4000}
    assert squeezed.be_bp == {"t": 0}


@given(FRACTIONS)
def test_split_gives_each_lc_what_it_asked_for_when_it_fits(fractions: list[float]) -> None:
    """Without overload each LC gets its share rounded to basis points (floor 100 bp)."""
    lc = {f"lc{i}": f for i, f in enumerate(fractions)}
    asked = {k: max(share_bp(f), 100) for k, f in lc.items()}
    split = split_gpu(lc, ["be"])
    if sum(asked.values()) <= SHARE_FULL_BP:
        assert split.lc_bp == asked
        assert split.be_bp["be"] == SHARE_FULL_BP - sum(asked.values())
    else:
        assert split.be_bp["be"] == 0


def test_overload_scales_lc_shares_in_proportion() -> None:
    """Two services that want 0.8 and 0.4 get 2/3 and 1/3 of the whole GPU (the point left
    by rounding down goes to the larger remainder); a tiny third keeps the 100 bp floor."""
    split = split_gpu({"a": 0.8, "b": 0.4}, ["t"])
    assert split.lc_bp == {"a": 6667, "b": 3333}
    assert split.be_bp == {"t": 0}
    tiny = split_gpu({"a": 1.0, "b": 1.0, "c": 0.01}, [])
    assert tiny.lc_bp == {"a": 4950, "b": 4950, "c": 100}
    assert apportion({"x": 1, "y": 2}, 10) == {"x": 3, "y": 7}
    assert apportion({"x": 0, "y": 0}, 3) == {"x": 2, "y": 1}
    assert equal_parts(10, 3) == [4, 3, 3]
    assert equal_parts(5, 0) == []


@given(
    st.dictionaries(st.text(min_size=1, max_size=4), st.integers(0, SHARE_FULL_BP), max_size=12),
    st.integers(0, 6),
)
def test_lending_never_exceeds_the_lenders_share(lenders: dict[str, int], n_be: int) -> None:
    """Each BE job borrows from at most 8 LC services; what one lender lends to all BE jobs
    adds up to its share exactly (never more), each part at most the share."""
    loans = lending_bp(lenders, [f"be{j}" for j in range(n_be)])
    for names, parts in loans.values():
        assert len(names) == len(parts) <= MAX_LENDERS
        assert all(parts[i] <= lenders[k] for i, k in enumerate(names))
    if n_be:
        chosen = next(iter(loans.values()))[0]
        for i, k in enumerate(chosen):
            assert sum(parts[i] for _, parts in loans.values()) == lenders[k]
        if len(lenders) > MAX_LENDERS:
            left_out = set(lenders) - set(chosen)
            assert max(lenders[k] for k in left_out) <= min(lenders[k] for k in chosen)


def _lc(name: str, rate: float, p99: float = math.nan, mem: int | None = 2048) -> LcObservation:
    demand = LcDemand("m", target_ms=20.0, rate_rps=rate, max_batch=16, max_queue_delay_ms=2.0)
    return LcObservation(name, demand, p99, 0, mem)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(10.0, 900.0), min_size=1, max_size=3), st.integers(0, 3))
def test_lc_shares_cover_the_predictors_ask_when_feasible(rates: list[float], n_be: int) -> None:
    """A fresh controller gives each LC at least the share the predictor asks for at its rate
    whenever the asks fit on the GPU together; the decision never exceeds the GPU."""
    sizer = ShareSizer(Independent())
    lcs = tuple(_lc(f"lc{i}", r) for i, r in enumerate(rates))
    bes = tuple(BeObservation(f"be{j}", "m", 32, 4096) for j in range(n_be))
    decision = NodeController(sizer).tick(GpuObservations(0, lcs, bes))
    asks = [sizer.required_share(o.demand) for o in lcs]
    assert sum(c.share_bp for c in decision.containers()) <= SHARE_FULL_BP
    if all(a is not None for a in asks) and sum(share_bp(a) for a in asks if a) <= SHARE_FULL_BP:
        for entry, ask in zip(decision.lcs, asks, strict=True):
            assert ask is not None
            assert entry.share_bp >= share_bp(ask)


def test_controller_decides_shares_memory_and_loans(fake_sizer: ShareSizer) -> None:
    """Per container: share, memory cap and (BE only) the loan of each LC service's share,
    cut in equal parts between the BE jobs; arkgpu-static's setting lends nothing."""
    obs = GpuObservations(
        3,
        (_lc("a", 100.0), _lc("b", 50.0)),
        (BeObservation("t", "m", 32, 8192), BeObservation("u", "m", 32)),
    )
    decision = NodeController(fake_sizer).tick(obs)
    assert decision.gpu == 3
    a, b = decision.lcs
    t, u = decision.bes
    assert (a.memory_mib, t.memory_mib, u.memory_mib) == (2048, 8192, None)
    assert t.lenders == u.lenders == ("a", "b")
    assert [x + y for x, y in zip(t.lent_bp, u.lent_bp, strict=True)] == [a.share_bp, b.share_bp]
    assert t.share_bp + u.share_bp == SHARE_FULL_BP - a.share_bp - b.share_bp
    assert a.lent_bp == ()
    assert decision.entry("b") == b
    assert decision.entry("zz") is None
    static = NodeController(fake_sizer, ControlConfig(lend_idle_share=False)).tick(obs)
    assert all(c.lenders == () and c.lent_bp == () for c in static.bes)


def test_limits_for_carries_basis_points_and_turns_mib_into_bytes() -> None:
    """The limiter's limits: share and loans in basis points as decided, memory in bytes."""
    limits = limits_for(ContainerDecision("t", 2500, 8192, ("a", "b"), (3000, 1200)))
    assert limits.share_bp == 2500
    assert limits.memory_bytes == (8192 * MIB,)
    assert limits.lent_bp == (3000, 1200)
    uncapped = limits_for(ContainerDecision("a", 7500))
    assert uncapped.memory_bytes == (None,)
    assert uncapped.lent_bp == ()


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(1.0, 2000.0), max_size=10), st.integers(0, 4))
def test_every_decision_is_a_valid_limits(rates: list[float], n_be: int) -> None:
    """Whatever the load, every entry of a decision converts to limits the region accepts."""
    lcs = tuple(_lc(f"lc{i}", r, p99=25.0) for i, r in enumerate(rates))
    bes = tuple(BeObservation(f"be{j}", "m", 32, 1024) for j in range(n_be))
    decision = NodeController(ShareSizer(FakePredictor())).tick(GpuObservations(0, lcs, bes))
    for entry in decision.containers():
        assert limits_for(entry).share_bp == entry.share_bp


def test_observations_from_a_measured_period() -> None:
    """Rate = arrivals / period; p99 over the chunks in ms; NaN when nothing completed;
    a fresh service is decided at its peak rate."""
    spec = LcSpec("s", "resnet50", 25.0, 400.0, mem_mib=2560)
    chunks = [np.array([0.001, 0.002]), np.linspace(0.0, 0.010, 101)]
    obs = observe_lc("s", spec, arrived=300, period_s=2.0, latencies_s=chunks, queued=4)
    assert obs.demand.rate_rps == 150.0
    assert obs.p99_ms == pytest.approx(np.percentile(np.concatenate(chunks), 99) * 1000)
    assert obs.queued == 4
    idle = observe_lc("s", spec, arrived=0, period_s=1.0, latencies_s=[], queued=0)
    assert math.isnan(idle.p99_ms)
    assert peak_demand(spec).rate_rps == 400.0
    fresh = peak_observation("s", spec, 2560)
    assert (fresh.demand, fresh.memory_mib, math.isnan(fresh.p99_ms)) == (
        peak_demand(spec),
        2560,
        True,
    )
