"""How sure a prediction is: what supports it, and a calibrated interval around it.

Every (GPU, model) curve remembers the range of batches and shares it was
fitted on (:class:`Support`). A query is one of four kinds:

``measured-range``
    the model was profiled on this GPU and the batch and share lie inside the
    measured ranges: the formula interpolates (confident);
``extrapolated``
    profiled on this GPU, but the batch or the share lies outside what was
    measured;
``new-model``
    the curve was borrowed from other models through one measured point
    (:meth:`arkgpu.predictor.Predictor.with_model`);
``cross-gpu``
    the model was never profiled on this GPU: its curve on another GPU with
    shares scaled by the speed ratio stands in, a rough prior.

Each kind has an interval, the 5th and 95th percentiles of
``log(measured / predicted)`` on held-out folds of that kind
(:mod:`arkgpu.predictor.intervals` calibrates them and reports coverage).
Only ``measured-range`` is confident.

Level 2 answers with the same :class:`Confidence`, of one of :data:`PAIR_KINDS`
(``measured-pair`` is confident; :mod:`arkgpu.predictor.guarding` calibrates
their intervals). A level-2 answer gives no reasons.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from arkgpu.traces.profiles import SoloRecord

KINDS = ("measured-range", "extrapolated", "new-model", "cross-gpu")
"""Kinds of level-1 query, most supported first."""
PAIR_KINDS = ("measured-pair", "new-pair")
"""Kinds of level-2 query, the more supported first."""
CONFIDENT_KINDS = (KINDS[0], PAIR_KINDS[0])
"""The kind of each level whose predictions are confident."""
SHARE_TOLERANCE = 1e-6
"""Shares closer than this to a measured bound count as inside it (float noise)."""


@dataclass(frozen=True, slots=True)
class Support:
    """What one (GPU, model) curve was fitted on."""

    min_batch: int
    max_batch: int
    min_share: float
    max_share: float
    points: int
    """Measured points."""
    borrowed: bool = False
    """The curve was borrowed from other models through one measured point."""

    def to_dict(self) -> dict[str, float | int]:
        """JSON-ready values."""
        return {
            "min_batch": self.min_batch,
            "max_batch": self.max_batch,
            "min_share": self.min_share,
            "max_share": self.max_share,
            "points": self.points,
            "borrowed": self.borrowed,
        }

    @staticmethod
    def of(records: Sequence[SoloRecord]) -> Support:
        """The ranges of ``records`` (one (GPU, model)'s solo points)."""
        batches = [r.batch for r in records]
        shares = [r.share for r in records]
        return Support(min(batches), max(batches), min(shares), max(shares), len(records))

    def outside(self, batch: float, share: float) -> list[str]:
        """Why (batch, share) lies outside the measured ranges; empty when inside."""
        why = []
        if not self.min_batch <= batch <= self.max_batch:
            why.append(f"batch {batch:g} outside the measured {self.min_batch}-{self.max_batch}")
        low, high = self.min_share - SHARE_TOLERANCE, self.max_share + SHARE_TOLERANCE
        if not low <= share <= high:
            why.append(
                f"share {share:g} outside the measured {self.min_share:g}-{self.max_share:g}"
            )
        return why


@dataclass(frozen=True, slots=True)
class Confidence:
    """A level-1 or level-2 prediction with how sure it is."""

    latency_ms: float
    """The prediction (as :meth:`~arkgpu.predictor.Predictor.latency_ms`, or
    :meth:`~arkgpu.predictor.Predictor.colocated_latency_ms` at level 2)."""
    low_ms: float
    """Lower end of the interval (nominal 90%, calibrated on held-out folds of this kind)."""
    high_ms: float
    """Upper end of the interval."""
    kind: str
    """One of :data:`KINDS` (level 1) or :data:`PAIR_KINDS` (level 2)."""
    reasons: tuple[str, ...] = ()
    """Why a level-1 prediction is not confident; empty when it is, and at level 2."""

    @property
    def confident(self) -> bool:
        """Of its level's confident kind (:data:`CONFIDENT_KINDS`): inside the measured
        ranges of a model profiled on this GPU (level 1), or every model combination of
        the query measured in training (level 2)."""
        return self.kind in CONFIDENT_KINDS

    @property
    def upper_ratio(self) -> float:
        """``high_ms / latency_ms``: how much longer the latency may plausibly be (>= 1)."""
        return max(1.0, self.high_ms / self.latency_ms)

    def to_dict(self) -> dict[str, object]:
        """JSON-ready values (``reasons`` at level 1 only)."""
        out: dict[str, object] = {
            "latency_ms": self.latency_ms,
            "low_ms": self.low_ms,
            "high_ms": self.high_ms,
            "kind": self.kind,
            "confident": self.confident,
        }
        if self.kind in KINDS:
            out["reasons"] = list(self.reasons)
        return out


def interval(
    latency_ms: float, kind: str, reasons: Sequence[str], bounds: dict[str, tuple[float, float]]
) -> Confidence:
    """``latency_ms`` with the interval of ``kind`` from ``bounds`` (log-ratio quantiles)."""
    low, high = bounds[kind]
    return Confidence(
        latency_ms, latency_ms * math.exp(low), latency_ms * math.exp(high), kind, tuple(reasons)
    )
