"""Request arrivals: a Poisson process whose rate follows a shipped daily curve.

A curve (arkgpu/data/load, SOURCE.md there) gives a relative rate per
10-minute window, peak 1.0. Its whole length is one day, compressed into the
scenario's ``day_s`` simulated seconds; a service's rate at simulated time
``t`` is ``peak_rps * curve((t / day_s + phase_h / 24) mod 1)``, constant
within a window. Arrivals are drawn per window: a Poisson count, then
uniform times, so a run is vectorised and exact for a piecewise-constant rate.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from importlib import resources

import numpy as np
from numpy.typing import NDArray


class LoadCurveError(ValueError):
    """A curve that is not shipped or a malformed curve file."""


@dataclass(frozen=True)
class LoadCurve:
    """Relative request rate over one day, in equal windows."""

    name: str
    """File stem of the curve."""
    relative_rate: NDArray[np.float64]
    """Rate of each window divided by the peak window (max 1.0)."""

    def rate_at(self, day_fraction: float) -> float:
        """Relative rate at a fraction of the day in [0, 1)."""
        n = len(self.relative_rate)
        return float(self.relative_rate[int((day_fraction % 1.0) * n) % n])


def load_curve(name: str) -> LoadCurve:
    """Read the shipped curve ``name`` (e.g. ``servegen_m_large_daily``)."""
    path = resources.files("arkgpu") / "data" / "load" / f"{name}.csv"
    if not path.is_file():
        raise LoadCurveError(f"unknown load curve {name!r} (no data/load/{name}.csv)")
    values: list[float] = []
    with path.open(encoding="utf-8") as fh:
        for line, row in enumerate(csv.DictReader(fh), start=2):
            try:
                values.append(float(row["relative_rate"]))
            except (KeyError, TypeError, ValueError):
                raise LoadCurveError(
                    f"data/load/{name}.csv:{line}: relative_rate: bad value"
                ) from None
    if not values or max(values) <= 0:
        raise LoadCurveError(f"data/load/{name}.csv: no positive rate")
    rates = np.asarray(values)
    return LoadCurve(name, rates / rates.max())


def poisson_arrivals(
    curve: LoadCurve,
    *,
    peak_rps: float,
    day_s: float,
    duration_s: float,
    phase_h: float,
    rng: np.random.Generator,
) -> NDArray[np.float64]:
    """Sorted arrival times (s) in [0, duration_s) of the time-varying Poisson process."""
    n = len(curve.relative_rate)
    window_s = day_s / n
    starts = np.arange(0.0, duration_s, window_s)
    index = ((starts / day_s + phase_h / 24.0) * n + 1e-9).astype(np.int64) % n
    lengths = np.minimum(window_s, duration_s - starts)
    counts = rng.poisson(peak_rps * curve.relative_rate[index] * lengths)
    offsets = rng.random(int(counts.sum()))
    times: NDArray[np.float64] = np.repeat(starts, counts) + offsets * np.repeat(lengths, counts)
    times.sort()
    return times
