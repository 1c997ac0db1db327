"""Level-2 held-out errors broken down by interference strength and by co-runner count.

Strength is the measured co-located latency over the latency alone (measured
where the solo profile has the same GPU, model, batch and share, else
level 1's prediction): iGniter's pairs sit near 1.1, ParvaGPU's MPS groups
near 1.3-2.2. A predictor can be good overall and poor where interference is
strong; the bins show it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from arkgpu.model.arrays import FloatArray

STRENGTH_EDGES: tuple[float, ...] = (1.1, 1.25, 1.5, 2.0)
"""Upper edges of the strength bins; the first bin takes everything below 1.1
(including ratios below 1, measurement noise) and the last everything from 2.0."""
MIN_BIN_TARGETS = 30
"""Targets a bin needs before its error counts against the level-2 target (issue 27)."""


def strength_label(ratio: float) -> str:
    """Bin label of a co-located / solo ratio, such as ``1.10-1.25``."""
    low = None
    for edge in STRENGTH_EDGES:
        if ratio < edge:
            return f"<{edge:.2f}" if low is None else f"{low:.2f}-{edge:.2f}"
        low = edge
    return f">={STRENGTH_EDGES[-1]:.2f}"


def strength_labels() -> list[str]:
    """Every strength bin's label, weakest first."""
    probes = [0.0, *STRENGTH_EDGES]
    return [strength_label(p) for p in probes]


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
