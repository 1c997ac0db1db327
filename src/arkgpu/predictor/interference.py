"""Level 2: how much co-runners on the same GPU slow a workload down.

The slowdown of a target workload t sharing a GPU with co-runners j is::

    slowdown(t) = 1 + sum_j  theta . f(t, j)

with the contention features (utilisations in fractions of the whole GPU,
predicted for each workload alone at its batch and share)::

    f(t, j) = [ l2_j, dram_j, l2_t * l2_j, dram_t * dram_j, share_j * share_t ]

the co-runner's L2 and DRAM pressure, the same pressure weighted by how much
the target itself uses each (a workload that barely touches memory barely
notices), and the compute-share overlap (MPS shares are not perfectly
isolated). The coefficients ``theta`` are fitted by non-negative least
squares, so the slowdown is >= 1 by construction and grows with every
co-runner's use of the memory system.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import nnls

FloatArray = NDArray[np.float64]
FEATURE_NAMES: tuple[str, ...] = ("l2", "dram", "l2_x_l2", "dram_x_dram", "share_x_share")


@dataclass(frozen=True, slots=True)
class Usage:
    """What level 2 knows about one workload alone: its share and its memory-system use."""

    share: float
    """Compute share in (0, 1]."""
    l2: float
    """L2 utilisation as a fraction of the whole GPU."""
    dram: float
    """DRAM bandwidth utilisation as a fraction of the whole GPU."""


def features(target: Usage, corunner: Usage) -> FloatArray:
    """f(t, j) of the module docstring, one row."""
    return np.array(
        [
            corunner.l2,
            corunner.dram,
            target.l2 * corunner.l2,
            target.dram * corunner.dram,
            target.share * corunner.share,
        ]
    )


@dataclass(frozen=True, slots=True)
class Interference:
    """Fitted level-2 coefficients (non-negative), one per feature in :data:`FEATURE_NAMES`."""

    theta: tuple[float, ...]
    """Coefficients of f(t, j); all >= 0."""

    def slowdown(self, target: Usage, corunners: list[Usage]) -> float:
        """Slowdown factor (>= 1) of ``target`` with ``corunners`` on the same GPU."""
        extra = 0.0
        for corunner in corunners:
            extra += float(np.dot(self.theta, features(target, corunner)))
        return 1.0 + extra

    @staticmethod
    def none() -> Interference:
        """The "no interference" model: slowdown 1 whatever the co-runners."""
        return Interference(tuple(0.0 for _ in FEATURE_NAMES))


def fit_interference(rows: FloatArray, slowdowns: FloatArray) -> Interference:
    """Fit theta by non-negative least squares on relative error.

    ``rows`` holds f(t, j) summed over each target's co-runners, ``slowdowns``
    the measured latency divided by the level-1 prediction alone. Dividing
    both sides by the slowdown weighs each pair by its relative error.
    """
    if len(slowdowns) == 0:
        raise ValueError("cannot fit interference to no pairs")
    weight = 1.0 / slowdowns
    theta, _ = nnls(rows * weight[:, None], (slowdowns - 1.0) * weight)
    return Interference(tuple(float(v) for v in theta))
