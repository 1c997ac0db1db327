"""Check of the simulator's MPS model against measured MPS data.

The co-location simulator's ``mps`` mode (:mod:`arkgpu.sim.colocation.modes.mps`)
assumes that under MPS defaults (no active-thread limit) the clients executing
at once split the SMs max-min fairly, each capped at its saturation share. For
``n`` identical clients that saturate the GPU this says each behaves like a
client with a static ``1 / n`` share. The alternative view, that every MPS
client may use all SMs and so runs as if alone on the whole GPU, predicts much
lower latencies for large batches. The ``mps`` baseline's results rest on which
view holds, so this module tests the assumption on measured data.

ParvaGPU's A100-80GB profiles (shipped as ``parvagpu_a100_solo.csv`` and
``parvagpu_a100_mps.csv``) hold, per model and batch, the latency of one
process alone on MIG instances of 1, 2, 3, 4 and 7 GPCs (share = GPCs / 7) and
the per-process latency of ``n`` = 2..5 identical processes sharing the whole
GPU under MPS. For every MPS row it compares the measured latency with

* ``fair_split_ms``: the solo latency at share ``1 / n``, interpolated linearly
  in ``1 / share`` between the two measured shares that bracket ``1 / n`` (an
  exact match is used as is; a row with no bracketing pair is skipped). With
  ``x = 1 / share``, ``L(n) = L_lo + (L_hi - L_lo) * (n - x_lo) / (x_hi - x_lo)``;
* ``whole_gpu_ms``: the solo latency on the whole GPU (share 1).

A median ``measured / fair_split`` near 1 with ``measured / whole_gpu`` well
above 1 supports the fair split. The MIG reference also isolates memory
bandwidth and L2 while MPS processes share them, so the ratio bundles the split
and any memory contention among the copies.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from itertools import pairwise
from typing import Any

import numpy as np

from arkgpu.traces.profiles import MpsRecord, SoloRecord

Curve = list[tuple[float, float]]
"""(share, latency_ms) points of one (GPU, model, batch), sorted by share."""


@dataclass(frozen=True, slots=True)
class MpsRow:
    """One MPS measurement beside the two predictions."""

    model: str
    """DNN model name."""
    batch: int
    """Batch size of every process."""
    processes: int
    """Number of identical MPS processes, ``n``."""
    measured_ms: float
    """Measured per-process batch latency in ms."""
    fair_split_ms: float
    """Solo latency at share ``1 / n`` (interpolated in ``1 / share``), ms."""
    whole_gpu_ms: float
    """Solo latency on the whole GPU, ms."""


@dataclass(frozen=True, slots=True)
class MpsSummary:
    """Ratios of measured to predicted latency over the rows of one ``n``."""

    processes: int
    """Number of identical MPS processes, ``n``."""
    count: int
    """Rows compared."""
    median: float
    """Median of measured / fair_split."""
    p10: float
    """10th percentile of measured / fair_split."""
    p90: float
    """90th percentile of measured / fair_split."""
    whole_gpu_median: float
    """Median of measured / whole_gpu."""


@dataclass(frozen=True, slots=True)
class MpsCheck:
    """Result of :func:`mps_fair_split_check`."""

    rows: tuple[MpsRow, ...]
    """Every MPS measurement that could be compared."""
    summaries: tuple[MpsSummary, ...]
    """One per ``n``, ascending."""
    skipped: int
    """MPS measurements left out: no bracketing solo shares or no whole-GPU solo latency."""


def _curves(solo: Sequence[SoloRecord]) -> dict[tuple[str, str, int], Curve]:
    points: dict[tuple[str, str, int], dict[float, float]] = defaultdict(dict)
    for record in solo:
        points[record.gpu, record.model, record.batch][record.share] = record.latency_ms
    return {key: sorted(by_share.items()) for key, by_share in points.items()}


def latency_at(curve: Curve, share: float) -> float | None:
    """Latency at ``share``: measured, or linear in ``1 / share`` between the bracketing
    measured shares; None when ``share`` is outside the measured range."""
    for s, latency in curve:
        if math.isclose(s, share):
            return latency
    for (s_lo, l_lo), (s_hi, l_hi) in pairwise(curve):
        if s_lo < share < s_hi:
            x_lo, x_hi = 1.0 / s_lo, 1.0 / s_hi
            return l_lo + (l_hi - l_lo) * (1.0 / share - x_lo) / (x_hi - x_lo)
    return None


def _row(record: MpsRecord, curve: Curve) -> MpsRow | None:
    fair = latency_at(curve, 1.0 / record.processes)
    whole = latency_at(curve, 1.0)
    if fair is None or whole is None:
        return None
    return MpsRow(record.model, record.batch, record.processes, record.latency_ms, fair, whole)


def _summary(processes: int, rows: Sequence[MpsRow]) -> MpsSummary:
    fair = np.array([r.measured_ms / r.fair_split_ms for r in rows])
    whole = np.array([r.measured_ms / r.whole_gpu_ms for r in rows])
    p10, median, p90 = (float(v) for v in np.percentile(fair, [10, 50, 90]))
    return MpsSummary(processes, len(rows), median, p10, p90, float(np.median(whole)))


def mps_fair_split_check(solo: Sequence[SoloRecord], mps: Sequence[MpsRecord]) -> MpsCheck:
    """Compare each MPS measurement with the fair-split and whole-GPU solo latencies."""
    curves = _curves(solo)
    rows: list[MpsRow] = []
    for record in mps:
        row = _row(record, curves.get((record.gpu, record.model, record.batch), []))
        if row is not None:
            rows.append(row)
    by_n: dict[int, list[MpsRow]] = defaultdict(list)
    for row in rows:
        by_n[row.processes].append(row)
    summaries = tuple(_summary(n, by_n[n]) for n in sorted(by_n))
    return MpsCheck(tuple(rows), summaries, len(mps) - len(rows))


def format_table(check: MpsCheck) -> str:
    """One line per ``n``: rows, measured / fair-split ratio quantiles, measured / whole-GPU."""
    lines = [
        "measured MPS latency / solo latency (ParvaGPU A100-80GB, n identical processes)",
        f"{'n':>3s}{'rows':>6s}{'fair median':>13s}{'fair p10':>10s}{'fair p90':>10s}"
        f"{'whole-GPU median':>18s}",
    ]
    for s in check.summaries:
        lines.append(
            f"{s.processes:3d}{s.count:6d}{s.median:13.3f}{s.p10:10.3f}{s.p90:10.3f}"
            f"{s.whole_gpu_median:18.3f}"
        )
    lines.append(f"skipped {check.skipped} rows without bracketing solo shares")
    return "\n".join(lines)


def to_json(check: MpsCheck) -> dict[str, Any]:
    """The check as a JSON-ready document (summaries, rows, skipped count)."""
    return {
        "summaries": [asdict(s) for s in check.summaries],
        "rows": [asdict(r) for r in check.rows],
        "skipped": check.skipped,
    }
