"""Online calibration: each LC service's measured batch time corrects the predictor for it.

The predictor is fitted on profiles; on a live GPU a service may run slower
(a wrong profile, stronger interference than profiled) or faster. Every
period the control loop hands in, per LC service, the evidence
``r = measured / predicted``: the measured execution time of its batches
(median over the period) over the predictor's latency for the same batch at
the share in force with the co-runners of the period (level 1 x level 2).
The calibrator keeps one multiplicative factor ``c`` per service:

* with evidence: ``log c <- (1 - g) log c + g log r``, ``g = 1 - 2^(-dt / response_s)``
  (an exponential average in log space: a steady ``r`` is reached within a few
  ``response_s``, one noisy period moves it little); ``r`` is clipped to
  ``[min_factor, max_factor]`` first;
* without evidence (no batch completed, no share in force): ``log c`` decays
  towards 0 (``c`` towards 1, the predictor as fitted) with half-life
  ``decay_half_life_s``: an old correction is trusted less as it ages;
* ``c`` always stays within ``[min_factor, max_factor]``.

The factor applied (:meth:`Calibrator.factors`) is ``c`` rounded to
``resolution``, so a settled service asks the level-2 split the same question
each period. The control loop multiplies the predicted slowdown by it
(:mod:`arkgpu.colocation.adjusting`). Pure code: no clock, no I/O; time comes
in as the period's length.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class CalibrationConfig:
    """How the per-service correction learns, forgets and is bounded (module docstring)."""

    min_factor: float = 0.8
    """Smallest correction, a ratio (default 0.8): a service measured faster than
    predicted gets at most 20% less predicted latency, since the predictor's
    level 2 counts every co-runner as always executing and the sizing's headroom
    is calibrated for it; a faster-than-profiled GPU rarely warrants more."""
    max_factor: float = 3.0
    """Largest correction, a ratio (default 3.0): a measured co-located/solo ratio
    of 1.8 on top of a level-1 error of 50% is about the worst a wrong profile
    gives; beyond, the boost of the control law takes over."""
    response_s: float = 5.0
    """Half-life of the evidence average, seconds (default 5): a steady error is
    absorbed within about 20 s (four half-lives, 94%), far inside the issue's
    "within minutes", while one period's noise (1-3% measured std) moves it little."""
    decay_half_life_s: float = 600.0
    """Half-life of a correction without evidence, seconds (default 600): a service
    idle for ten minutes keeps half its correction; co-runners may have changed."""
    resolution: float = 0.01
    """Step of the factor applied, a ratio (default 0.01): finer changes the split
    (1% share grid) cannot show, and a settled factor lets the control loop settle."""
    min_batches: int = 3
    """Batches a period must complete to count as evidence (default 3): fewer is
    one or two noisy samples."""


@dataclass(frozen=True)
class Evidence:
    """One period's evidence about one LC service."""

    name: str
    """Service name."""
    measured_ms: float
    """Measured batch execution time (ms), median over the period."""
    predicted_ms: float
    """The predictor's latency for the same batch, share and co-runners (ms)."""
    batches: int = 1
    """Batches completed in the period."""


@dataclass
class Calibrator:
    """Per-service corrections of one GPU (state kept between periods)."""

    config: CalibrationConfig = field(default_factory=CalibrationConfig)
    """Learning settings."""
    logs: dict[str, float] = field(default_factory=dict)
    """``log c`` per service (absent: 0, the predictor as fitted)."""

    def update(self, evidence: Iterable[Evidence], services: Iterable[str], dt_s: float) -> None:
        """One period of ``dt_s`` seconds: learn from ``evidence``, decay the other
        ``services``, forget services no longer listed."""
        c = self.config
        names = set(services)
        seen: set[str] = set()
        gain = 1.0 - 0.5 ** (max(dt_s, 0.0) / c.response_s)
        low, high = math.log(c.min_factor), math.log(c.max_factor)
        for e in evidence:
            if e.batches < c.min_batches or not _usable(e):
                continue
            seen.add(e.name)
            r = min(high, max(low, math.log(e.measured_ms / e.predicted_ms)))
            old = self.logs.get(e.name, 0.0)
            self.logs[e.name] = min(high, max(low, (1.0 - gain) * old + gain * r))
        keep = 0.5 ** (max(dt_s, 0.0) / c.decay_half_life_s)
        for name in list(self.logs):
            if name not in names:
                del self.logs[name]
            elif name not in seen:
                self.logs[name] *= keep

    def factor(self, name: str) -> float:
        """The correction of ``name`` now, unrounded (1.0 when none was learnt)."""
        return math.exp(self.logs.get(name, 0.0))

    def factors(self) -> dict[str, float]:
        """The corrections applied: each rounded to ``resolution``; services at 1.0 left out."""
        step = self.config.resolution
        out = {k: round(round(self.factor(k) / step) * step, 6) for k in self.logs}
        return {k: v for k, v in out.items() if v != 1.0}

    def restore(self, factors: Mapping[str, float]) -> None:
        """Start from published ``factors`` (a restarted runtime, a moved service)."""
        c = self.config
        for name, value in factors.items():
            if value > 0 and math.isfinite(value):
                self.logs[name] = math.log(min(c.max_factor, max(c.min_factor, value)))


def _usable(e: Evidence) -> bool:
    """Both times are finite and positive."""
    return all(math.isfinite(v) and v > 0 for v in (e.measured_ms, e.predicted_ms))


CALIBRATION_FILE = "calibration.json"
"""The node runtime's published corrections, in its regions directory: ``{"services": {name:
{"model", "gpu", "factor"}}, "models": {model: largest factor of its services}}``. The device
plugin copies ``models`` into the node's inventory for the scheduler extender."""


def published_models(doc: object) -> tuple[tuple[str, float], ...]:
    """The (model, factor) pairs of a published document, sorted; () when it has none or is
    malformed (a factor that is not a finite positive number is left out)."""
    models = doc.get("models") if isinstance(doc, dict) else None
    if not isinstance(models, dict):
        return ()
    out = [
        (str(model), round(float(value), 4))
        for model, value in models.items()
        if isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    ]
    return tuple(sorted(out))


def model_factors(corrections: Mapping[str, float], models: Mapping[str, str]) -> dict[str, float]:
    """Per model, the largest correction of its services (``models``: service -> model):
    what a new placement assumes of a service of that model (the cautious side)."""
    out: dict[str, float] = {}
    for name, value in corrections.items():
        model = models.get(name)
        if model is not None:
            out[model] = max(out.get(model, value), value)
    return out
