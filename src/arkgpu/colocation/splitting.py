"""From the LC shares the control law wants to a GPU's split, in basis points.

The adjustment unit computes each LC service's share as a fraction (inside
its formulas). :func:`split_gpu` turns those into the split of one GPU, the
only place where the control loop converts a fraction to basis points
(through :func:`arkgpu.model.shares.share_bp`):

* each LC share is rounded to basis points and lifted to ``min_lc_bp``;
* if the LC shares add up to more than the GPU, they are scaled down in
  proportion to exactly the whole GPU (:func:`apportion`, largest remainders;
  none under the floor), so that BE work gets nothing;
* the rest of the GPU goes to the BE jobs in equal parts; the basis points
  that do not divide go one each to the first jobs.

So the shares of a GPU never add up to more than :data:`SHARE_FULL_BP`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from arkgpu.model.shares import SHARE_FULL_BP, share_bp


@dataclass(frozen=True)
class ShareSplit:
    """Compute shares decided for the pods of one GPU, basis points."""

    lc_bp: dict[str, int]
    """Share per LC service (basis points)."""
    be_bp: dict[str, int]
    """Share per BE job (basis points)."""


def equal_parts(total: int, n: int) -> list[int]:
    """``total`` cut into ``n`` integer parts that differ by at most one (larger ones first)."""
    if n <= 0:
        return []
    part, left = divmod(total, n)
    return [part + (1 if i < left else 0) for i in range(n)]


def split_gpu(
    lc: Mapping[str, float],
    bes: Sequence[str],
    min_lc_bp: int = 100,
    capacity_bp: int = SHARE_FULL_BP,
) -> ShareSplit:
    """The split of one GPU: LC services at the ``lc`` fractions wanted, BE jobs the rest.

    ``capacity_bp``: what the split may hand out, basis points (the whole GPU less the
    shares of containers the loop does not adjust, :attr:`GpuObservations.reserved_bp`)."""
    capacity = max(0, min(capacity_bp, SHARE_FULL_BP))
    lc_bp = {name: max(share_bp(min(1.0, f)), min_lc_bp) for name, f in lc.items()}
    total = sum(lc_bp.values())
    if total > capacity and lc_bp:
        lc_bp = _fit(lc_bp, min_lc_bp, capacity)
        total = sum(lc_bp.values())
    parts = equal_parts(max(capacity - total, 0), len(bes))
    return ShareSplit(lc_bp, dict(zip(bes, parts, strict=True)))


def _fit(wanted: dict[str, int], min_lc_bp: int, capacity: int = SHARE_FULL_BP) -> dict[str, int]:
    """``wanted`` scaled to exactly ``capacity``, in proportion.

    A share that would fall under the floor (``min_lc_bp``, or an equal part of the
    capacity when that is smaller) is held at the floor, and the others share what is left.
    """
    floor = min(min_lc_bp, capacity // len(wanted))
    held: set[str] = set()
    while True:
        free = {k: v for k, v in wanted.items() if k not in held}
        parts = apportion(free, capacity - floor * len(held))
        low = {k for k, v in parts.items() if v < floor}
        if not low:
            return {k: parts.get(k, floor) for k in wanted}
        held |= low


def apportion(weights: dict[str, int], amount: int) -> dict[str, int]:
    """``amount`` cut in proportion to ``weights``, exactly (equal parts when all are 0).

    Largest remainders: each gets its part rounded down, and the points left go
    one each to the largest fractional parts (the first on a tie).
    """
    total = sum(weights.values())
    if total <= 0:
        return dict(zip(weights, equal_parts(amount, len(weights)), strict=True))
    parts = {k: w * amount // total for k, w in weights.items()}
    short = amount - sum(parts.values())
    for k in sorted(weights, key=lambda k: -(weights[k] * amount % total))[:short]:
        parts[k] += 1
    return parts
