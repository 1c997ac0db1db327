"""What fitting level 2 needs from a predictor fitted at level 1."""

from __future__ import annotations

from typing import Protocol

from arkgpu.predictor.interference import Usage
from arkgpu.predictor.workloads import Workload


class Level1(Protocol):
    """A predictor fitted at level 1: latency alone, what level 2 uses of a workload."""

    def latency_ms(self, model: str, batch: int, share: float, gpu: str = ...) -> float: ...

    def usage(self, workload: Workload, gpu: str = ...) -> Usage: ...

    def knows(self, model: str) -> bool: ...
