"""Level-1 placement policies: pure functions over a cluster snapshot, registered by name.

Importing this package registers every built-in policy in :data:`POLICIES`.
"""

from arkgpu.placement import arkgpu, dotprod, fgd, hami, heuristics
from arkgpu.placement.base import POLICIES, Policy, PolicyContext, PolicyRegistry
from arkgpu.placement.ranking import NodeVerdict, Ranking

__all__ = [
    "POLICIES",
    "NodeVerdict",
    "Policy",
    "PolicyContext",
    "PolicyRegistry",
    "Ranking",
    "arkgpu",
    "dotprod",
    "fgd",
    "hami",
    "heuristics",
]
