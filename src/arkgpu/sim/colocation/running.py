"""Entry points of the co-location simulator: defaults, one run, the alone-on-a-GPU reference."""

from __future__ import annotations

import dataclasses

from arkgpu.colocation.sizing import BiasedPredictor, PerformanceModel, ShareSizer, SizingConfig
from arkgpu.model.gpus import REFERENCE_GPU
from arkgpu.predictor import default_predictor
from arkgpu.sim.colocation.metrics import RunResult
from arkgpu.sim.colocation.scenarios import Scenario
from arkgpu.sim.colocation.simulating import CoLocationSim, RunOptions
from arkgpu.sim.colocation.truth import GroundTruth
from arkgpu.traces.profiles import default_profile_dir, load_pair_profiles, load_solo_profiles

TRUTH_GPU = REFERENCE_GPU
"""The only GPU with measured solo and pair profiles (iGniter)."""


def default_truth() -> GroundTruth:
    """Ground truth from the measured iGniter V100 profiles shipped in the package."""
    folder = default_profile_dir()
    solo = [r for r in load_solo_profiles(folder / "igniter_v100_solo.csv") if r.gpu == TRUTH_GPU]
    pairs = [p for p in load_pair_profiles(folder / "igniter_v100_pairs.csv") if p.gpu == TRUTH_GPU]
    return GroundTruth(solo, pairs)


def make_sizer(
    predictor: PerformanceModel | None = None,
    error_factor: float = 1.0,
    gpu: str = TRUTH_GPU,
    config: SizingConfig | None = None,
) -> ShareSizer:
    """Share sizing over ``predictor`` (default: fitted now), biased by ``error_factor``."""
    base: PerformanceModel = predictor if predictor is not None else default_predictor()
    if error_factor != 1.0:
        base = BiasedPredictor(base, error_factor)
    return ShareSizer(base, gpu, config or SizingConfig())


def simulate(
    scenario: Scenario,
    *,
    mode: str,
    seed: int,
    truth: GroundTruth,
    sizer: ShareSizer,
    options: RunOptions | None = None,
) -> RunResult:
    """Run ``scenario`` under ``mode`` with ``seed``."""
    if scenario.gpu != TRUTH_GPU and mode != "mig":
        raise ValueError(f"no measured ground truth for {scenario.gpu} (only {TRUTH_GPU})")
    return CoLocationSim(
        scenario, mode=mode, seed=seed, truth=truth, sizer=sizer, options=options
    ).run()


def alone_goodput(
    scenario: Scenario, seed: int, truth: GroundTruth, sizer: ShareSizer
) -> dict[str, float]:
    """Good requests of each LC service alone on a whole GPU, same arrivals (same seed)."""
    out: dict[str, float] = {}
    options = RunOptions(record_series=False)
    for spec in scenario.lcs:
        solo = dataclasses.replace(scenario, gpus=1, lcs=(spec,), bes=())
        sim = CoLocationSim(
            solo, mode="k8s-native", seed=seed, truth=truth, sizer=sizer, options=options
        )
        result = sim.run()
        out[spec.name] = float(result.lcs[0].good)
    return out
