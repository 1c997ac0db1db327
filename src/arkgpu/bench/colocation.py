"""Co-location bench: every sharing mode over seeds, side by side, as a table, JSON and plots.

All figures are simulated: the ground truth is iGniter's measured V100
profiles (solo latency, pair interference, latency std), the load curves are
ServeGen and Alibaba GenAI daily traces; the policies see only the fitted
predictor. ``normalized_goodput`` sums, over applications, goodput divided by
the application's goodput alone on a whole GPU (LC: same arrivals simulated
alone; BE: iterations alone in the horizon).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from arkgpu.sim.colocation.metrics import RunResult
from arkgpu.sim.colocation.modes import ModeNotApplicableError, mode_keys
from arkgpu.sim.colocation.running import alone_goodput, default_truth, make_sizer, simulate
from arkgpu.sim.colocation.scenarios import Scenario, load_scenario
from arkgpu.sim.colocation.simulating import RunOptions

ALL_MODES = (
    "k8s-native",
    "timeslice",
    "mps",
    "mps-equal",
    "mig",
    "hami",
    "tgs",
    "arkgpu-static",
    "arkgpu",
)
"""Every mode, in table order (baselines first)."""
DEMO_MODES = ("k8s-native", "timeslice", "mps", "hami", "tgs", "arkgpu")
"""Modes ``arkgpu demo`` compares (the baselines the paper names, plus the strongest ones)."""
METRICS = (
    "goodput_rps",
    "normalized_goodput",
    "slo_attainment_min_pct",
    "lc_throughput_rps",
    "be_throughput_norm",
    "gpus_used",
    "gpu_util_pct",
    "wall_s",
    "cpu_s",
)
"""Per-mode figures averaged over seeds."""
SIMULATED_NOTE = (
    "simulated: ground truth = iGniter measured V100 profiles (solo, pair interference, std); "
    "load = ServeGen / Alibaba GenAI daily curves; policies use the fitted predictor"
)


@dataclass(frozen=True)
class BenchSpec:
    """One bench: scenario, modes, seeds and what to perturb."""

    scenario: str
    """Shipped scenario name or TOML path."""
    modes: tuple[str, ...]
    """Mode keys."""
    seeds: tuple[int, ...]
    """Random seeds."""
    peak_factor: float = 1.0
    """Multiplier of every LC peak rate (sensitivity)."""
    predictor_factor: float = 1.0
    """Multiplier of every prediction the policies see (sensitivity: 0.9 = 10% optimistic)."""


def parse_seeds(text: str) -> tuple[int, ...]:
    """``1-5`` or ``1,3,7`` into seeds."""
    seeds: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        try:
            seeds.extend(range(int(lo), int(hi or lo) + 1))
        except ValueError:
            raise ValueError(f"bad seeds {text!r}: use N, N-M or N,M,...") from None
    return tuple(seeds)


def parse_modes(text: str) -> tuple[str, ...]:
    """``all`` or a comma list of mode keys."""
    if text == "all":
        return ALL_MODES
    modes = tuple(m.strip() for m in text.split(",") if m.strip())
    unknown = [m for m in modes if m not in mode_keys()]
    if unknown:
        raise ValueError(f"unknown modes {unknown} (known: {', '.join(ALL_MODES)})")
    return modes


def _scenario(spec: BenchSpec) -> Scenario:
    scenario = load_scenario(spec.scenario)
    return scenario.scaled(spec.peak_factor) if spec.peak_factor != 1.0 else scenario


def _run_seed(spec: BenchSpec, seed: int, keep_series: bool) -> dict[str, Any]:
    """Every mode of ``spec`` on one seed (one worker process)."""
    scenario, truth = _scenario(spec), default_truth()
    sizer = make_sizer(error_factor=spec.predictor_factor)
    alone = alone_goodput(scenario, seed, truth, sizer)  # k8s-native: the sizer is unused
    out: dict[str, Any] = {"seed": seed, "modes": {}, "skipped": {}, "series": {}}
    for mode in spec.modes:
        options = RunOptions(record_series=keep_series and mode == "arkgpu")
        try:
            result = simulate(
                scenario, mode=mode, seed=seed, truth=truth, sizer=sizer, options=options
            )
        except ModeNotApplicableError as exc:
            out["skipped"][mode] = str(exc)
            continue
        out["modes"][mode] = result.to_dict(alone)
        if result.series is not None:
            out["series"][mode] = result
    return out


def run_bench(
    spec: BenchSpec,
    jobs: int | None = None,
    keep_series: bool = False,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run every (mode, seed) of ``spec``; seeds in parallel over ``jobs`` processes."""
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(spec.seeds)))
    if jobs == 1:
        per_seed = []
        for s in spec.seeds:
            per_seed.append(_run_seed(spec, s, keep_series))
            if progress:
                progress(f"seed {s} done")
    else:
        with ProcessPoolExecutor(jobs) as pool:
            futures = [pool.submit(_run_seed, spec, s, keep_series) for s in spec.seeds]
            per_seed = []
            for s, f in zip(spec.seeds, futures, strict=True):
                per_seed.append(f.result())
                if progress:
                    progress(f"seed {s} done")
    return aggregate(spec, per_seed)


def aggregate(spec: BenchSpec, per_seed: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Means over seeds, per-seed values, and arkgpu's ratios to every other mode."""
    modes: dict[str, Any] = {}
    for mode in spec.modes:
        rows = [s["modes"][mode] for s in per_seed if mode in s["modes"]]
        if not rows:
            continue
        entry: dict[str, Any] = {m: float(np.mean([r[m] for r in rows])) for m in METRICS}
        entry["per_seed"] = {m: [r[m] for r in rows] for m in METRICS}
        entry["lc"] = rows[0]["lc"]
        entry["be"] = rows[0]["be"]
        modes[mode] = entry
    doc: dict[str, Any] = {
        "scenario": spec.scenario,
        "note": SIMULATED_NOTE,
        "seeds": list(spec.seeds),
        "peak_factor": spec.peak_factor,
        "predictor_factor": spec.predictor_factor,
        "modes": modes,
        "skipped": {k: v for s in per_seed for k, v in s["skipped"].items()},
        "ratios": {k: v["normalized_goodput"] for k, v in ratios(modes).items()},
        "ratio_details": ratios(modes),
    }
    series = [s["series"]["arkgpu"] for s in per_seed if "arkgpu" in s.get("series", {})]
    if series:
        doc["_arkgpu_run"] = series[0]
    return doc


def ratios(modes: dict[str, Any]) -> dict[str, dict[str, float]]:
    """arkgpu over each other mode: normalised goodput, goodput (rps), LC throughput."""
    if "arkgpu" not in modes:
        return {}
    ark = modes["arkgpu"]
    out = {}
    for mode, entry in modes.items():
        if mode == "arkgpu":
            continue
        out[f"arkgpu_vs_{mode}"] = {
            k: (ark[k] / entry[k] if entry[k] > 0 else float("inf"))
            for k in (
                "normalized_goodput",
                "goodput_rps",
                "lc_throughput_rps",
                "be_throughput_norm",
            )
        }
    return out


def _pct(ratio: float) -> str:
    return "inf" if not np.isfinite(ratio) else f"{(ratio - 1) * 100:+.1f}%"


def format_table(doc: dict[str, Any]) -> str:
    """One row per mode, then arkgpu's gains over each mode."""
    head = (
        f"{'mode':14s} {'goodput/s':>10s} {'norm.goodput':>12s} {'SLO min %':>9s} "
        f"{'LC tput/s':>10s} {'BE norm':>8s} {'GPUs':>5s} {'util %':>7s} {'wall s':>7s} "
        f"{'cpu s':>6s}"
    )
    lines = [f"scenario {doc['scenario']}, seeds {doc['seeds']} ({doc['note']})", head]
    for mode, e in doc["modes"].items():
        lines.append(
            f"{mode:14s} {e['goodput_rps']:10.1f} {e['normalized_goodput']:12.3f} "
            f"{e['slo_attainment_min_pct']:9.2f} {e['lc_throughput_rps']:10.1f} "
            f"{e['be_throughput_norm']:8.3f} {e['gpus_used']:5.1f} {e['gpu_util_pct']:7.1f} "
            f"{e['wall_s']:7.1f} {e['cpu_s']:6.1f}"
        )
    for mode, reason in doc["skipped"].items():
        lines.append(f"{mode:14s} n/a: {reason}")
    if doc["ratio_details"]:
        lines.append("arkgpu vs     norm.goodput  goodput(rps)  LC tput  BE tput")
        for key, r in doc["ratio_details"].items():
            lines.append(
                f"{key.removeprefix('arkgpu_vs_'):14s} {_pct(r['normalized_goodput']):>11s} "
                f"{_pct(r['goodput_rps']):>13s} {_pct(r['lc_throughput_rps']):>8s} "
                f"{_pct(r['be_throughput_norm']):>8s}"
            )
    return "\n".join(lines)


def json_ready(doc: dict[str, Any]) -> dict[str, Any]:
    """The bench document without in-memory run objects."""
    return {k: v for k, v in doc.items() if not k.startswith("_")}


def plot_arkgpu(result: RunResult, path: Path) -> Path | None:
    """PNG time series of the arkgpu run at ``path`` (its folder created): load, LC share and
    p99 against target per service; None when the run kept no series."""
    import matplotlib  # noqa: PLC0415 - plotting is optional and slow to import

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    series = result.series
    if series is None:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(3, 1, figsize=(10, 9), sharex=True)
    for i, name in enumerate(series.lc_names):
        axes[0].plot(series.t, series.lc_load_rps[:, i], label=name, lw=0.8)
        axes[1].plot(series.t, series.lc_share[:, i], label=name, lw=0.8)
        ratio = series.lc_p99_ms[:, i] / series.lc_target_ms[i]
        axes[2].plot(series.t, ratio, label=name, lw=0.6)
    axes[2].axhline(1.0, color="k", ls="--", lw=1)
    axes[0].set_ylabel("load (req/s)")
    axes[1].set_ylabel("LC compute share")
    axes[2].set_ylabel("period p99 / target")
    axes[2].set_xlabel("simulated time (s)")
    axes[0].legend(fontsize=7, ncol=3)
    fig.suptitle(
        f"arkgpu on {result.scenario}, seed {result.seed} (simulated on measured V100 profiles)"
    )
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
