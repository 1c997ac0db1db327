"""Level 2: how much co-runners on the same GPU slow a workload down.

The slowdown of a target workload t sharing a GPU with co-runners j is::

    slowdown(t) = 1 + sum_j  theta . f(t, j)

with one of two feature sets, chosen by what was measured:

``memory`` (every workload involved has measured L2 and DRAM utilisation;
utilisations are fractions of the whole GPU, predicted for each workload
alone at its batch and share)::

    f(t, j) = [ l2_j, dram_j, l2_t * l2_j, dram_t * dram_j, share_t * share_j ]

the co-runner's L2 and DRAM pressure, the same weighted by how much the
target itself uses each (a workload that barely touches memory barely
notices), and the compute-share overlap (MPS shares are not perfectly
isolated).

``activity`` (otherwise; from level 1 alone)::

    f(t, j) = [ a_j, a_t * a_j, share_t * share_j ]

where a workload's activity ``a`` is the batch elasticity of its latency
alone, d ln latency / d ln batch in [0, 1]
(:meth:`arkgpu.predictor.curves.SoloCurve.activity`): the fraction of the
latency that is per-sample GPU work. A small batch whose latency barely grows
with the batch (fixed costs, SMs left idle) neither presses on nor suffers
much from co-runners; a saturated one time-shares the GPU with them. (Until
2026-12-05 ``a`` was the busy-SM fraction times the GPU part's share of the
latency; the SM fraction fitted from latency alone is poorly determined, and
the weakly interfering small-batch MPS groups were over-predicted.)

Both sets end with one group term, ``overcommit``, added once per target::

    g(t, J) = duty_t * max(0, occ_t + sum_j occ_j - 1)

where ``occ`` is the fraction of the GPU's SMs a workload's batch keeps busy
(at most its share) and ``duty_t`` the fraction of the target's latency its
GPU part takes: when the workloads together ask for more SMs than the GPU has
(MPS without active-thread limits, as in ParvaGPU's groups of processes),
the GPU part stretches with the excess. Workloads on shares that add up to at
most 1 (iGniter's pairs) never overcommit, so the term is 0 there.

The coefficients ``theta`` are fitted by non-negative least squares on
features that are all >= 0, so the slowdown is >= 1 by construction and never
falls when a co-runner is added. The predictor further scales each
co-runner's term by a non-negative factor per measured (target model,
co-runner model) combination (:func:`arkgpu.predictor.pair_rows.fit_scales`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import nnls

from arkgpu.model.arrays import FloatArray


@dataclass(frozen=True, slots=True)
class Usage:
    """What level 2 knows about one workload alone."""

    share: float
    """Compute share in (0, 1]."""
    activity: float
    """Batch elasticity of the latency alone, in [0, 1] (from level 1)."""
    occupancy: float = 0.0
    """Busy SM fraction of the whole GPU, in [0, 1] (from level 1)."""
    duty: float = 0.0
    """Fraction of the latency the GPU part takes, in [0, 1] (from level 1)."""
    l2: float | None = None
    """L2 utilisation as a fraction of the whole GPU; None when never measured."""
    dram: float | None = None
    """DRAM bandwidth utilisation as a fraction of the whole GPU; None when never measured."""

    @property
    def measured(self) -> bool:
        """Whether L2 and DRAM utilisation are known for this workload's model."""
        return self.l2 is not None and self.dram is not None


def _memory(t: Usage, j: Usage) -> list[float]:
    tl2, tdram, jl2, jdram = t.l2 or 0.0, t.dram or 0.0, j.l2 or 0.0, j.dram or 0.0
    return [jl2, jdram, tl2 * jl2, tdram * jdram, t.share * j.share]


def _activity(t: Usage, j: Usage) -> list[float]:
    return [j.activity, t.activity * j.activity, t.share * j.share]


FEATURE_SETS: dict[str, Callable[[Usage, Usage], list[float]]] = {
    "memory": _memory,
    "activity": _activity,
}
"""Feature functions by name; see the module docstring."""
FEATURE_NAMES: dict[str, tuple[str, ...]] = {
    "memory": ("l2", "dram", "l2_x_l2", "dram_x_dram", "share_x_share", "overcommit"),
    "activity": ("activity", "activity_x_activity", "share_x_share", "overcommit"),
}
"""Names of theta's entries: the per-co-runner features, then the group term."""


def overcommit(target: Usage, corunners: Sequence[Usage]) -> float:
    """g(t, J): the target's GPU duty times the SMs asked for beyond the GPU's."""
    asked = target.occupancy + sum(u.occupancy for u in corunners)
    return target.duty * max(0.0, asked - 1.0)


def feature_set_for(target: Usage, corunners: list[Usage]) -> str:
    """``memory`` when every workload has measured utilisation, else ``activity``."""
    return "memory" if target.measured and all(u.measured for u in corunners) else "activity"


def group_features(kind: str, target: Usage, corunners: Sequence[Usage]) -> FloatArray:
    """sum_j f(t, j) of feature set ``kind``, then g(t, J): one row, theta's width."""
    width = len(FEATURE_NAMES[kind]) - 1
    summed = np.zeros(width)
    for corunner in corunners:
        summed += np.array(FEATURE_SETS[kind](target, corunner))
    return np.append(summed, overcommit(target, corunners))


@dataclass(frozen=True, slots=True)
class Interference:
    """Fitted level-2 coefficients (non-negative) of one feature set."""

    kind: str
    """Feature set name, a key of :data:`FEATURE_SETS`."""
    theta: tuple[float, ...]
    """Coefficients of f(t, j), in :data:`FEATURE_NAMES` order; all >= 0."""

    def extra(self, target: Usage, corunner: Usage) -> float:
        """theta . f(t, j): the slowdown one co-runner adds by itself (>= 0)."""
        features = FEATURE_SETS[self.kind](target, corunner)
        return sum(t * f for t, f in zip(self.theta, features, strict=False))

    def crowding(self, target: Usage, corunners: Sequence[Usage]) -> float:
        """The group term's slowdown (>= 0): SMs asked for beyond the GPU's."""
        return self.theta[-1] * overcommit(target, corunners)

    def slowdown(self, target: Usage, corunners: list[Usage]) -> float:
        """Slowdown factor (>= 1) of ``target`` with ``corunners`` on the same GPU."""
        pairwise = sum(self.extra(target, corunner) for corunner in corunners)
        return 1.0 + pairwise + self.crowding(target, corunners)

    @staticmethod
    def none(kind: str) -> Interference:
        """The "no interference" model: slowdown 1 whatever the co-runners."""
        return Interference(kind, tuple(0.0 for _ in FEATURE_NAMES[kind]))


def fit_interference(kind: str, rows: FloatArray, slowdowns: FloatArray) -> Interference:
    """Fit theta by non-negative least squares on relative error.

    ``rows`` holds f(t, j) summed over each target's co-runners and g(t, J)
    (:func:`group_features`), ``slowdowns``
    the measured latency divided by the level-1 prediction alone. Dividing
    both sides by the slowdown weighs each pair by its relative error. No
    rows: no interference.
    """
    if len(slowdowns) == 0:
        return Interference.none(kind)
    weight = 1.0 / slowdowns
    theta, _ = nnls(rows * weight[:, None], (slowdowns - 1.0) * weight)
    return Interference(kind, tuple(float(v) for v in theta))
