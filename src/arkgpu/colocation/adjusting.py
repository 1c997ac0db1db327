"""The adjustment unit: periodic feedback that moves compute share between LC and BE.

Every period the node runtime (or the simulator) reports, per LC service on a
GPU, the request rate and the p99 latency measured over the last period and
the queue length now. For LC service ``i`` the unit computes:

* rate estimate ``r_i = max(m_i, a * m_i + (1 - a) * r_i')``: it follows a rise
  at once and a fall smoothly (``a`` = ``rate_smoothing``, ``m_i`` measured,
  ``r_i'`` last period's estimate);
* base share ``b_i``: the level-2 split (:mod:`arkgpu.colocation.sizing`) at
  ``r_i`` with the predicted slowdown from its co-runners at last period's
  shares;
* boost ``u_i`` (feedback on measured tail latency, ``p_i``, target ``T_i``):
  ``u_i += raise_step`` when ``p_i > violation_ratio * T_i`` or the queue holds
  more than one full batch (a violation is coming); ``u_i -= release_step``
  (not below 0) when ``p_i < relax_ratio * T_i``; unchanged in between;
  ``u_i <= max_boost``;
* share ``s_i = min(1, b_i + u_i)``; :func:`arkgpu.colocation.splitting.split_gpu`
  turns the shares into the GPU's split in basis points: if the LC shares add
  up to more than 1 they are scaled down to 1 (overload: BE gets nothing).

BE jobs on the GPU split the rest equally: ``(1 - sum s_i) / n_BE``. When the
load falls, ``b_i`` falls with the smoothed rate and ``u_i`` drains by
``release_step`` per period, so share goes back to BE within a few periods.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from arkgpu.colocation.observations import BeObservation, LcObservation
from arkgpu.colocation.sizing import ShareSizer
from arkgpu.colocation.splitting import ShareSplit, split_gpu
from arkgpu.model.shares import share_fraction
from arkgpu.predictor import Workload


@dataclass(frozen=True)
class AdjustmentConfig:
    """Parameters of the control law (see the module docstring)."""

    violation_ratio: float = 0.85
    """p99 over this fraction of the target counts as a coming violation: the
    unit reacts one period before the target is crossed."""
    relax_ratio: float = 0.5
    """p99 under this fraction of the target lets the boost drain."""
    raise_step: float = 0.1
    """Share added per period on a coming violation (10 MPS percent; a few
    periods reach the largest correction)."""
    release_step: float = 0.02
    """Share handed back per period once latency is low (slow, to avoid
    oscillating against the raise)."""
    max_boost: float = 0.6
    """Largest correction above the predicted base share."""
    rate_smoothing: float = 0.3
    """Weight of the newest measured rate when the rate falls (EWMA)."""
    min_lc_bp: int = 100
    """Smallest share an LC service is given, basis points (1%, one MPS
    active-thread percent): a service at no share would never finish a batch."""


@dataclass
class AdjustmentUnit:
    """Feedback controller of one GPU (keeps the per-service state between periods)."""

    sizer: ShareSizer
    """Level-2 split over the fitted predictor."""
    config: AdjustmentConfig = field(default_factory=AdjustmentConfig)
    """Control-law parameters."""
    rates: dict[str, float] = field(default_factory=dict)
    """Smoothed request rate per LC service."""
    boosts: dict[str, float] = field(default_factory=dict)
    """Current boost per LC service."""
    last: ShareSplit = field(default_factory=lambda: ShareSplit({}, {}))
    """The previous split (its shares estimate the co-runners' interference)."""
    batches: dict[str, int] = field(default_factory=dict)
    """Batch each LC service was sized to run (for the interference estimate)."""

    def step(
        self, observations: Sequence[LcObservation], bes: Sequence[BeObservation]
    ) -> ShareSplit:
        """Decide the shares for the next period."""
        shares = {o.name: self._lc_share(o, observations, bes) for o in observations}
        split = split_gpu(shares, [b.name for b in bes], self.config.min_lc_bp)
        self.last = split
        return split

    def _rate(self, o: LcObservation) -> float:
        a = self.config.rate_smoothing
        prev = self.rates.get(o.name, o.demand.rate_rps)
        rate = max(o.demand.rate_rps, a * o.demand.rate_rps + (1 - a) * prev)
        self.rates[o.name] = rate
        return rate

    def _boost(self, o: LcObservation) -> float:
        c = self.config
        boost = self.boosts.get(o.name, 0.0)
        target = o.demand.target_ms
        coming = (not math.isnan(o.p99_ms) and o.p99_ms > c.violation_ratio * target) or (
            o.queued > o.demand.max_batch
        )
        if coming:
            boost = min(c.max_boost, boost + c.raise_step)
        elif math.isnan(o.p99_ms) or o.p99_ms < c.relax_ratio * target:
            boost = max(0.0, boost - c.release_step)
        self.boosts[o.name] = boost
        return boost

    def _lc_share(
        self, o: LcObservation, all_obs: Sequence[LcObservation], bes: Sequence[BeObservation]
    ) -> float:
        demand = o.demand.at_rate(self._rate(o))
        slowdown = self.sizer.slowdown(self._workload(o), self._corunners(o, all_obs, bes))
        plan = self.sizer.plan(demand, slowdown)
        base, batch = (1.0, o.demand.max_batch) if plan is None else plan
        self.batches[o.name] = batch
        return min(1.0, base + self._boost(o))

    def _workload(self, o: LcObservation) -> Workload:
        last = self.last.lc_bp.get(o.name, 0)
        share = share_fraction(last) if last else 0.5
        return Workload(o.demand.model, self.batches.get(o.name, 1), min(1.0, max(share, 0.01)))

    def _corunners(
        self, o: LcObservation, all_obs: Sequence[LcObservation], bes: Sequence[BeObservation]
    ) -> list[Workload]:
        work = [self._workload(x) for x in all_obs if x.name != o.name]
        for b in bes:
            share = share_fraction(self.last.be_bp.get(b.name, 0))
            if share > 0.005:
                work.append(Workload(b.model, b.batch, min(1.0, share)))
        return work
