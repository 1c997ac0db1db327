"""A container's decision as the limiter's limits (what the node runtime writes to its region)."""

from __future__ import annotations

from arkgpu.colocation.deciding import ContainerDecision
from arkgpu.limiter.region import Limits

MIB = 1 << 20
"""Bytes in a MiB."""


def limits_for(entry: ContainerDecision) -> Limits:
    """The limits of a container with one GPU (ordinal 0) from its decision.

    The compute share and the shares lent go over as they are (both are basis
    points, :mod:`arkgpu.model.shares`); the memory cap turns from MiB into
    bytes. Pacing mode, burst and staleness keep the limiter's defaults. Lender
    ``k`` of ``entry.lenders`` is the one whose usage file the runtime links at
    ``lenders/<k>`` (:func:`arkgpu.limiter.lending.link_lender`).
    """
    memory = None if entry.memory_mib is None else entry.memory_mib * MIB
    return Limits(memory_bytes=(memory,), share_bp=entry.share_bp, lent_bp=entry.lent_bp)
