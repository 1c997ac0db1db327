"""The resource limiter: control region layout, Python mirror, native interception library.

The node side uses :mod:`arkgpu.limiter.region` to create a container's
region, change its limits while it runs and read its usage, and
:mod:`arkgpu.limiter.latencies` to read its LC latencies;
:mod:`arkgpu.limiter.lending` links an LC container's usage file into a
best-effort container's region for idle-share lending.
"""

from arkgpu.limiter.latencies import LatencySample, read_latencies
from arkgpu.limiter.lending import lender_usage, link_lender
from arkgpu.limiter.region import (
    Limits,
    Mode,
    ProcessUsage,
    Usage,
    create_region,
    read_limits,
    read_usage,
    write_limits,
)

__all__ = [
    "LatencySample",
    "Limits",
    "Mode",
    "ProcessUsage",
    "Usage",
    "create_region",
    "lender_usage",
    "link_lender",
    "read_latencies",
    "read_limits",
    "read_usage",
    "write_limits",
]
