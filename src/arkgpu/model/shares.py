"""Compute share of a GPU: one unit end to end.

Every compute share that crosses a module boundary (a level-2 split, the
adjustment unit's output, a container's limits, the control region the C
library reads) is an integer number of basis points of one GPU:
:data:`SHARE_FULL_BP` is the whole GPU. Policies that compute with fractions
convert once, here.
"""

from __future__ import annotations

#: A whole GPU, in basis points (the control region's ``share_bp``).
SHARE_FULL_BP = 10_000


def share_bp(fraction: float) -> int:
    """``fraction`` of a GPU (0..1) in basis points, rounded to the nearest."""
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"compute share must be within 0..1 of a GPU, got {fraction!r}")
    return round(fraction * SHARE_FULL_BP)


def share_fraction(bp: int) -> float:
    """Basis points of a GPU as a fraction (0..1)."""
    check_share_bp(bp, "share_bp")
    return bp / SHARE_FULL_BP


def share_percent(bp: int) -> float:
    """Basis points of a GPU as a percentage, for people."""
    return share_fraction(bp) * 100.0


def check_share_bp(bp: object, name: str) -> int:
    """``bp`` if it is an integer within 0..SHARE_FULL_BP; else a ValueError naming ``name``."""
    if isinstance(bp, bool) or not isinstance(bp, int) or not 0 <= bp <= SHARE_FULL_BP:
        raise ValueError(
            f"{name} must be an integer within 0..{SHARE_FULL_BP} basis points, got {bp!r}"
        )
    return bp
