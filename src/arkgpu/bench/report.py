"""``arkgpu demo``'s work: the main comparisons, shrunk to about two minutes, as a report.

Four parts, each with progress shown (:mod:`arkgpu.bench.progress`):

1. placement: FGD's six policies and arkgpu on the openb default trace, beside
   FGD's published figures and the LP lower bound (simulated);
2. co-location: the sharing modes on the ``demo`` scenario (the paper scenario
   with its day compressed three-fold), one process per mode (simulated);
3. the arkgpu mode's time series from the same run;
4. the limiter's share accuracy on the fake GPU (real processes, fake driver).

:func:`run_demo` returns a :class:`DemoResults`; :mod:`arkgpu.bench.report_html`
turns it into the page and the PNG files.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any

from arkgpu.bench import colocation
from arkgpu.bench import placement as placement_bench
from arkgpu.bench.placement_study import bound_inputs
from arkgpu.bench.progress import ProgressConfig, ProgressReporter
from arkgpu.limiter.benchmarking import BenchConfig, run_bench
from arkgpu.placement.bounds import lp_bound
from arkgpu.sim.colocation.metrics import RunResult
from arkgpu.sim.placing import ExperimentConfig
from arkgpu.traces.catalog import default_node_list, resolve_pod_trace
from arkgpu.traces.openb import load_nodes, load_pods


@dataclass(frozen=True)
class DemoConfig:
    """What ``arkgpu demo`` runs: the full benches, shrunk to fit about two minutes on 2 cores."""

    policies: tuple[str, ...] = (
        "random", "dotprod", "clustering", "packing", "bestfit", "fgd", "arkgpu",
    )  # fmt: skip
    """Placement policies: FGD's six and ArkGPU's own."""
    seeds: tuple[int, ...] = (42, 43)
    """Placement seeds (FGD publishes 42..51; two keep the demo short and still give an sd)."""
    scenario: str = "demo"
    """Co-location scenario: ``paper`` with its 24 h day in 480 s instead of 1440 s."""
    modes: tuple[str, ...] = colocation.DEMO_MODES
    """Co-location modes compared (the paper's baselines and the strongest others)."""
    colocation_seed: int = 1
    """Co-location seed (the full bench runs 1-5)."""
    limiter: BenchConfig = field(
        default_factory=lambda: BenchConfig(
            shares=(10.0, 30.0, 50.0, 70.0, 90.0),
            seconds=0.5,
            launch_calls=20_000,
            mem_calls=10_000,
            repeats=1,
        )
    )
    """Limiter run: the five shares of the full bench, 0.5 s each instead of 3 s."""
    jobs: int = 2
    """Worker processes (the CI machine has 2 cores)."""
    progress: ProgressConfig = field(default_factory=ProgressConfig)
    """How progress is shown."""


@dataclass
class DemoResults:
    """What the demo measured; ``None`` or an entry in ``failed`` where a part did not run."""

    config: DemoConfig
    placement: dict[str, Any] | None = None
    """:func:`arkgpu.bench.placement.bench_report` document."""
    lp_bound_pct: float | None = None
    """LP lower bound on unallocated GPU % at 100% arrived (seed of the first run)."""
    colocation: dict[str, Any] | None = None
    """Co-location bench document (:func:`arkgpu.bench.colocation.json_ready` form)."""
    arkgpu_run: RunResult | None = None
    """The arkgpu mode's run, with its time series."""
    limiter: dict[str, Any] | None = None
    """:func:`arkgpu.limiter.benchmarking.run_bench` report."""
    failed: dict[str, str] = field(default_factory=dict)
    """Part name -> why it did not run (the page says so instead of a figure)."""
    wall_s: dict[str, float] = field(default_factory=dict)
    """Part name -> wall seconds it took."""


Part = Callable[[DemoConfig, DemoResults], None]


def run_placement(config: DemoConfig, results: DemoResults) -> None:
    """Placement bench over policies x seeds, then the LP bound on the first seed's order."""
    trace = resolve_pod_trace("default")
    spec = placement_bench.BenchSpec(
        default_node_list(), trace.path, trace.label, config.policies, config.seeds,
        jobs=config.jobs,
    )  # fmt: skip
    total = len(config.policies) * len(config.seeds) + 1
    with ProgressReporter("placement", total, config.progress) as progress:
        stats = placement_bench.run_bench(spec, progress.advance)
        results.placement = placement_bench.bench_report(spec, stats)
        nodes, pods = load_nodes(spec.nodes_path), load_pods(spec.pods_path)
        ordered, arrived = bound_inputs(nodes, pods, ExperimentConfig(seed=config.seeds[0]))
        results.lp_bound_pct = lp_bound(ordered, arrived).unallocated_pct
        progress.advance("LP bound")


def _one_mode(scenario: str, mode: str, seed: int) -> dict[str, Any]:
    """Worker: one co-location mode on one seed (the arkgpu mode keeps its series)."""
    spec = colocation.BenchSpec(scenario, (mode,), (seed,))
    return colocation.run_bench(spec, jobs=1, keep_series=mode == "arkgpu")


def run_colocation(config: DemoConfig, results: DemoResults) -> None:
    """Every mode in its own worker process, so that two cores share the modes."""
    docs: dict[str, dict[str, Any]] = {}
    context = multiprocessing.get_context("forkserver")
    with (
        ProgressReporter("co-location modes", len(config.modes), config.progress) as progress,
        ProcessPoolExecutor(config.jobs, mp_context=context) as pool,
    ):
        futures = {
            pool.submit(_one_mode, config.scenario, m, config.colocation_seed): m
            for m in config.modes
        }
        for future in as_completed(futures):
            docs[futures[future]] = future.result()
            progress.advance(futures[future])
    results.colocation = merge_modes(config, docs)
    run = docs.get("arkgpu", {}).get("_arkgpu_run")
    results.arkgpu_run = run if isinstance(run, RunResult) else None


def merge_modes(config: DemoConfig, docs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One bench document from one-mode documents, modes in ``config.modes`` order."""
    modes = {m: docs[m]["modes"][m] for m in config.modes if m in docs.get(m, {}).get("modes", {})}
    skipped = {k: v for d in docs.values() for k, v in d["skipped"].items()}
    ratio_details = colocation.ratios(modes)
    return {
        "scenario": config.scenario,
        "note": colocation.SIMULATED_NOTE,
        "seeds": [config.colocation_seed],
        "peak_factor": 1.0,
        "predictor_factor": 1.0,
        "modes": modes,
        "skipped": skipped,
        "ratios": {k: v["normalized_goodput"] for k, v in ratio_details.items()},
        "ratio_details": ratio_details,
    }


class PhaseSteps:
    """Turns "phase X starts" messages into steps: each new phase ends the previous one."""

    def __init__(self, progress: ProgressReporter) -> None:
        self.progress, self.current = progress, ""

    def __call__(self, message: str) -> None:
        if self.current:
            self.progress.advance(self.current)
        self.current = message
        self.progress.note(message)

    def finish(self) -> None:
        """The last phase ended."""
        self.progress.advance(self.current or "done")


def run_limiter(config: DemoConfig, results: DemoResults) -> None:
    """The limiter bench's share cases on the fake GPU (needs ``make native``)."""
    cfg = config.limiter
    phases = 2 + 2 * len(cfg.shares) + 1 + len(cfg.changes)  # as run_bench announces them
    with ProgressReporter("limiter on the fake GPU", phases, config.progress) as progress:
        steps = PhaseSteps(progress)
        report = run_bench(cfg, steps)
        steps.finish()
    results.limiter = report


PARTS: tuple[tuple[str, Part], ...] = (
    ("placement", run_placement),
    ("colocation", run_colocation),
    ("limiter", run_limiter),
)
"""The demo's parts in the order they run (the limiter last, alone: it measures timing)."""


def run_demo(config: DemoConfig, only: tuple[str, ...] = ()) -> DemoResults:
    """Run every part (or those in ``only``); a part that fails is recorded, not fatal."""
    results = DemoResults(config)
    for name, part in PARTS:
        if only and name not in only:
            continue
        start = time.monotonic()
        try:
            part(config, results)
        except (OSError, RuntimeError, ValueError) as exc:
            results.failed[name] = f"{type(exc).__name__}: {exc}"
        results.wall_s[name] = time.monotonic() - start
    return results


def summary_lines(results: DemoResults) -> list[str]:
    """The demo's results as text: a line per placement policy, the co-location table."""
    lines: list[str] = []
    if results.placement is not None:
        lines.append(
            f"Placement, openb default trace, seeds {list(results.config.seeds)} (simulated): "
            "unallocated GPU % at 100% arrived, lower is better"
        )
        for row in placement_bench.table_rows(results.placement):
            lines.append(f"  {row[0]:11s} {row[1]:>15s}   FGD published {row[2]}")
        if results.lp_bound_pct is not None:
            lines.append(f"  {'LP bound':11s} {results.lp_bound_pct:15.2f}")
    if results.colocation is not None:
        lines.append(colocation.format_table(results.colocation))
    if results.limiter is not None:
        lines.append(
            "Limiter on the fake GPU: largest share error "
            f"{results.limiter['share_error_pts_max']:.2f} percentage points"
        )
    return lines
