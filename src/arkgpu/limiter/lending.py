"""Idle-share lending, the node side (docs/LIMITER.md, Lending).

A best-effort (BE) container's limits give each lender k a lent share
(:attr:`arkgpu.limiter.Limits.lent_bp`); lender k is a latency-critical (LC)
container on the same GPU whose usage file the BE container sees, read-only,
at ``<region>/lenders/<k>``. The interception library adds lender k's share to
the BE container's fill rate while :func:`lends_now` holds.
"""

from __future__ import annotations

import os
from pathlib import Path

from arkgpu.limiter import layout
from arkgpu.limiter.region import USAGE_FILE, Usage, read_usage_file, usage_snapshot

LENDERS_DIR = "lenders"


def lender_path(directory: Path, k: int) -> Path:
    """Where the container of region ``directory`` finds lender ``k``'s usage file."""
    if not 0 <= k < layout.MAX_LENDERS:
        raise ValueError(f"lender index k must be within 0..{layout.MAX_LENDERS - 1}, got {k}")
    return directory / LENDERS_DIR / str(k)


def link_lender(directory: Path, k: int, lender_region: Path | None) -> Path:
    """Make lender ``k``'s usage file visible at ``lenders/<k>`` as a symbolic
    link, or remove it when ``lender_region`` is None; returns the path.

    A link works where the container sees the lender's path (the fake-GPU
    containers); in production the node side bind-mounts the lender's usage
    file read-only at this path instead. The library looks at the path again
    about once a second, so a change takes effect while the container runs.
    """
    link = lender_path(directory, k)
    link.parent.mkdir(mode=0o755, exist_ok=True)
    if lender_region is None:
        link.unlink(missing_ok=True)
        return link
    tmp = link.with_name(f".{k}.tmp")
    tmp.unlink(missing_ok=True)
    tmp.symlink_to((lender_region / USAGE_FILE).absolute())
    os.replace(tmp, link)
    return link


def lender_usage(directory: Path, k: int) -> Usage | None:
    """Lender ``k``'s usage as the container sees it; None when the file is
    missing or not a usage file of this layout (such a lender lends nothing)."""
    try:
        return usage_snapshot(read_usage_file(lender_path(directory, k)))
    except (OSError, ValueError):
        return None


def lends_now(usage: Usage | None, stale_ms: int, now_ns: int) -> bool:
    """Whether a lender lends at CLOCK_MONOTONIC ``now_ns``: it has no batch in
    flight, or its count has not changed for ``stale_ms`` (the library's rule)."""
    if usage is None:
        return False
    stale = now_ns - usage.in_flight_changed_ns > stale_ms * 1_000_000
    return usage.batches_in_flight == 0 or stale
