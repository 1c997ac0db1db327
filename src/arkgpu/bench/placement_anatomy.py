"""Where a policy loses GPUs at 100% arrived, and how far that is from the LP bound.

At the FGD protocol's 100% checkpoint every GPU milli not allocated is in one
of three places, and they add up exactly to the unallocated share:

- ``free_gpu_pct``: wholly free GPUs (on openb, almost always on nodes whose
  CPU or memory is used up);
- ``mix_waste_pct``: the waste that the GPU shares the policy accepted carry
  even when packed as well as possible, ``1000 * F - share_milli``, where ``F``
  is the fewest GPUs (fractional cutting-stock optimum, GPU models pooled)
  that hold those shares; it depends on *which* shares got in, not on where
  they went;
- ``packing_excess_pct``: GPUs holding shares beyond ``F``, the price of
  placing them online and one at a time (``F`` is fractional, so a little of
  it is integrality).

The LP bound of :mod:`arkgpu.placement.bounds` fills every GPU and places the
best mix of the arrived pods; ``left_out`` says which pods its optimum
leaves out. An online scheduler that places every pod that fits cannot leave
a pod out, so on a trace where the LP drops, say, 810-milli shares that a
scheduler must accept, the distance to the bound sits in ``mix_waste_pct``
and no packing can close it.
"""

from __future__ import annotations

import multiprocessing
import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from arkgpu.model.resources import MILLI_PER_GPU, Pod
from arkgpu.placement.bounds import cutting_stock_prices, lp_bound
from arkgpu.placement.defrag import DefragProblem
from arkgpu.sim.replay import place_until
from arkgpu.traces.openb import load_nodes, load_pods


@dataclass(frozen=True, slots=True)
class Anatomy:
    """One policy, one seed: the unallocated share taken apart (module docstring)."""

    policy: str
    seed: int
    unallocated_pct: float
    free_gpu_pct: float
    mix_waste_pct: float
    packing_excess_pct: float
    share_gpus: int
    """GPUs holding at least one GPU share."""
    share_gpus_fractional_min: float
    """Fewest GPUs (fractional) that could hold the same shares."""
    lp_bound_pct: float
    failed: dict[int, int] = field(default_factory=dict)
    """Pods that found no room, by GPU milli per GPU (1000: whole-GPU pods, in GPUs)."""
    lp_left_out: dict[int, float] = field(default_factory=dict)
    """Pods the LP optimum leaves out, same keys."""


def _by_size(pods: Sequence[Pod]) -> dict[int, int]:
    counts: Counter[int] = Counter()
    for pod in pods:
        if pod.num_gpu > 0:
            counts[pod.gpu_milli] += pod.num_gpu if pod.gpu_milli == MILLI_PER_GPU else 1
    return dict(sorted(counts.items()))


def take_apart(
    problem: DefragProblem,
    lp_pct: float,
    lp_left_out: dict[int, float],
    policy: str = "",
    seed: int = -1,
) -> Anatomy:
    """Split the unallocated share of ``problem.state`` into free, mix waste and excess."""
    state = problem.state
    capacity = state.total_gpu_milli
    shares = [(pod, where) for pod, where in problem.running if pod.is_gpu_share]
    holders = {(where.node, where.gpus[0]) for _, where in shares}
    counts = Counter(pod.gpu_milli for pod, _ in shares)
    sizes = sorted(counts)
    fractional = 0.0
    if sizes:
        prices = cutting_stock_prices(sizes, [float(counts[s]) for s in sizes])
        fractional = float(np.dot(prices, [counts[s] for s in sizes]))
    share_milli = sum(pod.gpu_milli for pod, _ in shares)
    free = int((state.gpu_exists & (state.gpu_left == MILLI_PER_GPU)).sum())
    unallocated = 100.0 * (1.0 - state.allocated_gpu_milli / capacity)
    return Anatomy(
        policy=policy,
        seed=seed,
        unallocated_pct=unallocated,
        free_gpu_pct=100.0 * free * MILLI_PER_GPU / capacity,
        mix_waste_pct=100.0 * (fractional * MILLI_PER_GPU - share_milli) / capacity,
        packing_excess_pct=100.0 * (len(holders) - fractional) * MILLI_PER_GPU / capacity,
        share_gpus=len(holders),
        share_gpus_fractional_min=fractional,
        lp_bound_pct=lp_pct,
        failed=_by_size(problem.waiting),
        lp_left_out=lp_left_out,
    )


@dataclass(frozen=True, slots=True)
class AnatomySpec:
    """What to take apart: one trace, policies x seeds."""

    nodes_path: Path
    pods_path: Path
    policies: tuple[str, ...]
    seeds: tuple[int, ...]
    inflate: float = 1.3
    jobs: int = 1


def _one(spec: AnatomySpec, policy: str, seed: int) -> Anatomy:
    nodes, pods = load_nodes(spec.nodes_path), load_pods(spec.pods_path)
    problem = place_until(nodes, pods, policy, seed, spec.inflate)
    arrived = [pod for pod, _ in problem.running] + list(problem.waiting)
    bound = lp_bound(nodes, arrived)
    return take_apart(problem, bound.unallocated_pct, bound.left_out, policy, seed)


def run_anatomy(spec: AnatomySpec, progress: Callable[[str], None] | None = None) -> list[Anatomy]:
    """Every (policy, seed), in that order; ``spec.jobs`` worker processes;
    ``progress(label)`` after each."""
    tasks = [(p, s) for p in spec.policies for s in spec.seeds]
    tell = progress or (lambda _label: None)
    if spec.jobs <= 1:
        results = []
        for p, s in tasks:
            results.append(_one(spec, p, s))
            tell(f"{p} seed {s}")
        return results
    context = multiprocessing.get_context("forkserver")
    with ProcessPoolExecutor(spec.jobs, mp_context=context) as pool:
        futures = [pool.submit(_one, spec, p, s) for p, s in tasks]
        results = []
        for (p, s), future in zip(tasks, futures, strict=True):
            results.append(future.result())
            tell(f"{p} seed {s}")
        return results


PARTS = ("unallocated_pct", "free_gpu_pct", "mix_waste_pct", "packing_excess_pct", "lp_bound_pct")


def summarise(results: Sequence[Anatomy]) -> dict[str, dict[str, Any]]:
    """Per policy: means over seeds of each part, and mean failed / left-out pods by size."""
    out: dict[str, dict[str, Any]] = {}
    for policy in dict.fromkeys(r.policy for r in results):
        runs = [r for r in results if r.policy == policy]
        doc: dict[str, Any] = {"seeds": [r.seed for r in runs]}
        for part in (*PARTS, "share_gpus", "share_gpus_fractional_min"):
            doc[part] = statistics.fmean(float(getattr(r, part)) for r in runs)
        doc["failed_mean"] = _mean_counts([r.failed for r in runs])
        doc["lp_left_out_mean"] = _mean_counts([r.lp_left_out for r in runs])
        out[policy] = doc
    return out


def _mean_counts(rows: Sequence[dict[int, int] | dict[int, float]]) -> dict[int, float]:
    keys = sorted({k for row in rows for k in row})
    return {k: statistics.fmean(float(row.get(k, 0)) for row in rows) for k in keys}
