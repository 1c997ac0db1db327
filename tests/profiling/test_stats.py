"""Latency statistics of one point."""

from __future__ import annotations

import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from arkgpu.profiling.stats import LatencyStats


def test_median_p99_std_of_known_samples() -> None:
    """1..200 ms: median 100.5, p99 the 198th value, the sample std, the mean."""
    values = [float(v) for v in range(1, 201)]
    s = LatencyStats.of(list(reversed(values)))
    assert s.median_ms == 100.5
    assert s.p99_ms == 198.0
    assert s.std_ms == pytest.approx(statistics.stdev(values))
    assert s.mean_ms == 100.5
    assert s.batches == 200
    assert s.throughput_per_s(8) == pytest.approx(8000.0 / 100.5)


def test_few_samples_take_the_largest_as_p99_and_one_sample_has_no_spread() -> None:
    """Nearest rank: with under 100 batches the p99 is the slowest one."""
    assert LatencyStats.of([3.0, 1.0, 2.0]).p99_ms == 3.0
    one = LatencyStats.of([5.0])
    assert (one.median_ms, one.p99_ms, one.std_ms) == (5.0, 5.0, 0.0)


@pytest.mark.parametrize("values", [[], [0.0], [1.0, -2.0], [float("nan")]])
def test_no_or_bad_latencies_are_refused(values: list[float]) -> None:
    """Nothing measured, or a latency that is not a positive number."""
    with pytest.raises(ValueError, match="latenc"):
        LatencyStats.of(values)


@given(st.lists(st.floats(0.001, 1e4), min_size=1, max_size=300))
def test_order_holds_and_the_dict_round_trips(values: list[float]) -> None:
    """min <= median <= p99 <= max, and to_dict/from_dict give the same stats."""
    s = LatencyStats.of(values)
    assert min(values) <= s.median_ms <= s.p99_ms <= max(values)
    assert LatencyStats.from_dict(s.to_dict()) == s
