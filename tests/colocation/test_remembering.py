"""What the control loop remembers between periods, and its faster p99, change no decision.

The sizer remembers its slowdowns and plans (pure functions of their
arguments), and an adjustment unit whose last step left its state unchanged
answers equal inputs with the same split without sizing again. Both exist for
the node runtime's tick cost; the decisions must be the ones computed afresh.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from arkgpu.colocation.adjusting import AdjustmentUnit
from arkgpu.colocation.observations import BeObservation, LcObservation, p99_ms
from arkgpu.colocation.sizing import LcDemand, ShareSizer
from arkgpu.predictor import Workload
from colocation.colocation_helpers import FakePredictor

DEMAND = LcDemand("resnet50", 50.0, 100.0, 8, 2.0)
BES = (BeObservation("be", "vgg16", 32),)
NAN = float("nan")
#: (rate, p99) choices: few, so that sequences repeat inputs and settle.
PERIODS = st.lists(
    st.tuples(st.sampled_from([0.0, 60.0, 150.0]), st.sampled_from([NAN, 10.0, 30.0, 49.0])),
    min_size=1,
    max_size=25,
)


def _lcs(rate: float, p99: float) -> tuple[LcObservation, ...]:
    return (
        LcObservation("lc", DEMAND.at_rate(rate), p99),
        LcObservation("lc2", DEMAND.at_rate(rate / 3), p99 / 2),
    )


@settings(max_examples=40, deadline=None)
@given(PERIODS)
def test_remembered_decisions_are_the_fresh_ones(periods: list[tuple[float, float]]) -> None:
    """Period after period, a unit with its memories and one that forgets everything
    before each step decide the same split and hold the same state."""
    predictor = FakePredictor()
    fast = AdjustmentUnit(ShareSizer(predictor))
    fresh_sizer = ShareSizer(predictor)
    fresh = AdjustmentUnit(fresh_sizer)
    for rate, p99 in periods:
        fresh._settled = None
        fresh_sizer._slowdowns.clear()
        fresh_sizer._plans.clear()
        lcs = _lcs(rate, p99)
        assert fast.step(lcs, BES) == fresh.step(lcs, BES)
        assert (fast.rates, fast.boosts, fast.batches) == (
            fresh.rates,
            fresh.boosts,
            fresh.batches,
        )


class Counting(FakePredictor):
    """The fake predictor, counting level-2 questions."""

    def __init__(self) -> None:
        """No question yet."""
        self.asked = 0

    def colocated_latency_ms(
        self, target: Workload, corunners: Sequence[Workload], gpu: str = "V100"
    ) -> float:
        """Level 2, counted."""
        self.asked += 1
        return super().colocated_latency_ms(target, corunners, gpu)


def test_a_settled_gpu_is_not_sized_again_until_an_input_moves() -> None:
    """The same quiet period over and over: once the boost has drained the unit stops
    asking the predictor; a latency over target sizes again and raises the share."""
    predictor = Counting()
    unit = AdjustmentUnit(ShareSizer(predictor, memo_size=1))
    quiet = _lcs(100.0, NAN)
    splits = [unit.step(quiet, BES) for _ in range(40)]
    asked = predictor.asked
    assert unit.step(quiet, BES) == splits[-1]
    assert predictor.asked == asked
    hot = _lcs(100.0, 49.0)
    raised = unit.step(hot, BES)
    assert predictor.asked > asked
    assert raised.lc_bp["lc"] > splits[-1].lc_bp["lc"]


FLOATS = st.one_of(st.floats(0.0, 10.0), st.floats(-1e9, 1e9), st.sampled_from([0.02, 0.05]))


@settings(max_examples=300, deadline=None)
@given(st.lists(FLOATS, min_size=1, max_size=3000), st.integers(1, 4))
def test_p99_is_numpys_bit_for_bit(values: list[float], chunks: int) -> None:
    """observe_lc's p99 (a faster path for float64) equals numpy's linear percentile
    exactly, for any count, ties and chunking; float32 and NaN go to numpy itself."""
    array = np.asarray(values, dtype=np.float64)
    parts = np.array_split(array, chunks)
    expected = float(np.percentile(array, 99)) * 1000.0
    assert p99_ms(parts) == expected
    small = array.astype(np.float32)
    assert p99_ms([small]) == float(np.percentile(small, 99)) * 1000.0
    assert math.isnan(p99_ms([np.append(array, np.nan)]))
