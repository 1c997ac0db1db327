"""Nodes and pods as the placement layer sees them.

A GPU is shared in milli-GPU units: 1000 is one whole GPU. A pod asks either
for a share of one GPU (``num_gpu == 1`` and ``gpu_milli < 1000``), for whole
GPUs (``gpu_milli == 1000``, ``num_gpu >= 1``), or for no GPU at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

#: Milli-GPU units in one whole GPU.
MILLI_PER_GPU = 1000


class QosClass(StrEnum):
    """Quality-of-service class of a pod.

    ``LC`` is latency-critical inference, ``BE`` best-effort work. The trace's
    own classes (``LS``, ``Burstable``, ``Guaranteed``) are kept as they are.
    """

    LC = "LC"
    BE = "BE"
    LS = "LS"
    BURSTABLE = "Burstable"
    GUARANTEED = "Guaranteed"


@dataclass(frozen=True, slots=True)
class Node:
    """A machine with CPUs, memory and GPUs of one model."""

    name: str
    cpu_milli: int
    """CPU capacity in milli-cores."""
    memory_mib: int
    """Main memory in MiB."""
    num_gpu: int
    """Number of GPUs (0 for a CPU-only node)."""
    gpu_model: str
    """GPU model name (``""`` for a CPU-only node)."""


@dataclass(frozen=True, slots=True)
class LcAttributes:
    """What the predictor-driven check needs to know about a latency-critical service."""

    model: str
    """DNN model name, as the predictor's profiles spell it (``resnet50``)."""
    target_ms: float
    """p99 latency target in ms."""
    peak_rps: float
    """Expected peak request rate (requests/s): the rate its share is sized for."""
    max_batch: int = 32
    """Largest batch its dynamic batcher forms."""
    max_queue_delay_ms: float = 2.0
    """Batcher's queue delay in ms."""


@dataclass(frozen=True, slots=True)
class Pod:
    """A pod's request (what the scheduler is asked to place); times are seconds from the
    trace's start, or -1 when unknown."""

    name: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int
    """Share of each requested GPU, 0..1000 (1000 for whole GPUs, 0 without GPU)."""
    gpu_spec: frozenset[str] = frozenset()
    """GPU models the pod may run on; empty means any."""
    qos: str = ""
    creation_time: int = -1
    deletion_time: int = -1
    gpu_memory_mib: int = 0
    """GPU memory per requested GPU in MiB; 0 when the request gives none (the openb
    traces express GPU demand as a milli-GPU share only)."""
    lc: LcAttributes | None = None
    """Set for a latency-critical service whose share the predictor sizes; None otherwise."""

    @property
    def total_gpu_milli(self) -> int:
        """Milli-GPUs the pod takes in all: ``num_gpu * gpu_milli``."""
        return self.num_gpu * self.gpu_milli

    @property
    def is_gpu_share(self) -> bool:
        """True for a pod that takes part of one GPU."""
        return self.num_gpu == 1 and self.gpu_milli < MILLI_PER_GPU

    @property
    def shape(self) -> tuple[int, int, int, frozenset[str]]:
        """The request without name and memory, as FGD groups pods into types."""
        return (self.cpu_milli, self.gpu_milli, self.num_gpu, self.gpu_spec)
