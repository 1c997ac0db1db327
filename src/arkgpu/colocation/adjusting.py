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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from arkgpu.colocation.observations import BeObservation, LcObservation
from arkgpu.colocation.sizing import ShareSizer
from arkgpu.colocation.splitting import ShareSplit, split_gpu
from arkgpu.model.shares import SHARE_FULL_BP, share_fraction
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
    models: dict[str, str] = field(default_factory=dict)
    """Model of each LC service sized (for the prediction calibration compares with)."""
    _settled: tuple[object, object] | None = field(default=None, repr=False, compare=False)
    """(inputs, state) of the last step that left the state as it found it: the
    same inputs on the same state decide the same split again (``last``)."""

    def step(
        self,
        observations: Sequence[LcObservation],
        bes: Sequence[BeObservation],
        corrections: Mapping[str, float] | None = None,
        capacity_bp: int = SHARE_FULL_BP,
    ) -> ShareSplit:
        """Decide the shares for the next period, handing out at most ``capacity_bp``
        (the GPU less the shares held by containers the loop does not adjust).

        Services are sized in the order observed; a co-runner's workload is its
        last period's share at its newest batch (sized earlier in this step, or
        last period).

        A step is a function of the inputs and the unit's state; when one left
        the state unchanged (a settled GPU: no load change, no feedback moving),
        the next step with equal inputs returns the same split without sizing
        again.

        ``corrections`` (online calibration, :mod:`arkgpu.colocation.calibration`):
        per service, a factor multiplying its predicted slowdown; absent: 1.
        """
        fix = dict(corrections or {})
        inputs = (_inputs(observations, bes), tuple(sorted(fix.items())), capacity_bp)
        state = self._state()
        if self._settled == (inputs, state):
            return self.last
        work = {o.name: self._workload(o) for o in observations}
        be_work = self._be_workloads(bes)
        shares = {
            o.name: self._lc_share(o, work, be_work, fix.get(o.name, 1.0)) for o in observations
        }
        split = split_gpu(shares, [b.name for b in bes], self.config.min_lc_bp, capacity_bp)
        self.last = split
        after = self._state()
        self._settled = (inputs, after) if after == state else None
        return split

    def _state(self) -> tuple[object, ...]:
        """A copy of everything a step reads of the unit and may change."""
        return dict(self.rates), dict(self.boosts), dict(self.batches), self.last

    def restore(
        self,
        observations: Sequence[LcObservation],
        bes: Sequence[BeObservation],
        current: Mapping[str, int],
    ) -> None:
        """Rebuild the state from the shares in force (``current``, bp per container).

        For a controller that restarts over running containers: a step with no
        feedback (raise and release steps 0) gives each LC service's base share
        at the measured rate and its batch; its boost becomes whatever makes the
        share in force (clamped to ``0..max_boost``), and the previous split is
        the one in force. The next :meth:`step` then continues from the limits
        running, moved only by the law's response to what it measures.
        """
        lcs = {o.name for o in observations}
        self.last = ShareSplit(
            {k: v for k, v in current.items() if k in lcs},
            {k: v for k, v in current.items() if k not in lcs},
        )
        still = replace(self.config, raise_step=0.0, release_step=0.0)
        dry = AdjustmentUnit(self.sizer, still, last=self.last)
        base = dry.step(observations, bes)
        self.rates, self.batches, self.models = dry.rates, dry.batches, dry.models
        top = self.config.max_boost
        self.boosts = {
            o.name: min(
                top,
                max(0.0, share_fraction(current[o.name]) - share_fraction(base.lc_bp[o.name])),
            )
            for o in observations
            if o.name in current
        }

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

    def predicted_ms(self, o: LcObservation, bes: Sequence[BeObservation]) -> float:
        """The predictor's latency (ms) of ``o``'s median batch in the period just
        observed: at the share in force, with the co-runners at theirs (NaN when
        ``o`` had no share in force)."""
        last = self.last.lc_bp.get(o.name, 0)
        if not last:
            return math.nan
        batch = o.exec_batch or self.batches.get(o.name, 1)
        share = min(1.0, max(share_fraction(last), 0.01))
        me = Workload(o.demand.model, batch, share)
        others = [
            Workload(model, self.batches.get(name, 1), min(1.0, max(share_fraction(bp), 0.01)))
            for name, bp, model in self._lc_corunners(o)
        ]
        alone = self.sizer.predictor.latency_ms(me.model, batch, share, self.sizer.gpu)
        return alone * self.sizer.slowdown(me, others + self._be_workloads(bes))

    def _lc_corunners(self, o: LcObservation) -> list[tuple[str, int, str]]:
        """(name, share in force, model) of the other LC services with a share in force."""
        models = self.models
        return [
            (name, bp, models[name])
            for name, bp in self.last.lc_bp.items()
            if name != o.name and bp and name in models
        ]

    def _lc_share(
        self,
        o: LcObservation,
        work: dict[str, Workload],
        be_work: list[Workload],
        correction: float = 1.0,
    ) -> float:
        demand = o.demand.at_rate(self._rate(o))
        self.models[o.name] = o.demand.model
        corunners = [w for name, w in work.items() if name != o.name] + be_work
        slowdown = self.sizer.slowdown(work[o.name], corunners)
        if correction != 1.0:
            slowdown *= correction
        plan = self.sizer.plan(demand, slowdown)
        base, batch = (1.0, o.demand.max_batch) if plan is None else plan
        self.batches[o.name] = batch
        work[o.name] = self._workload(o)
        return min(1.0, base + self._boost(o))

    def _workload(self, o: LcObservation) -> Workload:
        last = self.last.lc_bp.get(o.name, 0)
        share = share_fraction(last) if last else 0.5
        return Workload(o.demand.model, self.batches.get(o.name, 1), min(1.0, max(share, 0.01)))

    def _be_workloads(self, bes: Sequence[BeObservation]) -> list[Workload]:
        work = []
        for b in bes:
            share = share_fraction(self.last.be_bp.get(b.name, 0))
            if share > 0.005:
                work.append(Workload(b.model, b.batch, min(1.0, share)))
        return work


def _inputs(lcs: Sequence[LcObservation], bes: Sequence[BeObservation]) -> tuple[object, ...]:
    """What a step reads of its arguments, comparable (an unknown p99, NaN, as None)."""
    services = tuple(
        (o.name, o.demand, None if math.isnan(o.p99_ms) else o.p99_ms, o.queued) for o in lcs
    )
    return services, tuple(bes)
