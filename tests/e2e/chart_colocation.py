"""An LC server and a BE job on one GPU under the chart's node runtime: the load step, read
from the runtime's ``/metrics`` (``node_metrics``).

The LC server's arrivals are :func:`arkgpu.cli.workload.arrivals` of its ``--rates`` and
``--seed``, so the number of requests before the step is known. With each scrape the
test reads how many requests the server completed from its region's usage file on the
host (the latency ring's head: the server reports each request; the runtime's own
counter starts at its adoption of the region). The step lies between the last scrape
below that number and the first at or above it; the delay of the share's move is counted
from the earlier of the two (an over-estimate by at most one scrape interval).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from arkgpu.cli.workload import arrivals
from arkgpu.limiter.region import read_usage

from .node_metrics import Scrape, Scraper

LOW_RPS, LOW_S, HIGH_RPS, HIGH_S, SEED = 60.0, 10.0, 150.0, 8.0, 1
"""``manifests/lc-pod.yaml``'s load curve and seed (``--rates 60:10,150:8 --seed 1``)."""
LEVEL_S = 3.0
"""Window of the share levels before the step and at the end of the high phase, s."""
SCRAPE_EVERY_S = 0.2
"""Pause between two scrapes (a scrape takes some tens of ms when idle)."""
MOVE = 0.05
"""A move of the LC share: 5% of the GPU (the control law's release step is 2%, its
raise step 10%)."""


def requests_before_step() -> int:
    """How many requests the LC server gets before its rate steps up."""
    steps = [(LOW_RPS, LOW_S), (HIGH_RPS, HIGH_S)]
    return sum(1 for t in arrivals(steps, SEED) if t < LOW_S)


def requests_in_all() -> int:
    """How many requests the LC server gets over its whole curve."""
    return len(arrivals([(LOW_RPS, LOW_S), (HIGH_RPS, HIGH_S)], SEED))


@dataclass(frozen=True)
class Point:
    """One scrape of the runtime and the LC server's completed requests at that time."""

    scrape: Scrape
    served: int | None
    """Requests the LC server completed (its region's latency head); None: no region."""

    @property
    def t(self) -> float:
        """When (monotonic s)."""
        return self.scrape.t


@dataclass(frozen=True)
class StepReport:
    """What the scrapes show about the load step."""

    step_t: float
    """Time of the last scrape before the step (monotonic s)."""
    lc_before: float
    lc_after: float
    be_before: float
    be_after: float
    moved_after_s: float | None
    """From ``step_t`` to the first scrape whose LC share is ``MOVE`` above ``lc_before``."""
    within_target: float
    """Fraction of the LC requests the runtime saw after the step within the latency target."""
    requests_after: int


def _level(points: list[Point], region: str, start: float, end: float) -> float:
    values = [p.scrape.value(region, "share_ratio") for p in points if start <= p.t <= end]
    got = [v for v in values if v is not None]
    assert got, f"no share of {region} between {start:.1f} and {end:.1f}"
    return statistics.median(got)


def _counter(point: Point, region: str, name: str) -> float:
    return point.scrape.value(region, name) or 0.0


def analyse(points: list[Point], lc: str, be: str) -> StepReport:
    """The step's report from the scrapes of LC region ``lc`` and BE region ``be``."""
    series = [p for p in points if p.scrape.value(lc, "share_ratio") is not None]
    n_step, total = requests_before_step(), requests_in_all()
    after = [i for i, p in enumerate(series) if (p.served or 0) >= n_step]
    assert after, f"no scrape after the step ({n_step} requests)"
    assert after[0] > 0, f"no scrape before the step ({n_step} requests)"
    before_step = series[after[0] - 1]
    step_t = before_step.t
    high = [p for p in series[after[0] :] if (p.served or 0) < total] or [series[after[0]]]
    end_t, last = high[-1].t, high[-1]
    lc_before = _level(series, lc, step_t - LEVEL_S, step_t)
    moved = next(
        (
            p.t - step_t
            for p in high
            if (p.scrape.value(lc, "share_ratio") or 0) >= lc_before + MOVE
        ),
        None,
    )
    done = _counter(last, lc, "requests_total") - _counter(before_step, lc, "requests_total")
    name = "requests_within_target_total"
    within = _counter(last, lc, name) - _counter(before_step, lc, name)
    return StepReport(
        step_t=step_t,
        lc_before=lc_before,
        lc_after=_level(series, lc, end_t - LEVEL_S, end_t),
        be_before=_level(points, be, step_t - LEVEL_S, step_t),
        be_after=_level(points, be, end_t - LEVEL_S, end_t),
        moved_after_s=moved,
        within_target=within / done if done else 0.0,
        requests_after=int(done),
    )


def table(points: list[Point], lc: str, be: str) -> str:
    """The scrapes as lines (for a failure)."""
    t0 = points[0].t if points else 0.0
    rows = [
        f"{p.t - t0:7.2f} {p.served} {p.scrape.value(lc, 'share_ratio')} "
        f"{p.scrape.value(be, 'share_ratio')} {p.scrape.value(lc, 'requests_total')} "
        f"{p.scrape.value(lc, 'latency_p99_seconds')}"
        for p in points
    ]
    return "\n".join(["t served lc_share be_share lc_requests_seen lc_p99_s", *rows])


def _served(region: Path) -> int | None:
    try:
        return read_usage(region).latency_head
    except (OSError, ValueError):  # gone, or being removed
        return None


def scrape_until_served(scraper: Scraper, region: Path, timeout_s: float) -> list[Point]:
    """Scrapes every :data:`SCRAPE_EVERY_S` until the LC server (its region folder
    ``region``) completed every request or its region is gone; AssertionError after
    ``timeout_s``."""
    deadline, points = time.monotonic() + timeout_s, []
    while True:
        served = _served(region)
        points.append(Point(scraper.scrape(), served))
        if served is None or served >= requests_in_all():
            return points
        assert time.monotonic() < deadline, f"the LC server still serving after {timeout_s} s"
        time.sleep(SCRAPE_EVERY_S)
