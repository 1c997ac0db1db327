"""Ground truth of the co-location simulator: measured latencies, interpolated.

The simulator never asks the fitted predictor how long a batch takes; it asks
this module, which only interpolates measurements (iGniter, V100, TensorRT,
MPS active-thread percentages; the repository's ``data/profiles/igniter_v100``):

* solo latency ``L(model, batch, share)``: the measured table (batch 1..32,
  shares 0.2..0.8; 0.1 and 1.0 measured at batch 1 only, filled for other
  batches from ``a + c / share`` least-squares fitted to the batch's
  measured shares) made monotone (latency non-increasing in share, cumulative
  minimum; non-decreasing in batch, cumulative maximum), interpolated linearly
  in ``1/share`` between measured shares. Below the smallest measured share
  latency scales as ``1/share``; above batch 32 it grows linearly with batch.
* interference: for a victim ``v`` co-located with an aggressor ``g``, the
  measured pair latency divided by ``v``'s solo latency at the same batch and
  share, clipped at 1. It is interpolated linearly in ``log2(batch)`` of both
  and in the victim's share; outside the measured grid the nearest edge is
  used. Pairs of the same model (not measured) take the mean factor of the
  victim against its measured partners. Several co-runners add their excess
  slowdowns: ``1 + sum(f_i - 1)`` (an assumption; iGniter measured pairs only).
* noise: each batch latency is multiplied by ``1 + cv * z`` (``z`` standard
  normal, floored at 0.5), where ``cv`` is the model's median measured
  ``std / latency`` over the pair measurements.
* training (BE): one iteration takes ``training_factor`` times the inference
  latency of the same model and batch (forward + backward is about 3x a
  forward pass; no training profiles are shipped). A training job interferes
  like an inference client of the same model and batch.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

PAIR_BATCHES = (2, 4, 8, 16, 32)
"""Batch sizes of the measured pairs (iGniter)."""
MAX_BATCH = 32
"""Largest measured batch; beyond it latency grows linearly with batch."""


class SoloLike(Protocol):
    """The fields of a solo profile record this module reads."""

    @property
    def model(self) -> str: ...
    @property
    def batch(self) -> int: ...
    @property
    def share(self) -> float: ...
    @property
    def latency_ms(self) -> float: ...


class PairLike(Protocol):
    """The fields of a pair profile record this module reads."""

    @property
    def model_a(self) -> str: ...
    @property
    def batch_a(self) -> int: ...
    @property
    def share_a(self) -> float: ...
    @property
    def model_b(self) -> str: ...
    @property
    def batch_b(self) -> int: ...
    @property
    def latency_a_ms(self) -> float: ...
    @property
    def latency_b_ms(self) -> float: ...
    @property
    def std_a_ms(self) -> float | None: ...
    @property
    def std_b_ms(self) -> float | None: ...


@dataclass(frozen=True)
class _SoloTable:
    inv_shares: tuple[float, ...]
    """``1/share`` of the measured shares, ascending (so shares descending)."""
    latency: NDArray[np.float64]
    """Latency (ms), shape (MAX_BATCH, len(inv_shares)), columns in ``inv_shares`` order."""
    rows: tuple[tuple[float, ...], ...] = ()
    """The same as Python floats (fast scalar look-ups)."""


def _solo_tables(records: Iterable[SoloLike]) -> dict[str, _SoloTable]:
    by_model: dict[str, dict[tuple[int, float], float]] = {}
    for r in records:
        by_model.setdefault(r.model, {})[(int(r.batch), round(float(r.share), 4))] = r.latency_ms
    tables = {}
    for model, points in by_model.items():
        shares = sorted({s for _, s in points})
        grid = np.full((MAX_BATCH, len(shares)), np.nan)
        for (batch, share), lat in points.items():
            if 1 <= batch <= MAX_BATCH:
                grid[batch - 1, shares.index(share)] = lat
        grid = _fill_rows(model, grid, np.array(shares))
        grid = np.minimum.accumulate(grid, axis=1)  # more share is never slower
        grid = np.maximum.accumulate(grid, axis=0)  # a larger batch is never faster
        flipped = grid[:, ::-1].copy()
        rows = tuple(tuple(float(v) for v in r) for r in flipped)
        tables[model] = _SoloTable(tuple(1.0 / s for s in reversed(shares)), flipped, rows)
    return tables


def _fill_rows(model: str, grid: NDArray[np.float64], shares: NDArray[np.float64]) -> Any:
    """Fill unmeasured cells of each batch row from ``a + c / share`` fitted to the row."""
    for row in grid:
        known = ~np.isnan(row)
        if known.sum() < 2:
            raise ValueError(f"solo profile of {model!r}: a batch has fewer than 2 measured shares")
        design = np.stack([np.ones(known.sum()), 1.0 / shares[known]], axis=1)
        (a, c), *_ = np.linalg.lstsq(design, row[known], rcond=None)
        a, c = max(float(a), 0.0), max(float(c), 0.0)
        row[~known] = a + c / shares[~known]
    return grid


class GroundTruth:
    """Measured batch latency under sharing (see the module docstring for the rules)."""

    def __init__(
        self,
        solo: Sequence[SoloLike],
        pairs: Sequence[PairLike],
        training_factor: float = 3.0,
        interference_scale: float = 1.0,
    ) -> None:
        self._solo = _solo_tables(solo)
        self.training_factor = training_factor
        """Training iteration time over inference batch latency (forward + backward)."""
        self.interference_scale = interference_scale
        """Co-located latency over what the measured pairs give (1: as measured); see
        :meth:`slowdown`. A stress setting: the predictor is fitted on the pairs as
        measured, so above 1 the truth has stronger interference than it saw."""
        factors, self._cv = _pair_factors(self, pairs)
        self._factors: dict[tuple[str, str], list[list[list[float]]]] = {
            k: v.tolist() for k, v in factors.items()
        }
        self._sat_cache: dict[tuple[str, int], float] = {}

    def models(self) -> list[str]:
        """Models with a solo profile."""
        return sorted(self._solo)

    def latency_ms(self, model: str, batch: int, share: float) -> float:
        """Solo batch latency (ms) of ``model`` at ``batch`` with compute ``share`` in (0, 1]."""
        table = self._solo.get(model)
        if table is None:
            raise KeyError(f"no measured profile for model {model!r} (have {self.models()})")
        scale = 1.0
        if batch > MAX_BATCH:
            scale, batch = batch / MAX_BATCH, MAX_BATCH
        row = table.rows[max(batch, 1) - 1]
        xs = table.inv_shares
        x = 1.0 / min(max(share, 1e-3), 1.0)
        if x >= xs[-1]:
            return scale * row[-1] * x / xs[-1]
        i = bisect.bisect_right(xs, x) - 1
        w = (x - xs[i]) / (xs[i + 1] - xs[i])
        return scale * (row[i] * (1.0 - w) + row[i + 1] * w)

    def saturation_share(self, model: str, batch: int) -> float:
        """Smallest share within 5% of the whole-GPU latency: what the batch can use."""
        key = (model, batch)
        if key not in self._sat_cache:
            full = self.latency_ms(model, batch, 1.0)
            grid = np.arange(0.05, 1.0001, 0.05)
            ok = [s for s in grid if self.latency_ms(model, batch, float(s)) <= 1.05 * full]
            self._sat_cache[key] = float(ok[0])
        return self._sat_cache[key]

    def factor(
        self, victim: str, batch: int, share: float, aggressor: str, agg_batch: int
    ) -> float:
        """Slowdown (>= 1) of ``victim`` at (batch, share) caused by one active ``aggressor``."""
        table = self._factors.get((victim, aggressor))
        if table is None:
            table = self._factors.get((victim, "*"))
            if table is None:
                return 1.0
        row = table[min(batch, MAX_BATCH) - 1][min(agg_batch, MAX_BATCH) - 1]
        xs = _PAIR_SHARE_LIST
        if share <= xs[0]:
            return row[0]
        if share >= xs[-1]:
            return row[-1]
        i = bisect.bisect_right(xs, share) - 1
        w = (share - xs[i]) / (xs[i + 1] - xs[i])
        return row[i] * (1.0 - w) + row[i + 1] * w

    def slowdown(
        self, victim: str, batch: int, share: float, corunners: Iterable[tuple[str, int, float]]
    ) -> float:
        """``1 + sum(w * (f - 1))`` over co-runners ``(model, batch, weight)``; weight in [0, 1].

        With ``interference_scale`` ``k`` != 1 the result is multiplied by
        ``1 + (k - 1) * min(1, sum(w))``: ``k`` times the measured co-located
        latency while some co-runner executes, in proportion below a whole one.
        """
        total, weights = 1.0, 0.0
        for model, agg_batch, weight in corunners:
            total += weight * (self.factor(victim, batch, share, model, agg_batch) - 1.0)
            weights += weight
        k = self.interference_scale
        if k != 1.0 and weights > 0:
            total *= 1.0 + (k - 1.0) * min(1.0, weights)
        return total

    def noise_cv(self, model: str) -> float:
        """Measured relative standard deviation of ``model``'s batch latency."""
        return self._cv.get(model, 0.02)

    def sample(self, latency_ms: float, model: str, rng: np.random.Generator) -> float:
        """``latency_ms`` with the model's measured noise applied."""
        return latency_ms * max(0.5, 1.0 + self.noise_cv(model) * rng.standard_normal())

    def training_iteration_ms(self, model: str, batch: int, share: float) -> float:
        """Time (ms) of one training iteration (see ``training_factor``)."""
        return self.training_factor * self.latency_ms(model, batch, share)


_PAIR_SHARE_LIST = (0.2, 0.4, 0.5, 0.6, 0.8)
"""Victim shares of the measured pairs (iGniter splits 20/80 .. 80/20)."""
_PAIR_SHARES = np.array(_PAIR_SHARE_LIST)


def _log2_weights(batch: int) -> tuple[int, int, float]:
    """Bracketing indices into PAIR_BATCHES and the weight of the upper one."""
    x = min(max(math.log2(batch), 1.0), 5.0)
    lo = min(math.floor(x) - 1, 3)
    return lo, lo + 1, x - (lo + 1)


def _pair_factors(
    truth: GroundTruth, pairs: Sequence[PairLike]
) -> tuple[dict[tuple[str, str], NDArray[np.float64]], dict[str, float]]:
    grids: dict[tuple[str, str], NDArray[np.float64]] = {}
    cvs: dict[str, list[float]] = {}
    n_b, n_s = len(PAIR_BATCHES), len(_PAIR_SHARES)
    for p in pairs:
        sides = (
            (p.model_a, p.batch_a, p.share_a, p.model_b, p.batch_b, p.latency_a_ms, p.std_a_ms),
            (
                p.model_b,
                p.batch_b,
                1.0 - p.share_a,
                p.model_a,
                p.batch_a,
                p.latency_b_ms,
                p.std_b_ms,
            ),
        )
        for victim, vb, vs, agg, ab, lat, std in sides:
            if vb not in PAIR_BATCHES or ab not in PAIR_BATCHES:
                continue
            grid = grids.setdefault((victim, agg), np.full((n_b, n_b, n_s), np.nan))
            k = int(np.argmin(np.abs(_PAIR_SHARES - vs)))
            solo = truth.latency_ms(victim, vb, float(_PAIR_SHARES[k]))
            grid[PAIR_BATCHES.index(vb), PAIR_BATCHES.index(ab), k] = max(1.0, lat / solo)
            if std is not None and lat > 0:
                cvs.setdefault(victim, []).append(std / lat)
    return _expand(grids), {m: float(np.median(v)) for m, v in cvs.items()}


def _fill(grid: NDArray[np.float64]) -> NDArray[np.float64]:
    """Replace unmeasured cells by the mean of the measured ones (1 when none)."""
    mean = float(np.nanmean(grid)) if not np.isnan(grid).all() else 1.0
    return np.where(np.isnan(grid), mean, grid)


def _expand(
    grids: dict[tuple[str, str], NDArray[np.float64]],
) -> dict[tuple[str, str], NDArray[np.float64]]:
    """Interpolate each (victim, aggressor) grid to every batch 1..32 of both sides."""
    out: dict[tuple[str, str], NDArray[np.float64]] = {}
    weights = [_log2_weights(b) for b in range(1, MAX_BATCH + 1)]
    by_victim: dict[str, list[NDArray[np.float64]]] = {}
    for key, raw in grids.items():
        grid = _fill(raw)
        full = np.empty((MAX_BATCH, MAX_BATCH, grid.shape[2]))
        for i, (vl, vh, vw) in enumerate(weights):
            v_row = grid[vl] * (1 - vw) + grid[vh] * vw
            for j, (al, ah, aw) in enumerate(weights):
                full[i, j] = v_row[al] * (1 - aw) + v_row[ah] * aw
        out[key] = full
        by_victim.setdefault(key[0], []).append(full)
    for victim, tables in by_victim.items():
        out[(victim, "*")] = np.mean(tables, axis=0)
    return out
