"""Level-1 placement policies: pure functions over a cluster snapshot, registered by name.

Importing this package registers every built-in policy in :data:`POLICIES`.
"""

from arkgpu.placement import dotprod, fgd, hami, heuristics
from arkgpu.placement.base import POLICIES, Policy, PolicyContext, PolicyRegistry

__all__ = [
    "POLICIES",
    "Policy",
    "PolicyContext",
    "PolicyRegistry",
    "dotprod",
    "fgd",
    "hami",
    "heuristics",
]
