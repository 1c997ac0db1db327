"""Settings of the performance predictor."""

from __future__ import annotations

from dataclasses import dataclass, field


def _peak_fp32_tflops() -> dict[str, float]:
    return {
        "T4": 8.1,
        "P100": 10.6,
        "V100": 15.7,
        "V100M16": 15.7,
        "V100M32": 15.7,
        "A10": 31.2,
        "A100-40GB": 19.5,
        "A100-80GB": 19.5,
        "H100": 67.0,
        "H200": 67.0,
    }


def _default_intervals() -> dict[str, tuple[float, float]]:
    # Calibrated on the shipped top-level profiles (iGniter V100, ParvaGPU A100) with
    # `arkgpu predictor calibrate --profiles src/arkgpu/data/profiles`, 2026-12-05; new-model
    # re-calibrated 2026-12-07 after the reshaping of a new model's curve (predictor.shaping).
    return {
        "measured-range": (-0.0729, 0.0630),
        "extrapolated": (-0.0553, 0.1731),
        "new-model": (-0.4116, 0.4950),
        "cross-gpu": (-0.6533, 0.7081),
    }


@dataclass(frozen=True)
class PredictorConfig:
    """How the predictor fits and what it assumes where no measurement exists."""

    training_factor: float = 3.0
    """A BE training iteration's time as a multiple of the profiled inference batch
    latency at the same batch and share (no training profiles are shipped). 3.0:
    the backward pass costs about twice the forward pass (the usual 1:2 estimate of
    forward to backward FLOPs for dense layers), plus the forward pass itself.
    Optimizer steps and data loading are not counted."""
    gpu_speed: dict[str, float] = field(default_factory=_peak_fp32_tflops)
    """Relative speed of each GPU model, used only to predict a DNN model on a GPU it
    was not profiled on (share scaled by the speed ratio). Unit: peak FP32 TFLOPS from
    NVIDIA's datasheets (SXM parts), a spec every GPU has; a GPU missing here is
    scaled by its SM count from :mod:`arkgpu.model.gpus`."""

    pair_prior: float = 5.0
    """Strength, in measured targets, of the prior that a (target model, co-runner model)
    combination slows down as the shared features say (scale 1). With n measured targets
    of that combination the fitted scale moves n / (n + pair_prior) of the way to its
    least-squares value: 5 lets a few stray measurements move it little while iGniter's
    125 pairs per combination decide it. ``inf`` turns the per-combination scale off."""

    intervals: dict[str, tuple[float, float]] = field(default_factory=_default_intervals)
    """Interval per kind of level-1 query (:mod:`arkgpu.predictor.confidence`): 5th and
    95th percentiles of log(measured / predicted) on held-out folds of that kind. The
    defaults were calibrated on the shipped profiles (``arkgpu predictor calibrate``,
    docs/studies/predictor.md); ``predictor fit --calibrate`` refits them on the
    profiles fitted."""

    def to_dict(self) -> dict[str, object]:
        """The settings as JSON-ready values."""
        return {
            "training_factor": self.training_factor,
            "gpu_speed": dict(self.gpu_speed),
            "pair_prior": self.pair_prior,
            "intervals": {k: list(v) for k, v in self.intervals.items()},
        }

    @staticmethod
    def from_dict(values: dict[str, object]) -> PredictorConfig:
        """Inverse of :meth:`to_dict`; raises ValueError on a wrong type."""
        factor = values.get("training_factor")
        speed = values.get("gpu_speed")
        if not isinstance(factor, int | float) or factor <= 0:
            raise ValueError(f"training_factor must be a positive number, got {factor!r}")
        if not isinstance(speed, dict) or not all(
            isinstance(v, int | float) and v > 0 for v in speed.values()
        ):
            raise ValueError("gpu_speed must map GPU names to positive numbers")
        prior = values.get("pair_prior")
        if not isinstance(prior, int | float) or prior < 0:
            raise ValueError(f"pair_prior must be a number >= 0, got {prior!r}")
        speeds = {str(k): float(v) for k, v in speed.items()}
        return PredictorConfig(float(factor), speeds, float(prior), _intervals(values))


def _intervals(values: dict[str, object]) -> dict[str, tuple[float, float]]:
    found = values.get("intervals")
    if not isinstance(found, dict) or not all(
        isinstance(v, list) and len(v) == 2 and v[0] <= v[1] for v in found.values()
    ):
        raise ValueError("intervals must map kinds to [low, high] log ratios")
    return {str(k): (float(v[0]), float(v[1])) for k, v in found.items()}
