"""What the predictor is asked about: a DNN model at a batch size on a share of a GPU."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Workload:
    """One inference (or training) workload on a GPU share."""

    model: str
    """DNN model name as in the profiles (``resnet50``)."""
    batch: int
    """Batch size in requests, >= 1."""
    share: float
    """Fraction of the GPU's compute, in (0, 1]."""

    def __post_init__(self) -> None:
        check_query(self.batch, self.share)


def check_query(batch: float, share: float) -> None:
    """Raise ValueError unless batch >= 1 and 0 < share <= 1."""
    if not batch >= 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    if not 0.0 < share <= 1.0:
        raise ValueError(f"share must be in (0, 1], got {share}")


class UnknownModelError(KeyError, ValueError):
    """A DNN model the predictor has no profile for, on any GPU (a KeyError and a ValueError)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""
