"""Sensitivity of arkgpu's gains: peak load 0.5x/1x/1.5x and a predictor given 10% error.

Every row is a full bench (:func:`arkgpu.bench.colocation.run_bench`) of the
same seeds; the table reports arkgpu's normalised-goodput gain over each
baseline and arkgpu's lowest SLO attainment. Simulated on measured V100
profiles (iGniter).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from arkgpu.bench.colocation import BenchSpec, json_ready, run_bench

CASES: tuple[tuple[str, float, float], ...] = (
    ("peak 0.5x", 0.5, 1.0),
    ("peak 1.0x", 1.0, 1.0),
    ("peak 1.5x", 1.5, 1.0),
    ("predictor -10%", 1.0, 0.9),
    ("predictor +10%", 1.0, 1.1),
)
"""(label, peak factor, predictor factor): 0.9 = the predictor says work is 10% faster
than it is (optimistic, the dangerous side), 1.1 = 10% slower."""


def run_sensitivity(
    scenario: str,
    seeds: Sequence[int],
    modes: Sequence[str],
    jobs: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """One bench per case; returns ``{"cases": {label: bench document}}``."""
    cases = {}
    for label, peak, error in CASES:
        spec = BenchSpec(scenario, tuple(modes), tuple(seeds), peak, error)
        cases[label] = json_ready(run_bench(spec, jobs))
        if progress:
            progress(f"{label} done")
    return {"scenario": scenario, "seeds": list(seeds), "cases": cases}


def format_sensitivity(doc: dict[str, Any]) -> str:
    """Rows: cases; columns: arkgpu's gain in normalised goodput over each baseline, SLO min."""
    first = next(iter(doc["cases"].values()))
    baselines = [k.removeprefix("arkgpu_vs_") for k in first["ratios"]]
    head = f"{'case':16s}" + "".join(f"{b:>14s}" for b in baselines) + f"{'ark SLO min%':>14s}"
    lines = [
        f"arkgpu normalised-goodput gain, scenario {doc['scenario']}, seeds {doc['seeds']}",
        head,
    ]
    for label, case in doc["cases"].items():
        cells = "".join(
            f"{(case['ratios'][f'arkgpu_vs_{b}'] - 1) * 100:+13.1f}%" for b in baselines
        )
        slo = case["modes"]["arkgpu"]["slo_attainment_min_pct"]
        lines.append(f"{label:16s}{cells}{slo:14.2f}")
    return "\n".join(lines)
