"""The two-level performance predictor: latency alone (level 1) and under co-location (level 2)."""

from arkgpu.predictor.confidence import Confidence
from arkgpu.predictor.config import PredictorConfig
from arkgpu.predictor.predicting import Predictor, default_predictor
from arkgpu.predictor.storing import PredictorFileError
from arkgpu.predictor.workloads import UnknownModelError, Workload

__all__ = [
    "Confidence",
    "Predictor",
    "PredictorConfig",
    "PredictorFileError",
    "UnknownModelError",
    "Workload",
    "default_predictor",
]
