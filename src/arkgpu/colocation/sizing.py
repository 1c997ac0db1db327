"""Level-2 split: the smallest compute share that keeps an LC service inside its target.

Pure code over the fitted predictor (never the simulator's ground truth). An
LC service runs a dynamic batcher in front of one model instance. With batch
``b`` on share ``s`` a batch takes ``L(b, s) * d`` ms, where ``L`` is the
predictor's level-1 latency and ``d >= 1`` its level-2 slowdown from the
co-runners. A share ``s`` is enough for request rate ``lambda`` (requests/s)
when some ``b <= max_batch`` satisfies both

* throughput: ``1000 * b / (L(b, s) * d) >= margin * lambda`` (the executor
  keeps up with ``margin`` to spare for Poisson bursts), and
* latency: ``q + 2 * L(b, s) * d <= headroom * target`` (a request waits at
  most the batcher's queue delay ``q``, the batch already running, and its own
  batch; ``headroom`` < 1 leaves room for the predictor's error and noise).

Both sides grow with ``b``, so the smallest ``b`` meeting the throughput bound
is the one to check. The required share is the smallest grid share that
passes; the rest of the GPU goes to BE work.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from arkgpu.model.gpus import REFERENCE_GPU
from arkgpu.predictor import Workload
from arkgpu.predictor.confidence import Confidence


class PerformanceModel(Protocol):
    """What the policies ask of a predictor (:class:`arkgpu.predictor.Predictor` fits)."""

    def latency_ms(self, model: str, batch: int, share: float, gpu: str = ...) -> float:
        """Level 1: batch latency alone on ``share`` of ``gpu``."""
        ...

    def colocated_latency_ms(
        self, target: Workload, corunners: Sequence[Workload], gpu: str = ...
    ) -> float:
        """Level 2: batch latency with ``corunners`` on the same GPU."""
        ...


@dataclass(frozen=True)
class BiasedPredictor:
    """A predictor whose every latency is multiplied by ``factor`` (sensitivity runs).

    ``factor`` 0.9 makes the policy believe work is 10% faster than the
    predictor says (optimistic, the dangerous side); 1.1 pessimistic.
    """

    base: PerformanceModel
    """The predictor wrapped."""
    factor: float
    """Multiplier applied to every prediction."""

    def latency_ms(self, model: str, batch: int, share: float, gpu: str = REFERENCE_GPU) -> float:
        """Level 1 times ``factor``."""
        return self.factor * self.base.latency_ms(model, batch, share, gpu)

    def colocated_latency_ms(
        self, target: Workload, corunners: Sequence[Workload], gpu: str = REFERENCE_GPU
    ) -> float:
        """Level 2 times ``factor``."""
        return self.factor * self.base.colocated_latency_ms(target, corunners, gpu)


@dataclass(frozen=True)
class CorrectedPredictor:
    """A predictor whose latencies of a model are multiplied by that model's factor
    (online calibration's corrections, :func:`arkgpu.colocation.calibration.model_factors`)."""

    base: PerformanceModel
    """The predictor wrapped."""
    factors: tuple[tuple[str, float], ...]
    """(model, factor) pairs; a model not listed keeps factor 1."""

    def _factor(self, model: str) -> float:
        return dict(self.factors).get(model, 1.0)

    def latency_ms(self, model: str, batch: int, share: float, gpu: str = REFERENCE_GPU) -> float:
        """Level 1 times the model's factor."""
        return self._factor(model) * self.base.latency_ms(model, batch, share, gpu)

    def colocated_latency_ms(
        self, target: Workload, corunners: Sequence[Workload], gpu: str = REFERENCE_GPU
    ) -> float:
        """Level 2 times the target model's factor."""
        scale = self._factor(target.model)
        return scale * self.base.colocated_latency_ms(target, corunners, gpu)


@dataclass(frozen=True)
class SizingConfig:
    """How conservatively shares are sized."""

    headroom: float = 0.8
    """Predicted worst-case latency must stay under this fraction of the target:
    20% is left for the predictor's error (a few % MAPE), the measured noise
    (1-3% std) and batches larger than planned under Poisson bursts."""
    load_margin: float = 1.2
    """The executor must serve this multiple of the request rate: a Poisson
    stream's short-term rate exceeds its mean; 1.2 keeps queues short at the
    rates of the shipped scenarios."""
    min_share: float = 0.05
    """Smallest share handed to an LC service (MPS takes whole percent)."""
    share_step: float = 0.01
    """Grid of shares searched (1% = one MPS active-thread percent)."""


@dataclass(frozen=True)
class LcDemand:
    """What the split needs to know about an LC service now."""

    model: str
    """DNN model."""
    target_ms: float
    """p99 latency target (ms)."""
    rate_rps: float
    """Request rate to size for (requests/s)."""
    max_batch: int = 32
    """Largest batch the batcher forms."""
    max_queue_delay_ms: float = 2.0
    """Batcher's queue delay (ms)."""

    def at_rate(self, rate_rps: float) -> LcDemand:
        """The same service at another request rate."""
        return replace(self, rate_rps=rate_rps)


@dataclass
class ShareSizer:
    """Finds required shares from a latency table per model, built once from the predictor."""

    predictor: PerformanceModel
    """The fitted predictor (or a wrapper of it)."""
    gpu: str = REFERENCE_GPU
    """GPU model asked about."""
    config: SizingConfig = field(default_factory=SizingConfig)
    """Sizing settings."""
    memo_size: int = 4096
    """Slowdowns remembered (:meth:`slowdown`): the control loop asks the same
    question each period while the shares on a GPU do not change; 4096 covers
    a node of 8 GPUs with 8 containers each many times over."""
    _tables: dict[tuple[str, int], NDArray[np.float64]] = field(default_factory=dict, repr=False)
    _slowdowns: dict[tuple[Workload, tuple[Workload, ...]], float] = field(
        default_factory=dict, repr=False
    )
    _plans: dict[tuple[LcDemand, float], tuple[float, int] | None] = field(
        default_factory=dict, repr=False
    )

    @property
    def shares(self) -> NDArray[np.float64]:
        """The share grid, ascending."""
        c = self.config
        return np.round(np.arange(c.min_share, 1.0 + 1e-9, c.share_step), 6)

    def table(self, model: str, max_batch: int) -> NDArray[np.float64]:
        """Predicted latency (ms), shape (max_batch, len(shares)); row b-1 is batch b."""
        key = (model, max_batch)
        if key not in self._tables:
            shares = self.shares
            rows = [
                [self.predictor.latency_ms(model, b, float(s), self.gpu) for s in shares]
                for b in range(1, max_batch + 1)
            ]
            self._tables[key] = np.asarray(rows)
        return self._tables[key]

    def plan(self, demand: LcDemand, slowdown: float = 1.0) -> tuple[float, int] | None:
        """(smallest sufficient share, batch it runs) or None if even the whole GPU fails.

        Remembered like :meth:`slowdown` (a service whose rate holds asks again).
        """
        key = (demand, slowdown)
        if key in self._plans:
            return self._plans[key]
        found = self._plan(demand, slowdown)
        _remember(self._plans, key, found, self.memo_size)
        return found

    def _plan(self, demand: LcDemand, slowdown: float) -> tuple[float, int] | None:
        lat = self.table(demand.model, demand.max_batch) * slowdown
        batches = np.arange(1, demand.max_batch + 1)[:, None]
        need = self.config.load_margin * demand.rate_rps / 1000.0
        fast = batches / lat >= need
        first = np.argmax(fast, axis=0)
        chosen = lat[first, np.arange(lat.shape[1])]
        limit = self.config.headroom * demand.target_ms - demand.max_queue_delay_ms
        ok = fast.any(axis=0) & (2.0 * chosen <= limit)
        if not ok.any():
            return None
        j = int(np.argmax(ok))
        return float(self.shares[j]), int(first[j]) + 1

    def required_share(self, demand: LcDemand, slowdown: float = 1.0) -> float | None:
        """Smallest grid share meeting ``demand`` (see the module docstring), None if none."""
        found = self.plan(demand, slowdown)
        return None if found is None else found[0]

    def slowdown(self, target: Workload, corunners: Sequence[Workload]) -> float:
        """Predicted level-2 slowdown (>= 1) of ``target`` next to ``corunners``.

        A pure function of its arguments for a given predictor, so the answer is
        remembered (up to ``memo_size`` of them; all forgotten when full).
        """
        if not corunners:
            return 1.0
        key = (target, tuple(corunners))
        found = self._slowdowns.get(key)
        if found is None:
            alone = self.predictor.latency_ms(target.model, target.batch, target.share, self.gpu)
            both = self.predictor.colocated_latency_ms(target, corunners, self.gpu)
            found = max(1.0, both / alone)
            _remember(self._slowdowns, key, found, self.memo_size)
        return found

    # --- Headroom for unsure predictions (issue 27; used by the level-1 LC check) ---
    def doubt(self, target: Workload) -> float:
        """How much longer than predicted ``target`` may plausibly run: the upper end of the
        predictor's interval over its prediction when it is not confident, else 1."""
        if not isinstance(self.predictor, KnowsConfidence):
            return 1.0
        answer = self.predictor.confidence(target.model, target.batch, target.share, self.gpu)
        return 1.0 if answer.confident else answer.upper_ratio

    def pair_doubt(self, target: Workload, corunners: Sequence[Workload]) -> float:
        """How much longer than predicted ``target`` may plausibly run next to ``corunners``:
        the upper end of level 2's interval over its prediction when the model combination
        was never measured together (issue 35), else :meth:`doubt`."""
        alone = self.doubt(target)
        if not corunners or not isinstance(self.predictor, KnowsPairConfidence):
            return alone
        answer = self.predictor.pair_confidence(target, corunners, self.gpu)
        return alone if answer.confident else max(alone, answer.upper_ratio)


@runtime_checkable
class KnowsPairConfidence(Protocol):
    """A predictor that says how sure its level-2 prediction is
    (:meth:`arkgpu.predictor.Predictor.pair_confidence`)."""

    def pair_confidence(
        self, target: Workload, corunners: Sequence[Workload], gpu: str = ...
    ) -> Confidence:
        """Co-located latency with its kind and interval."""
        ...


@runtime_checkable
class KnowsConfidence(Protocol):
    """A predictor that says how sure it is (:meth:`arkgpu.predictor.Predictor.confidence`)."""

    def confidence(self, model: str, batch: int, share: float, gpu: str = ...) -> Confidence:
        """Level 1 with its kind, interval and reasons."""
        ...


def _remember(memo: dict[Any, Any], key: object, value: object, size: int) -> None:
    """``memo[key] = value``, forgetting everything first when ``memo`` holds ``size``."""
    if len(memo) >= size:
        memo.clear()
    memo[key] = value
