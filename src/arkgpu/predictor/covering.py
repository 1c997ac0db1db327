"""How many held-out level-2 targets fall inside their 90% interval, by bin and by repeat.

A bin of about a hundred held-out targets (two per pair, whose errors go
together) moves by several points from one random split to the next, so
``arkgpu predictor eval --repeats N`` pools the targets of N random splits and
also reports each bin's lowest and highest coverage among the splits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from arkgpu.model.arrays import FloatArray, IntArray
from arkgpu.predictor.breakdown import MIN_BIN_TARGETS, strength_label, strength_labels


@dataclass(frozen=True)
class Coverage:
    """How many held-out targets fell inside their 90% interval."""

    coverage: float | None
    """Fraction inside (None: no target)."""
    count: int
    lowest: float | None = None
    """Lowest fraction inside among the repeats whose bin held at least
    :data:`~arkgpu.predictor.breakdown.MIN_BIN_TARGETS` targets (None: one repeat, or none such)."""
    highest: float | None = None
    """Highest such fraction."""

    def to_dict(self) -> dict[str, float | int | None]:
        """JSON-ready values."""
        return {
            "coverage": self.coverage,
            "count": self.count,
            "lowest": self.lowest,
            "highest": self.highest,
        }


def _spread(inside: FloatArray, repeats: IntArray) -> tuple[float | None, float | None]:
    """Lowest and highest coverage among the repeats holding enough of these targets."""
    labels, counts = np.unique(repeats, return_counts=True)
    if len(labels) < 2:
        return None, None
    enough = labels[counts >= MIN_BIN_TARGETS]
    each = [float(inside[repeats == r].mean()) for r in enough]
    return (min(each), max(each)) if each else (None, None)


def _rows(keys: Sequence[str]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for row, key in enumerate(keys):
        out.setdefault(key, []).append(row)
    return out


def coverage_tables(
    inside: Sequence[bool], strengths: Sequence[float], kinds: Sequence[str], repeats: Sequence[int]
) -> dict[str, dict[str, Coverage]]:
    """Coverage by strength bin (weakest first) and by kind, pooled over repeats."""
    flags = np.asarray(inside, dtype=np.float64)
    tags = np.asarray(repeats, dtype=np.int64)

    def pooled(rows: list[int]) -> Coverage:
        lowest, highest = _spread(flags[rows], tags[rows])
        return Coverage(float(flags[rows].mean()), len(rows), lowest, highest)

    bins = _rows([strength_label(float(r)) for r in strengths])
    order = {label: i for i, label in enumerate(strength_labels())}
    return {
        "strength": {k: pooled(bins[k]) for k in sorted(bins, key=order.__getitem__)},
        "kind": {k: pooled(rows) for k, rows in sorted(_rows(kinds).items())},
    }
