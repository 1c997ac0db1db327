"""The node's control loop: one period's observations of a GPU in, its containers' limits out.

:class:`NodeController` keeps one adjustment unit per GPU
(:mod:`arkgpu.colocation.adjusting`) and turns its split into a
:class:`GpuDecision`: per container the compute share (basis points), the
memory cap and, for a BE job, the share each LC service lends it while that
service has no batch in flight (idle-share lending). The simulator's
``arkgpu`` modes and the node runtime call the same :meth:`NodeController.tick`;
:func:`arkgpu.colocation.limiting.limits_for` turns an entry into the
limiter's :class:`~arkgpu.limiter.region.Limits`.

Lending: each LC service's share is cut into equal parts, one per BE job of
the GPU (:func:`arkgpu.colocation.splitting.equal_parts`), so the BE jobs
together never borrow more than the lender has. A control region holds at
most ``max_lenders`` lenders: with more LC services on a GPU, a BE job
borrows from those with the largest shares.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from arkgpu.colocation.adjusting import AdjustmentConfig, AdjustmentUnit
from arkgpu.colocation.calibration import CalibrationConfig, Calibrator, Evidence
from arkgpu.colocation.observations import GpuObservations
from arkgpu.colocation.sizing import ShareSizer
from arkgpu.colocation.splitting import ShareSplit, equal_parts
from arkgpu.limiter.layout import MAX_LENDERS
from arkgpu.model.shares import SHARE_FULL_BP


@dataclass(frozen=True)
class ContainerDecision:
    """What one container on the GPU gets for the next period."""

    name: str
    """Pod (container) name, as observed."""
    share_bp: int
    """Compute share of the GPU, basis points (:mod:`arkgpu.model.shares`)."""
    memory_mib: int | None = None
    """Memory cap (MiB); None: no cap."""
    lenders: tuple[str, ...] = ()
    """LC services this container borrows from while they are idle (BE jobs only)."""
    lent_bp: tuple[int, ...] = ()
    """Share each of ``lenders`` lends it while idle, basis points (same order)."""


@dataclass(frozen=True)
class GpuDecision:
    """The decision for every container of one GPU."""

    gpu: int
    """GPU index on the node."""
    lcs: tuple[ContainerDecision, ...]
    """LC services, in the order observed."""
    bes: tuple[ContainerDecision, ...]
    """BE jobs, in the order observed."""

    def containers(self) -> tuple[ContainerDecision, ...]:
        """Every entry, LC services first."""
        return self.lcs + self.bes

    def entry(self, name: str) -> ContainerDecision | None:
        """The entry of container ``name``, None when it was not observed."""
        return next((c for c in self.containers() if c.name == name), None)


@dataclass(frozen=True)
class ControlConfig:
    """Settings of the node's control loop."""

    adjustment: AdjustmentConfig = field(default_factory=AdjustmentConfig)
    """The adjustment unit's control law."""
    lend_idle_share: bool = True
    """BE jobs borrow the share of LC services while those have no batch in flight
    (ArkGPU's default; off for the ``arkgpu-static`` comparison)."""
    max_lenders: int = MAX_LENDERS
    """Lenders one container may borrow from: what a control region holds
    (:data:`arkgpu.limiter.layout.MAX_LENDERS`, 8)."""
    calibration: CalibrationConfig | None = None
    """Online calibration of the predictor per LC service
    (:mod:`arkgpu.colocation.calibration`); None (default): off, the predictor
    as fitted."""


def lending_bp(
    lenders: dict[str, int], borrowers: Sequence[str], max_lenders: int = MAX_LENDERS
) -> dict[str, tuple[tuple[str, ...], tuple[int, ...]]]:
    """Per borrower: the lenders (largest ``max_lenders`` shares) and what each lends it, bp."""
    ranked = sorted(lenders, key=lambda k: -lenders[k])[:max_lenders]
    chosen = tuple(k for k in lenders if k in ranked)
    parts = {k: equal_parts(lenders[k], len(borrowers)) for k in chosen}
    return {b: (chosen, tuple(parts[k][j] for k in chosen)) for j, b in enumerate(borrowers)}


def decide(split: ShareSplit, observations: GpuObservations, config: ControlConfig) -> GpuDecision:
    """The decision for the containers in ``observations`` from their GPU's ``split``."""
    lcs = tuple(
        ContainerDecision(o.name, split.lc_bp[o.name], o.memory_mib) for o in observations.lcs
    )
    lenders = config.max_lenders if config.lend_idle_share else 0
    names = [b.name for b in observations.bes]
    loans = lending_bp({c.name: c.share_bp for c in lcs}, names, lenders)
    bes = tuple(
        ContainerDecision(b.name, split.be_bp[b.name], b.memory_mib, *loans[b.name])
        for b in observations.bes
    )
    return GpuDecision(observations.gpu, lcs, bes)


@dataclass
class NodeController:
    """The control loop of one node's GPUs (one adjustment unit per GPU, kept between ticks)."""

    sizer: ShareSizer
    """Level-2 split over the fitted predictor."""
    config: ControlConfig = field(default_factory=ControlConfig)
    """Control-loop settings."""
    units: dict[int, AdjustmentUnit] = field(default_factory=dict)
    """Adjustment unit per GPU index."""
    _decided: dict[int, tuple[ShareSplit, object, GpuDecision]] = field(
        default_factory=dict, repr=False
    )
    """Per GPU: the last split, what :func:`decide` read of the observations, and
    its decision (a settled GPU's split comes back as the same object)."""

    calibrators: dict[int, Calibrator] = field(default_factory=dict)
    """Online calibration per GPU index (with ``config.calibration``)."""

    def tick(self, observations: GpuObservations) -> GpuDecision:
        """Decide the next period of one GPU from the last period's observations."""
        unit = self._unit(observations.gpu)
        corrections = self._calibrate(unit, observations)
        capacity = SHARE_FULL_BP - observations.reserved_bp
        split = unit.step(observations.lcs, observations.bes, corrections, capacity)
        read = (
            tuple((o.name, o.memory_mib) for o in observations.lcs),
            observations.bes,
        )
        last = self._decided.get(observations.gpu)
        if last is not None and last[0] is split and last[1] == read:
            return last[2]
        decision = decide(split, observations, self.config)
        self._decided[observations.gpu] = (split, read, decision)
        return decision

    def restore(self, observations: GpuObservations, current: Mapping[str, int]) -> None:
        """Rebuild one GPU's state from the shares in force (``current``, bp per container),
        deciding nothing: a controller restarted over running containers continues from
        their limits (:meth:`AdjustmentUnit.restore`)."""
        self._unit(observations.gpu).restore(observations.lcs, observations.bes, current)

    def _calibrate(self, unit: AdjustmentUnit, obs: GpuObservations) -> dict[str, float] | None:
        """Learn from the period observed; the corrections to apply (None: calibration off)."""
        config = self.config.calibration
        if config is None:
            return None
        calibrator = self.calibrators.setdefault(obs.gpu, Calibrator(config))
        evidence = [
            Evidence(o.name, o.exec_ms, unit.predicted_ms(o, obs.bes), o.batches)
            for o in obs.lcs
            if o.batches
        ]
        calibrator.update(evidence, [o.name for o in obs.lcs], obs.period_s)
        return calibrator.factors()

    def seed_corrections(self, gpu: int, factors: Mapping[str, float]) -> None:
        """Start ``gpu``'s calibration from ``factors`` (published by an earlier run);
        nothing when calibration is off."""
        config = self.config.calibration
        if config is not None and factors:
            self.calibrators.setdefault(gpu, Calibrator(config)).restore(factors)

    def corrections(self) -> dict[str, float]:
        """Every LC service's correction now (unrounded; 1.0 when none was learnt)."""
        return {
            name: calibrator.factor(name)
            for calibrator in self.calibrators.values()
            for name in calibrator.logs
        }

    def _unit(self, gpu: int) -> AdjustmentUnit:
        if gpu not in self.units:
            self.units[gpu] = AdjustmentUnit(self.sizer, self.config.adjustment)
        return self.units[gpu]

    def forget(self, gpu: int) -> None:
        """Drop the state kept for ``gpu`` (the GPU left the node)."""
        self.units.pop(gpu, None)
        self._decided.pop(gpu, None)
        self.calibrators.pop(gpu, None)
