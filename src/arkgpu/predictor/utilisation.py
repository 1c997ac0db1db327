"""Memory-system use of a workload alone: L2 cache and DRAM utilisation against batch and share.

Level 2 needs the co-runners' L2 and DRAM use at batches and shares that were
not measured. Per (GPU, DNN model) the fit is log-linear::

    util_pct(b, s) = min(100, exp(log_scale) * b**batch_exponent * s**share_exponent)

fitted by least squares on log utilisation over the measured solo points. A
model without such measurements has no curve, and level 2 then uses its
activity features instead (:mod:`arkgpu.predictor.interference`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from arkgpu.model.arrays import FloatArray

MIN_POINTS = 3
"""Fewest measured points for a model's own fit; fewer use the pooled fit."""


@dataclass(frozen=True, slots=True)
class UtilCurve:
    """``util_pct(b, s) = min(100, exp(log_scale) * b**batch_exponent * s**share_exponent)``."""

    log_scale: float
    """Log of the utilisation % at batch 1 on the whole GPU."""
    batch_exponent: float
    """Growth of utilisation with batch size (log-log slope)."""
    share_exponent: float
    """Growth of utilisation with share (log-log slope)."""

    def util_pct(self, batch: float, share: float) -> float:
        """Utilisation in % of the whole GPU."""
        value: float = (
            math.exp(self.log_scale) * batch**self.batch_exponent * share**self.share_exponent
        )
        return min(100.0, value)

    def util_pct_many(self, batch: FloatArray, share: FloatArray) -> FloatArray:
        """Vectorised :meth:`util_pct`."""
        log = self.log_scale + self.batch_exponent * np.log(batch)
        result: FloatArray = np.minimum(100.0, np.exp(log + self.share_exponent * np.log(share)))
        return result

    def to_dict(self) -> dict[str, float]:
        """Parameters by name (for JSON)."""
        return asdict(self)


def fit_util(batch: FloatArray, share: FloatArray, util_pct: FloatArray) -> UtilCurve:
    """Fit :class:`UtilCurve` on points with utilisation > 0 (log least squares)."""
    keep = util_pct > 0
    if keep.sum() < MIN_POINTS:
        raise ValueError(f"need {MIN_POINTS} utilisation points, got {int(keep.sum())}")
    design = np.column_stack([np.ones(keep.sum()), np.log(batch[keep]), np.log(share[keep])])
    coef, *_ = np.linalg.lstsq(design, np.log(util_pct[keep]), rcond=None)
    return UtilCurve(float(coef[0]), float(coef[1]), float(coef[2]))
