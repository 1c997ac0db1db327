"""Bagged cutting-stock duals: valid prices, reproducible, and steady where the LP is tied."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from arkgpu.model.resources import MILLI_PER_GPU
from arkgpu.placement.bounds import cutting_stock, cutting_stock_prices
from arkgpu.placement.share_prices import bagged_prices


def most_one_gpu_earns(sizes: list[int], y: np.ndarray) -> float:
    """The largest sum of prices of shares that fit on one GPU (brute force)."""
    best = 0.0
    ranges = [range(MILLI_PER_GPU // s + 1) for s in sizes]
    for counts in itertools.product(*ranges):
        if sum(c * s for c, s in zip(counts, sizes, strict=True)) <= MILLI_PER_GPU:
            best = max(best, float(np.dot(counts, y)))
    return best


def test_without_resamples_the_prices_are_the_plain_duals() -> None:
    sizes, counts = [810, 470, 320, 230], [40.0, 25.0, 30.0, 12.0]
    assert bagged_prices(sizes, counts, 0) == pytest.approx(cutting_stock_prices(sizes, counts))


def test_a_clear_optimum_is_kept() -> None:
    """One size alone: every replicate has the same duals, 1 / (copies per GPU)."""
    assert bagged_prices([250], [400.0], 16)[0] == pytest.approx(0.25)


def test_tied_vertices_are_averaged_into_a_valid_price() -> None:
    """600 and 400 in equal numbers: (1, 0) and (1/2, 1/2) are both optimal duals.

    A replicate with more 600s than 400s gives the first, one with fewer the
    second; the mean lies strictly between, still fills a 600+400 GPU exactly,
    and no GPU's worth of shares is priced above one GPU.
    """
    sizes = [600, 400]
    y = bagged_prices(sizes, [100.0, 100.0], 16)
    assert 0.5 < y[0] < 1.0
    assert y[0] + y[1] == pytest.approx(1.0)
    assert most_one_gpu_earns(sizes, y) <= 1.0 + 1e-9


def test_bagged_prices_never_price_a_gpu_above_one() -> None:
    sizes, counts = [810, 650, 470, 320, 230, 110], [50.0, 20.0, 35.0, 30.0, 9.0, 4.0]
    y = bagged_prices(sizes, counts, 8)
    assert most_one_gpu_earns(sizes, y) <= 1.0 + 1e-9
    assert (y >= -1e-12).all()


def test_bagged_prices_depend_on_the_counts_alone() -> None:
    sizes, counts = [650, 470, 320], [30.0, 31.0, 29.0]
    assert bagged_prices(sizes, counts, 8) == pytest.approx(bagged_prices(sizes, counts, 8))


def test_warm_start_gives_the_same_optimum() -> None:
    """Starting from another solve's patterns changes the work, not the LP optimum."""
    sizes = [810, 650, 470, 320, 230]
    _, patterns = cutting_stock(sizes, [50.0, 20.0, 35.0, 30.0, 9.0])
    counts = [45.0, 22.0, 30.0, 33.0, 12.0]
    cold, _ = cutting_stock(sizes, counts)
    warm, _ = cutting_stock(sizes, counts, patterns)
    assert float(np.dot(warm, counts)) == pytest.approx(float(np.dot(cold, counts)))
