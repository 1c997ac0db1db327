"""The resource limiter: control region layout, Python mirror, native interception library.

The node side uses :mod:`arkgpu.limiter.region` to create a container's
region, change its limits while it runs and read its usage and LC latencies.
"""

from arkgpu.limiter.region import (
    LatencySample,
    Limits,
    Mode,
    ProcessUsage,
    Usage,
    create_region,
    read_latencies,
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
    "read_latencies",
    "read_limits",
    "read_usage",
    "write_limits",
]
