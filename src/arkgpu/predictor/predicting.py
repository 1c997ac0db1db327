"""The two-level performance predictor that placement, co-location and the simulator ask.

Level 1 (:mod:`arkgpu.predictor.curves`): latency of a DNN model's batch alone
on a share of a GPU, one fitted formula per (GPU, model). Level 2
(:mod:`arkgpu.predictor.interference`): the slowdown co-runners add, from their
shares and their L2/DRAM use (:mod:`arkgpu.predictor.utilisation`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from arkgpu.model.arrays import FloatArray
from arkgpu.model.gpus import REFERENCE_GPU, UnknownGpuModelError, gpu_model
from arkgpu.predictor.anchoring import anchored_curve
from arkgpu.predictor.confidence import PAIR_KINDS, Confidence, Support, interval
from arkgpu.predictor.config import PredictorConfig
from arkgpu.predictor.curves import SoloCurve
from arkgpu.predictor.fitting import fit_curves, fit_support, fit_utils
from arkgpu.predictor.groups import Group, as_groups
from arkgpu.predictor.guarding import Guard, fit_guard, pair_interval
from arkgpu.predictor.interference import Interference, Usage, feature_set_for
from arkgpu.predictor.pair_rows import POOLED, build_rows, fit_level2, measured_alone
from arkgpu.predictor.storing import read_predictor, write_predictor
from arkgpu.predictor.utilisation import UtilCurve
from arkgpu.predictor.workloads import UnknownModelError, Workload, check_query
from arkgpu.traces.profiles import (
    MpsRecord,
    PairRecord,
    SoloRecord,
    default_profile_dir,
    load_mps_profiles,
    load_pair_profiles,
    load_solo_profiles,
)

DEFAULT_GPU = REFERENCE_GPU
USAGE_MEMO = 4096
"""Level-2 usages remembered per predictor (:meth:`Predictor.usage`)."""


class Predictor:
    """Fitted two-level predictor; build with :meth:`fit` or :meth:`load`."""

    def __init__(
        self,
        curves: dict[tuple[str, str], SoloCurve],
        utils: dict[tuple[str, str, str], UtilCurve],
        interference: dict[tuple[str, str], Interference],
        config: PredictorConfig,
        pair_scales: dict[tuple[str, str, str], float] | None = None,
        support: dict[tuple[str, str], Support] | None = None,
        intervals: dict[str, tuple[float, float]] | None = None,
        guard: Guard | None = None,
    ) -> None:
        self.curves = curves
        self.utils = utils
        self.interference = interference
        self.config = config
        self.pair_scales = pair_scales or {}
        """Scale of the extra slowdown per (GPU, target model, co-runner model); default 1."""
        self.support = support or {}
        """Batch and share ranges each curve was fitted on (:mod:`arkgpu.predictor.confidence`)."""
        self.intervals = dict(intervals or config.intervals)
        """Log-ratio interval per kind of query; ``config.intervals`` unless calibrated."""
        self._usages: dict[tuple[Workload, str], Usage] = {}
        self.guard = guard or Guard({})
        """Level 2's weights and intervals per kind and region (:mod:`~.guarding`)."""

    @classmethod
    def fit(
        cls,
        solo: Sequence[SoloRecord],
        pairs: Sequence[PairRecord | MpsRecord | Group] = (),
        config: PredictorConfig | None = None,
    ) -> Predictor:
        """Fit level 1 on ``solo`` and level 2 on ``pairs`` (none: no interference).

        ``pairs`` may mix pair records, MPS group records and groups
        (:mod:`arkgpu.predictor.groups`)."""
        config = config or PredictorConfig()
        curves, utils = fit_curves(solo), fit_utils(solo)
        alone = measured_alone(solo)
        rows = build_rows(cls(curves, utils, {}, config), as_groups(pairs), alone)
        interference, scales = fit_level2(rows, config.pair_prior)
        guard = fit_guard(rows, config.pair_prior)
        return cls(curves, utils, interference, config, scales, fit_support(solo), None, guard)

    def _with(self, **changes: Any) -> Predictor:
        """A copy with some parts replaced (keyword names as in the constructor)."""
        parts: dict[str, Any] = {
            "curves": self.curves,
            "utils": self.utils,
            "interference": self.interference,
            "config": self.config,
            "pair_scales": self.pair_scales,
            "support": self.support,
            "intervals": self.intervals,
            "guard": self.guard,
        }
        parts.update(changes)
        return Predictor(**parts)

    def with_intervals(self, intervals: dict[str, tuple[float, float]]) -> Predictor:
        """A copy whose intervals are ``intervals`` (from :mod:`arkgpu.predictor.intervals`)."""
        return self._with(intervals={**self.intervals, **intervals})

    def confidence(
        self, model: str, batch: int, share: float, gpu: str = DEFAULT_GPU
    ) -> Confidence:
        """Level 1 with how sure it is: the kind of query, an interval and why not confident."""
        latency = self.latency_ms(model, batch, share, gpu)
        support = self.support.get((gpu, model))
        if (gpu, model) not in self.curves:
            source = next(g for g, m in self.curves if m == model)
            why = f"{model} never profiled on {gpu}: its {source} curve scaled by GPU speed"
            return interval(latency, "cross-gpu", [why], self.intervals)
        if support is None or support.borrowed:
            why = f"{model} on {gpu} predicted from one measured point and other models' curves"
            return interval(latency, "new-model", [why], self.intervals)
        outside = support.outside(batch, share)
        kind = "extrapolated" if outside else "measured-range"
        return interval(latency, kind, outside, self.intervals)

    def with_model(
        self, model: str, batch: int, share: float, latency_ms: float, gpu: str = DEFAULT_GPU
    ) -> Predictor:
        """A copy that also predicts ``model`` on ``gpu`` from one measured point.

        The new curve borrows its shape from the models profiled on ``gpu`` (all
        GPUs if none), rescaled through the point (:mod:`arkgpu.predictor.anchoring`).
        """
        check_query(batch, share)
        references = [c for (g, _), c in self.curves.items() if g == gpu] or list(
            self.curves.values()
        )
        curves = dict(self.curves)
        curves[(gpu, model)] = anchored_curve(references, batch, share, latency_ms)
        support = dict(self.support)
        support[(gpu, model)] = Support(batch, batch, share, share, 1, borrowed=True)
        return self._with(curves=curves, support=support)

    def models(self, gpu: str = DEFAULT_GPU) -> list[str]:
        """DNN models profiled on ``gpu``, sorted."""
        return sorted(model for g, model in self.curves if g == gpu)

    def knows(self, model: str) -> bool:
        """Whether ``model`` was profiled on any GPU (so that it can be predicted)."""
        return any(name == model for _, name in self.curves)

    def gpus(self) -> list[str]:
        """GPU models with at least one profiled DNN model, sorted."""
        return sorted({g for g, _ in self.curves})

    def speed_ratio(self, gpu: str, source: str) -> float:
        """How much faster ``gpu`` is than ``source``: the ratio of their ``config.gpu_speed``
        when both are listed, else of their SM counts (:mod:`arkgpu.model.gpus`)."""
        speeds = self.config.gpu_speed
        if gpu in speeds and source in speeds:
            return speeds[gpu] / speeds[source]
        try:
            return gpu_model(gpu).sm_count / gpu_model(source).sm_count
        except UnknownGpuModelError as exc:
            raise ValueError(str(exc.args[0])) from None

    def curve(self, model: str, gpu: str) -> tuple[SoloCurve, float]:
        """The curve that predicts ``model`` on ``gpu`` and the factor to scale shares by.

        A model profiled on ``gpu`` uses its own curve (factor 1). Otherwise the
        first GPU it was profiled on stands in, with shares scaled by the ratio
        of the two GPUs' speeds (config ``gpu_speed``): a share s of the target
        does the work of a share s * speed(gpu) / speed(source) of the source.
        """
        own = self.curves.get((gpu, model))
        if own is not None:
            return own, 1.0
        for source, name in self.curves:
            if name == model:
                return self.curves[(source, name)], self.speed_ratio(gpu, source)
        known = ", ".join(sorted({m for _, m in self.curves}))
        raise UnknownModelError(f"no profile for model {model!r} on any GPU (known: {known})")

    def latency_ms(self, model: str, batch: int, share: float, gpu: str = DEFAULT_GPU) -> float:
        """Level 1: latency in ms of one batch of ``model`` alone on ``share`` of ``gpu``."""
        check_query(batch, share)
        curve, factor = self.curve(model, gpu)
        return curve.latency_ms(batch, share * factor)

    def latency_ms_many(
        self,
        models: Sequence[str] | str,
        batches: Sequence[int] | NDArray[np.integer] | NDArray[np.floating],
        shares: Sequence[float] | NDArray[np.floating],
        gpu: str = DEFAULT_GPU,
    ) -> FloatArray:
        """Vectorised :meth:`latency_ms`: one latency per (model, batch, share) query."""
        batch = np.asarray(batches, dtype=np.float64)
        share = np.asarray(shares, dtype=np.float64)
        if batch.shape != share.shape:
            raise ValueError(f"{batch.shape[0]} batches but {share.shape[0]} shares")
        if batch.size and (batch.min() < 1 or share.min() <= 0 or share.max() > 1):
            raise ValueError("every batch must be >= 1 and every share in (0, 1]")
        if isinstance(models, str):
            curve, factor = self.curve(models, gpu)
            return curve.latency_ms_many(batch, share * factor)
        names, index = np.unique(np.asarray(models), return_inverse=True)
        if index.shape != batch.shape:
            raise ValueError(f"{index.shape[0]} models but {batch.shape[0]} batches")
        out = np.empty_like(batch)
        for i, name in enumerate(names):
            mask = index == i
            curve, factor = self.curve(str(name), gpu)
            out[mask] = curve.latency_ms_many(batch[mask], share[mask] * factor)
        return out

    def usage(self, workload: Workload, gpu: str = DEFAULT_GPU) -> Usage:
        """What level 2 uses of ``workload`` alone: share, activity, L2/DRAM use if measured.

        A pure function of its arguments for a fitted predictor, so the answer is
        remembered (up to :data:`USAGE_MEMO` of them; all forgotten when full): the
        placement and control loops ask about the same workloads again and again."""
        key = (workload, gpu)
        found = self._usages.get(key)
        if found is None:
            if len(self._usages) >= USAGE_MEMO:
                self._usages.clear()
            found = self._usages[key] = self._usage(workload, gpu)
        return found

    def forget(self) -> None:
        """Forget the remembered usages (to time queries never asked before)."""
        self._usages.clear()

    def _usage(self, workload: Workload, gpu: str) -> Usage:
        b, s = workload.batch, workload.share
        curve, factor = self.curve(workload.model, gpu)
        l2 = self.utils.get((gpu, workload.model, "l2"))
        dram = self.utils.get((gpu, workload.model, "dram"))
        activity, occupancy, duty = curve.level2_parts(b, s * factor)
        return Usage(
            share=s,
            activity=activity,
            occupancy=occupancy,
            duty=duty,
            l2=None if l2 is None else l2.util_pct(b, s) / 100.0,
            dram=None if dram is None else dram.util_pct(b, s) / 100.0,
        )

    def slowdown(
        self, target: Workload, corunners: Sequence[Workload], gpu: str = DEFAULT_GPU
    ) -> float:
        """Level 2: factor (>= 1) by which ``corunners`` stretch ``target``'s latency.

        The contention model's slowdown (:meth:`contention_slowdown`) shrunk
        towards 1 where cross-validation on the training pairs did not trust it
        (:mod:`arkgpu.predictor.guarding`)."""
        raw = self.contention_slowdown(target, corunners, gpu)
        return (
            self.guard.slowdown(self.pair_kind(target, corunners, gpu), raw, gpu)
            if corunners
            else raw
        )

    def pair_kind(self, target: Workload, corunners: Sequence[Workload], gpu: str) -> str:
        """``measured-pair`` when every (target, co-runner) model combination was measured on
        ``gpu`` in training, else ``new-pair``."""
        scales = self.pair_scales
        known = all((gpu, target.model, w.model) in scales for w in corunners)
        return PAIR_KINDS[0] if known else PAIR_KINDS[1]

    def pair_confidence(
        self, target: Workload, corunners: Sequence[Workload], gpu: str = DEFAULT_GPU
    ) -> Confidence:
        """Level 2 with how sure it is: co-located latency, its interval and kind.

        The interval is level 2's (calibrated out of fold, relative to level 1's
        latency alone) widened by level 1's own when that one is not confident."""
        raw = self.contention_slowdown(target, corunners, gpu)
        kind = self.pair_kind(target, corunners, gpu)
        alone = self.confidence(target.model, target.batch, target.share, gpu)
        slowdown = self.guard.slowdown(kind, raw, gpu) if corunners else raw
        widen = (0.0, 0.0) if alone.confident else self.intervals[alone.kind]
        return pair_interval(
            float(alone.latency_ms * slowdown), kind, self.guard.find(kind, raw, gpu), widen
        )

    def contention_slowdown(
        self, target: Workload, corunners: Sequence[Workload], gpu: str = DEFAULT_GPU
    ) -> float:
        """The contention model's slowdown before the guard.

        Uses the GPU's own fit when its pairs were measured, else the fit pooled
        over every GPU's pairs, else no interference (no pairs at all). Each
        co-runner's share of the slowdown is scaled by what pairs of the same two
        models measured on this GPU showed (``pair_scales``, 1 if never measured).
        The shipped pairs are MPS co-locations; workloads in different MIG
        instances do not share L2 or DRAM bandwidth and are not co-runners here.
        """
        mine, others, model = self._level2(target, corunners, gpu)
        if model is None:
            return 1.0
        extra = model.crowding(mine, others)
        for workload, usage in zip(corunners, others, strict=True):
            scale = self.pair_scales.get((gpu, target.model, workload.model), 1.0)
            extra += scale * model.extra(mine, usage)
        return 1.0 + extra

    def _level2(
        self, target: Workload, corunners: Sequence[Workload], gpu: str
    ) -> tuple[Usage, list[Usage], Interference | None]:
        mine = self.usage(target, gpu)
        others = [self.usage(w, gpu) for w in corunners]
        kind = feature_set_for(mine, others)
        model = self.interference.get((gpu, kind)) or self.interference.get((POOLED, kind))
        return mine, others, model

    def colocated_latency_ms(
        self, target: Workload, corunners: Sequence[Workload], gpu: str = DEFAULT_GPU
    ) -> float:
        """Latency in ms of ``target``'s batch while ``corunners`` share the GPU."""
        alone = self.latency_ms(target.model, target.batch, target.share, gpu)
        return alone * self.slowdown(target, corunners, gpu)

    def training_iteration_ms(
        self, model: str, batch: int, share: float, gpu: str = DEFAULT_GPU
    ) -> float:
        """Estimated time of one BE training iteration in ms (not measured).

        No training profiles exist: this is the profiled inference latency at
        the same batch and share times ``config.training_factor`` (forward +
        backward, see :class:`PredictorConfig`).
        """
        return self.config.training_factor * self.latency_ms(model, batch, share, gpu)

    def save(self, path: Path | str) -> None:
        """Write the fitted predictor to a versioned JSON file."""
        write_predictor(
            path,
            curves=self.curves,
            utils=self.utils,
            interference=self.interference,
            config=self.config,
            pair_scales=self.pair_scales,
            support=self.support,
            intervals=self.intervals,
            guard=self.guard,
        )

    @classmethod
    def load(cls, path: Path | str) -> Predictor:
        """Read a predictor written by :meth:`save`; a wrong version or corrupt file raises."""
        return cls(*read_predictor(path))


def default_predictor(config: PredictorConfig | None = None) -> Predictor:
    """A predictor fitted now on the canonical profiles shipped in the package.

    Fits iGniter's V100 solo and pair profiles and ParvaGPU's A100 solo profiles
    and MPS process groups (:func:`arkgpu.traces.profiles.default_profile_dir`);
    nothing is cached.
    """
    directory = default_profile_dir()
    groups: list[PairRecord | MpsRecord] = [*load_pair_profiles(directory)]
    groups += load_mps_profiles(directory)
    return Predictor.fit(load_solo_profiles(directory), groups, config)
