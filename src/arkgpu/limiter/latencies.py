"""Read the LC latency channel of a container's region (the node side).

The client library (:mod:`arkgpu.client`, ``arkgpu_client.h``) appends each
reported latency to a lock-free ring in the region's ``usage`` file: a ticket
taken by fetch-and-add, the slot filled, then published with
``seq = ticket + 1`` (docs/LIMITER.md, LC latency channel).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from arkgpu.limiter import layout
from arkgpu.limiter.region import USAGE_FILE, read_usage_file


@dataclass(frozen=True)
class LatencySample:
    """One latency reported through the LC latency channel."""

    seq: int
    t_ns: int
    latency_ns: int
    batch: int


def read_latencies(directory: Path, after_seq: int = 0) -> list[LatencySample]:
    """Complete latency samples with sequence number above ``after_seq``, oldest first.

    Samples overwritten by newer ones (more than the ring's size behind the
    head) are gone; an entry being written is skipped.
    """
    u = read_usage_file(directory / USAGE_FILE)
    head = int(u.lat_head)
    first = max(after_seq, head - layout.LATENCY_SLOTS)
    out = []
    for ticket in range(first, head):
        e = u.lat[ticket % layout.LATENCY_SLOTS]
        if e.seq == ticket + 1:
            out.append(LatencySample(int(e.seq), int(e.t_ns), int(e.latency_ns), int(e.batch)))
    return out
