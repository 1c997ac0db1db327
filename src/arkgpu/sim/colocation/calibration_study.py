"""Online calibration against stronger interference than profiled (simulated).

For each interference scale ``k`` the ground truth's co-located latency is
``k`` times what iGniter's measured pairs give
(:attr:`~arkgpu.sim.colocation.truth.GroundTruth.interference_scale`), while
the policies' predictor is fitted on the pairs as measured. The ``arkgpu``
mode runs three times on the same arrivals:

* ``oracle``: the predictor knows the true interference (its level 2 times ``k``);
* ``calibrated``: the fitted predictor, corrected online per LC service
  (:mod:`arkgpu.colocation.calibration`);
* ``uncalibrated``: the fitted predictor as is (the adjustment unit's
  feedback is the only correction).

Figures are simulated; the ground truth is iGniter's measured V100 profiles.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from arkgpu.colocation.sizing import PerformanceModel
from arkgpu.model.gpus import REFERENCE_GPU
from arkgpu.predictor import Workload, default_predictor
from arkgpu.sim.colocation.modes import ModeOptions
from arkgpu.sim.colocation.running import alone_goodput, default_truth, make_sizer, simulate
from arkgpu.sim.colocation.scenarios import load_scenario
from arkgpu.sim.colocation.simulating import RunOptions

VARIANTS = ("oracle", "calibrated", "uncalibrated")
"""The three runs per scale and seed."""
NOTE = (
    "simulated: ground truth = iGniter measured V100 profiles (solo latency, pair "
    "interference, std) with co-located latency scaled by k; load = ServeGen / Alibaba "
    "GenAI daily curves; policies use the predictor fitted on the unscaled profiles"
)


@dataclass(frozen=True)
class ScaledInterference:
    """The predictor with its level 2 times ``scale`` whenever there are co-runners
    (the oracle of the study: it knows the truth's interference scale)."""

    base: PerformanceModel
    """The fitted predictor."""
    scale: float
    """The truth's interference scale."""

    def latency_ms(self, model: str, batch: int, share: float, gpu: str = REFERENCE_GPU) -> float:
        """Level 1 as fitted."""
        return self.base.latency_ms(model, batch, share, gpu)

    def colocated_latency_ms(
        self, target: Workload, corunners: Sequence[Workload], gpu: str = REFERENCE_GPU
    ) -> float:
        """Level 2 times ``scale`` (with co-runners)."""
        value = self.base.colocated_latency_ms(target, corunners, gpu)
        return value * self.scale if corunners else value


@dataclass(frozen=True)
class StudySpec:
    """What the study runs."""

    scenario: str = "paper"
    """Shipped scenario name or TOML path."""
    scales: tuple[float, ...] = (1.3, 1.6)
    """Interference scales of the truth."""
    seeds: tuple[int, ...] = (1, 2)
    """Random seeds."""
    gpus: int | None = None
    """GPUs of the scenario (None: as the scenario says)."""


def _variant(
    name: str, spec: StudySpec, scale: float, seed: int, alone: dict[str, float]
) -> dict[str, Any]:
    scenario = load_scenario(spec.scenario)
    if spec.gpus is not None:
        scenario = dataclasses.replace(scenario, gpus=spec.gpus)
    truth = default_truth()
    truth.interference_scale = scale
    base = default_predictor()
    predictor = ScaledInterference(base, scale) if name == "oracle" else base
    options = RunOptions(modes=ModeOptions(calibrate=name == "calibrated"), record_series=True)
    sizer = make_sizer(predictor)
    result = simulate(scenario, mode="arkgpu", seed=seed, truth=truth, sizer=sizer, options=options)
    doc = result.to_dict(alone)
    series = result.series
    if series is not None:
        measured = ~np.isnan(series.lc_p99_ms)
        over = measured & (series.lc_p99_ms > series.lc_target_ms[None, :])
        doc["periods_over_target_pct"] = 100.0 * float(over.sum()) / max(1, int(measured.sum()))
        doc["mean_lc_share"] = float(series.lc_share.sum(axis=1).mean()) / scenario.gpus
    return doc


def run_study(spec: StudySpec, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Every scale, seed and variant; per scale the seed means and the comparison."""
    rows: list[dict[str, Any]] = []
    for seed in spec.seeds:
        scenario = load_scenario(spec.scenario)
        alone = alone_goodput(scenario, seed, default_truth(), make_sizer())
        for scale in spec.scales:
            for name in VARIANTS:
                if progress is not None:
                    progress(f"k={scale:g} seed={seed} {name}")
                doc = _variant(name, spec, scale, seed, alone)
                rows.append(_row(name, scale, seed, doc))
    return {
        "note": NOTE,
        "spec": dataclasses.asdict(spec),
        "runs": rows,
        "summary": summarise(rows),
    }


def _row(name: str, scale: float, seed: int, doc: dict[str, Any]) -> dict[str, Any]:
    return {
        "variant": name,
        "scale": scale,
        "seed": seed,
        "normalized_goodput": doc["normalized_goodput"],
        "goodput_rps": doc["goodput_rps"],
        "be_throughput_norm": doc["be_throughput_norm"],
        "slo_attainment_min_pct": doc["slo_attainment_min_pct"],
        "slo_attainment_pct": {r["name"]: r["slo_attainment_pct"] for r in doc["lc"]},
        "unplaced": [r["name"] for r in doc["lc"] if r["state"] != "running"],
        "periods_over_target_pct": doc.get("periods_over_target_pct"),
        "mean_lc_share": doc.get("mean_lc_share"),
    }


def summarise(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per scale and variant: seed means, the worst service's attainment, the
    normalised goodput over the oracle's; ``periods_over_target_pct``: LC control
    periods whose p99 was over the target, % of the periods with completions;
    ``mean_lc_share``: LC shares per GPU, time mean."""
    out = []
    for scale in sorted({r["scale"] for r in rows}):
        mine = [r for r in rows if r["scale"] == scale]
        oracle = _mean([r["normalized_goodput"] for r in mine if r["variant"] == "oracle"])
        for name in VARIANTS:
            runs = [r for r in mine if r["variant"] == name]
            if not runs:
                continue
            goodput = _mean([r["normalized_goodput"] for r in runs])
            out.append(
                {
                    "scale": scale,
                    "variant": name,
                    "seeds": len(runs),
                    "normalized_goodput": goodput,
                    "vs_oracle": goodput / oracle if oracle else None,
                    "be_throughput_norm": _mean([r["be_throughput_norm"] for r in runs]),
                    "periods_over_target_pct": _mean(
                        [r.get("periods_over_target_pct") or 0.0 for r in runs]
                    ),
                    "mean_lc_share": _mean([r.get("mean_lc_share") or 0.0 for r in runs]),
                    "slo_attainment_min_pct": min(r["slo_attainment_min_pct"] for r in runs),
                    "every_lc_99": all(r["slo_attainment_min_pct"] >= 99.0 for r in runs),
                    "unplaced": sorted({n for r in runs for n in r["unplaced"]}),
                }
            )
    return out


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def table(doc: dict[str, Any]) -> str:
    """The summary as a text table."""
    lines = [
        f"{'k':>4} {'variant':<13} {'norm goodput':>12} {'vs oracle':>9} {'BE norm':>8} "
        f"{'min SLO %':>9} {'over %':>7} {'LC share':>8}  unplaced"
    ]
    for s in doc["summary"]:
        ratio = "-" if s["vs_oracle"] is None else f"{s['vs_oracle']:.3f}"
        lines.append(
            f"{s['scale']:>4g} {s['variant']:<13} {s['normalized_goodput']:>12.3f} {ratio:>9} "
            f"{s['be_throughput_norm']:>8.3f} {s['slo_attainment_min_pct']:>9.2f} "
            f"{s['periods_over_target_pct']:>7.2f} {s['mean_lc_share']:>8.3f}  "
            f"{','.join(s['unplaced']) or '-'}"
        )
    lines.append(doc["note"])
    return "\n".join(lines)
