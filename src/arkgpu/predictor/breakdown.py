"""Level-2 held-out errors broken down by interference strength and by co-runner count.

Strength is the measured co-located latency over the latency alone (measured
where the solo profile has the same GPU, model, batch and share, else
level 1's prediction): iGniter's pairs sit near 1.1, ParvaGPU's MPS groups
near 1.3-2.2. A predictor can be good overall and poor where interference is
strong; the bins show it.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Sequence
from itertools import pairwise

import numpy as np

from arkgpu.model.arrays import FloatArray

STRENGTH_EDGES: tuple[float, ...] = (1.1, 1.25, 1.5, 2.0)
"""Upper edges of the strength bins; the first bin takes everything below 1.1
(including ratios below 1, measurement noise) and the last everything from 2.0."""
MIN_BIN_TARGETS = 30
"""Targets a bin needs before its error counts against the level-2 target (issue 27)."""


def _labels(edges: Sequence[float]) -> tuple[str, ...]:
    inner = [f"<{edges[0]:.2f}"] + [f"{a:.2f}-{b:.2f}" for a, b in pairwise(edges)]
    return (*inner, f">={edges[-1]:.2f}")


STRENGTH_LABELS = _labels(STRENGTH_EDGES)
"""Every strength bin's label, weakest first (``<1.10``, ``1.10-1.25``, ..., ``>=2.00``)."""


def strength_label(ratio: float) -> str:
    """Bin label of a co-located / solo ratio, such as ``1.10-1.25`` (level 2 asks it on
    every prediction, hence a bisection over precomputed labels)."""
    return STRENGTH_LABELS[bisect_right(STRENGTH_EDGES, ratio)]


def strength_labels() -> list[str]:
    """Every strength bin's label, weakest first."""
    return list(STRENGTH_LABELS)


def corunner_label(count: int) -> str:
    """Bin label of a co-runner count."""
    return f"{count} co-runner" + ("" if count == 1 else "s")


def bin_errors(
    errors: Sequence[float], keys: Sequence[object], label: Callable[[object], str]
) -> dict[str, FloatArray]:
    """Errors grouped by ``label(key)``, in first-seen order."""
    out: dict[str, list[float]] = {}
    for error, key in zip(errors, keys, strict=True):
        out.setdefault(label(key), []).append(error)
    return {name: np.asarray(values, dtype=np.float64) for name, values in out.items()}
