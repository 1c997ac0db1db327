"""How long predictions take: the cost figures of the issue, measured, never asserted."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np

from arkgpu.predictor.predicting import DEFAULT_GPU, Predictor
from arkgpu.predictor.workloads import Workload

CALLS_PER_SAMPLE = 1000
"""Scalar calls timed together per sample (one call is too short for the clock)."""


@dataclass(frozen=True)
class Timings:
    """Median wall-clock costs over the samples."""

    fit_s: float
    """Fitting the default predictor on the shipped profiles, s."""
    one_latency_us: float
    """One level-1 prediction (``latency_ms``), µs."""
    one_colocated_us: float
    """One level-2 prediction with one co-runner (``colocated_latency_ms``), the same
    workloads each call (as the placement and control loops ask), µs."""
    fresh_colocated_us: float
    """The same with workloads never asked about before (random batch and share), µs."""
    one_colocated_cpu_us: float
    """:attr:`one_colocated_us` in CPU time of this process (``time.process_time``): on a
    loaded machine wall time also counts the time spent waiting for a core, µs."""
    fresh_colocated_cpu_us: float
    """:attr:`fresh_colocated_us` in CPU time of this process, µs."""
    many_latency_ms: float
    """One vectorised ``latency_ms_many`` call over all queries, ms."""
    queries: int
    """Queries in the vectorised call."""
    samples: int
    """Samples each median is taken over."""

    def to_dict(self) -> dict[str, float | int]:
        """JSON-ready values."""
        return asdict(self)


def _median_s(
    action: Callable[[], object], samples: int, clock: Callable[[], float] = time.perf_counter
) -> float:
    costs = []
    for _ in range(samples):
        start = clock()
        action()
        costs.append(clock() - start)
    return statistics.median(costs)


def time_predictor(
    fit: Callable[[], Predictor], rng: np.random.Generator, queries: int, samples: int
) -> Timings:
    """Time ``fit`` and the prediction calls of what it returns on random V100 queries."""
    fit_s = _median_s(fit, 1)
    predictor = fit()
    models = rng.choice(predictor.models(DEFAULT_GPU), queries)
    batches = rng.integers(1, 65, queries)
    shares = rng.uniform(0.05, 1.0, queries)
    target, other = Workload("resnet50", 8, 0.5), [Workload("vgg19", 16, 0.5)]

    def scalar() -> None:
        for i in range(CALLS_PER_SAMPLE):
            predictor.latency_ms(str(models[i % queries]), int(batches[i % queries]), 0.5)

    def colocated() -> None:
        for _ in range(CALLS_PER_SAMPLE):
            predictor.colocated_latency_ms(target, other)

    fresh = [
        (
            Workload(str(models[i]), int(batches[i]), float(shares[i])),
            [Workload(str(models[-1 - i]), int(batches[-1 - i]), float(shares[-1 - i]))],
        )
        for i in range(min(queries, CALLS_PER_SAMPLE))
    ]

    def unseen() -> None:
        predictor.forget()
        for t, others in fresh:
            predictor.colocated_latency_ms(t, others)

    names = [str(m) for m in models]
    return Timings(
        fit_s=fit_s,
        one_latency_us=_median_s(scalar, samples) / CALLS_PER_SAMPLE * 1e6,
        one_colocated_us=_median_s(colocated, samples) / CALLS_PER_SAMPLE * 1e6,
        fresh_colocated_us=_median_s(unseen, samples) / len(fresh) * 1e6,
        one_colocated_cpu_us=_median_s(colocated, samples, time.process_time)
        / CALLS_PER_SAMPLE
        * 1e6,
        fresh_colocated_cpu_us=_median_s(unseen, samples, time.process_time) / len(fresh) * 1e6,
        many_latency_ms=_median_s(
            lambda: predictor.latency_ms_many(names, batches, shares), samples
        )
        * 1e3,
        queries=queries,
        samples=samples,
    )
