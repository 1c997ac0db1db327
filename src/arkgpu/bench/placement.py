"""Placement bench: every policy over many seeds, side by side, beside FGD's published figures.

Each (policy, seed) run happens in a fresh worker process, so that its wall
time and its peak resident memory (``ru_maxrss`` of that process: interpreter,
numpy, trace and run together) are its own.
"""

from __future__ import annotations

import multiprocessing
import resource
import statistics
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from arkgpu.sim.placing import ExperimentConfig, RunResult, run_placement
from arkgpu.traces.catalog import Published, published_unallocated
from arkgpu.traces.openb import load_nodes, load_pods


@dataclass(frozen=True, slots=True)
class BenchSpec:
    """What to run: a node list, a pod trace, policies and seeds."""

    nodes_path: Path
    pods_path: Path
    label: str
    """Workload label as FGD names it (``openb_pod_list_default``)."""
    policies: tuple[str, ...]
    seeds: tuple[int, ...]
    inflate: float = 1.3
    jobs: int = 1
    """Worker processes; 1 gives the cleanest timings on a small machine."""
    shuffle_nodes: bool = True
    """Per-seed node order (:attr:`arkgpu.sim.placing.ExperimentConfig.shuffle_nodes`)."""


@dataclass(slots=True)
class PolicyStats:
    """One policy's runs."""

    runs: list[RunResult] = field(default_factory=list)
    peak_rss_mb: list[float] = field(default_factory=list)

    def unallocated(self) -> list[float]:
        """Unallocated GPU % at 100% arrived, per seed (in seed order)."""
        return [r.at(100) for r in sorted(self.runs, key=lambda r: r.seed)]

    def summary(self, published: Published | None) -> dict[str, object]:
        """The JSON object of this policy."""
        values = self.unallocated()
        decisions = np.concatenate([r.decision_s for r in self.runs]) * 1e3
        runs = sorted(self.runs, key=lambda r: r.seed)
        return {
            "unallocated_gpu_pct_at_100": statistics.fmean(values),
            "sd": statistics.stdev(values) if len(values) > 1 else 0.0,
            "per_seed": values,
            "seeds": [r.seed for r in runs],
            "unallocated_whole_gpu_pct_at_100": statistics.fmean(
                100.0 - r.gpu_allocation_pct[100] for r in runs
            ),
            "frag_pct_at_100": statistics.fmean(float(r.frag_pct[100]) for r in runs),
            "wall_s": [r.wall_s for r in runs],
            "wall_s_median": statistics.median(r.wall_s for r in runs),
            "cpu_s": [r.cpu_s for r in runs],
            "cpu_s_median": statistics.median(r.cpu_s for r in runs),
            "peak_rss_mb": max(self.peak_rss_mb),
            "decision_ms_median": float(np.median(decisions)),
            "decision_ms_p99": float(np.percentile(decisions, 99)),
            "published_mean": published.mean if published else None,
            "published_sd": published.sd if published else None,
            "allocation_pct_mean": np.mean([r.allocation_pct for r in runs], axis=0).tolist(),
            "frag_pct_mean": np.mean([r.frag_pct for r in runs], axis=0).tolist(),
        }


def _one_run(spec: BenchSpec, policy: str, seed: int) -> tuple[RunResult, float]:
    """Worker: one run, and this process's peak RSS in MB."""
    nodes, pods = load_nodes(spec.nodes_path), load_pods(spec.pods_path)
    config = ExperimentConfig(inflate=spec.inflate, seed=seed, shuffle_nodes=spec.shuffle_nodes)
    result = run_placement(nodes, pods, policy, config)
    return result, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def run_bench(
    spec: BenchSpec, progress: Callable[[str], None] | None = None
) -> dict[str, PolicyStats]:
    """Run every (policy, seed) pair; ``progress`` is called with a label after each run."""
    load_nodes(spec.nodes_path), load_pods(spec.pods_path)  # fail fast on a bad file
    stats = {p: PolicyStats() for p in spec.policies}
    context = multiprocessing.get_context("forkserver")
    with ProcessPoolExecutor(spec.jobs, mp_context=context, max_tasks_per_child=1) as pool:
        futures = {
            pool.submit(_one_run, spec, p, s): (p, s) for p in spec.policies for s in spec.seeds
        }
        for future in as_completed(futures):
            result, rss = future.result()
            stats[result.policy].runs.append(result)
            stats[result.policy].peak_rss_mb.append(rss)
            if progress is not None:
                progress(f"{result.policy} seed {result.seed}")
    return stats


def bench_report(spec: BenchSpec, stats: dict[str, PolicyStats]) -> dict[str, object]:
    """The bench's JSON document."""
    published = published_unallocated(spec.label)
    return {
        "trace": spec.label,
        "inflate": spec.inflate,
        "seeds": list(spec.seeds),
        "date": time.strftime("%Y-%m-%d"),
        "simulated": "placement simulator on the openb trace (no GPU involved)",
        "policies": {p: s.summary(published.get(p)) for p, s in stats.items()},
    }


def parse_seeds(text: str) -> tuple[int, ...]:
    """``42-51`` or ``42,43,50`` to a tuple of seeds."""
    seeds: list[int] = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        try:
            first, last = int(low), int(high or low)
        except ValueError:
            raise ValueError(f"bad seed list {text!r}: use 42-51 or 42,43") from None
        if last < first:
            raise ValueError(f"bad seed range {part!r}: end before start")
        seeds.extend(range(first, last + 1))
    return tuple(seeds)


def table_rows(report: dict[str, object]) -> Sequence[tuple[str, ...]]:
    """Rows of the human table: policy, ours, published, difference, run time, memory."""
    rows = []
    policies = report["policies"]
    assert isinstance(policies, dict)
    for name, p in policies.items():
        pub = p["published_mean"]
        rows.append(
            (
                name,
                f"{p['unallocated_gpu_pct_at_100']:.2f} ± {p['sd']:.2f}",
                "-" if pub is None else f"{pub:.2f} ± {p['published_sd']:.2f}",
                "-" if pub is None else f"{p['unallocated_gpu_pct_at_100'] - pub:+.2f}",
                f"{p['wall_s_median']:.1f} / {p['cpu_s_median']:.1f}",
                f"{p['decision_ms_median']:.3f} / {p['decision_ms_p99']:.3f}",
                f"{p['peak_rss_mb']:.0f}",
            )
        )
    return rows


TABLE_HEADER = (
    "policy",
    "unallocated % @100 (ours)",
    "published (FGD)",
    "diff",
    "run s wall/CPU (median)",
    "decision ms med/p99",
    "peak RSS MB",
)
