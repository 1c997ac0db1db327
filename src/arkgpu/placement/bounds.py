"""A true lower bound on unallocated GPU %: the pattern LP over single GPUs.

Relax every constraint but the GPU shares themselves: GPUs become independent
bins of 1000 milli, and CPU, memory, node boundaries and (unless
``by_model``) GPU models are ignored. A whole-GPU pod of ``k`` GPUs becomes
``k`` items of 1000. A *pattern* is a multiset of GPU-share sizes that fits in
one GPU. The LP

    maximise   sum_p x_p * fill_p + 1000 * w
    subject to sum_p a_ip x_p <= n_i      (dual y_i: pods of share size i)
               sum_p x_p + w <= G         (dual z: GPUs)
               0 <= w <= W                (whole GPUs asked for)

is solved by column generation: the restricted master over the patterns found
so far is solved with HiGHS (``scipy.optimize.linprog``), and the pricing
problem, the pattern of largest reduced profit ``sum_i a_i (s_i - y_i) - z``,
is a bounded knapsack of capacity 1000 solved exactly by dynamic programming.
When no pattern has positive reduced profit the LP optimum is reached; every
integral placement is a feasible point, so ``100 * (1 - optimum / capacity)``
is a lower bound on the unallocated GPU % of *any* scheduler, online or not.

With ``by_model`` the bound keeps GPU models exact: pods with a ``gpu_spec``
may only use GPUs of those models, so the LP gets one GPU budget per model and
patterns are priced per model (items admitted there). This only tightens it.

A pod that no node could host even when empty (more GPUs, CPU or memory than
any node has, or, with ``by_model``, only GPU models no node with enough of
them has) is placed by no scheduler, so it is left out of the LP before it is
solved: exact, and it only tightens the bound (on a ``gpu_spec`` variant of
the default trace, 8-GPU pods that may only use T4 or P100, whose nodes have
2 or 4 GPUs).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import linprog

from arkgpu.model.arrays import FloatArray
from arkgpu.model.resources import MILLI_PER_GPU, Node, Pod

#: Reduced profit (milli-GPU) below which a pattern does not enter the master:
#: HiGHS' default optimality tolerance is 1e-7 relative; 1e-6 milli is far below
#: any real improvement (sizes are integers) and stops cycling on round-off.
PRICING_TOLERANCE = 1e-6
#: Safety cap on column-generation rounds; each round adds at least one new
#: pattern per model and the pattern count is finite, so this is never binding
#: on the openb traces (about 20 share sizes converge in under 40 rounds).
MAX_ROUNDS = 500


@dataclass(frozen=True, slots=True)
class LpBound:
    """The LP optimum and what it means for unallocated GPU %."""

    packed_milli: float
    """Most GPU milli the relaxation can place."""
    capacity_milli: int
    demand_milli: int
    """GPU milli asked for by the pods given."""
    rounds: int
    """Column-generation rounds until no pattern had positive reduced profit."""
    patterns: int
    left_out: dict[int, float] = field(default_factory=dict)
    """Pods the LP optimum leaves unplaced, by GPU milli per GPU (1000: whole-GPU
    pods, counted in GPUs); fractional, and one of possibly many optima. The
    unhostable pods are included."""
    unhostable: int = 0
    """GPU pods no node could host even when empty, left out before solving."""

    @property
    def unallocated_pct(self) -> float:
        """Lower bound on unallocated GPU % of capacity."""
        return 100.0 * (1.0 - self.packed_milli / self.capacity_milli)


@dataclass(slots=True)
class PatternMaster:
    """Restricted master problem: items (share size, spec class) and model GPU budgets."""

    sizes: list[int]
    counts: list[float]
    admits: list[list[bool]]
    """[item][model]: the item may go to a GPU of this model."""
    gpus: list[int]
    """GPUs per model."""
    whole: list[float]
    """Whole GPUs asked for, per spec class column of :attr:`whole_admits`."""
    whole_admits: list[list[bool]]
    columns: list[tuple[int, tuple[int, ...]]]
    """(model, count of each item) per pattern."""


def _knapsack(values: FloatArray, sizes: Sequence[int], bounds: Sequence[float]) -> list[int]:
    """Bounded knapsack of capacity 1000 by binary splitting; returns counts per item."""
    pieces: list[tuple[int, int]] = []
    for i, (size, bound) in enumerate(zip(sizes, bounds, strict=True)):
        left, k = min(int(bound), MILLI_PER_GPU // size), 1
        while left > 0 and values[i] > 0:
            take = min(k, left)
            pieces.append((i, take))
            left -= take
            k *= 2
    best = np.zeros(MILLI_PER_GPU + 1)
    choice = np.full((len(pieces), MILLI_PER_GPU + 1), False)
    for j, (i, take) in enumerate(pieces):
        w = sizes[i] * take
        gain = np.concatenate(
            [np.full(w, -np.inf), best[: MILLI_PER_GPU + 1 - w] + values[i] * take]
        )
        choice[j] = gain > best
        best = np.maximum(best, gain)
    counts, cap = [0] * len(sizes), int(np.argmax(best))
    for j in range(len(pieces) - 1, -1, -1):
        if choice[j, cap]:
            i, take = pieces[j]
            counts[i] += take
            cap -= sizes[i] * take
    return counts


@dataclass(frozen=True, slots=True)
class MasterSolution:
    """Optimum of the restricted master with its primal and dual values."""

    optimum: float
    y: FloatArray
    """Duals of the item rows (share classes)."""
    z: FloatArray
    """Duals of the GPU budget rows (models)."""
    x: FloatArray
    """Primal: patterns in :attr:`PatternMaster.columns` order, then whole GPUs by
    (spec class, model)."""
    rounds: int = 1


def _solve(master: PatternMaster) -> MasterSolution:
    """Solve the restricted master: optimum, item duals y, model duals z, primal x."""
    n_items, n_models, n_whole = len(master.sizes), len(master.gpus), len(master.whole)
    n_cols = len(master.columns) + n_whole * n_models
    a = np.zeros((n_items + n_models + n_whole, n_cols))
    profit = np.zeros(n_cols)
    for c, (model, counts) in enumerate(master.columns):
        a[:n_items, c] = counts
        a[n_items + model, c] = 1
        profit[c] = float(np.dot(counts, master.sizes))
    upper = np.full(n_cols, np.inf)
    for k in range(n_whole):
        for m in range(n_models):
            c = len(master.columns) + k * n_models + m
            a[n_items + m, c] = 1
            a[n_items + n_models + k, c] = 1
            profit[c] = MILLI_PER_GPU
            upper[c] = np.inf if master.whole_admits[k][m] else 0.0
    rhs = np.array(master.counts + master.gpus + master.whole, dtype=np.float64)
    res = linprog(
        -profit,
        A_ub=a,
        b_ub=rhs,
        bounds=list(zip([0.0] * n_cols, upper, strict=True)),
        method="highs",
    )
    if res.status != 0:
        raise RuntimeError(f"LP bound: HiGHS failed: {res.message}")
    duals = -np.asarray(res.ineqlin.marginals)
    return MasterSolution(
        float(-res.fun), duals[:n_items], duals[n_items : n_items + n_models], np.asarray(res.x)
    )


def _price(
    master: PatternMaster, y: FloatArray, z: FloatArray
) -> list[tuple[int, tuple[int, ...]]]:
    """Patterns with positive reduced profit, at most one per model."""
    found = []
    for m in range(len(master.gpus)):
        values = np.array(
            [s - y[i] if master.admits[i][m] else -1.0 for i, s in enumerate(master.sizes)]
        )
        counts = _knapsack(values, master.sizes, master.counts)
        if float(np.dot(counts, values)) - z[m] > PRICING_TOLERANCE:
            found.append((m, tuple(counts)))
    return found


ShareKey = tuple[int, frozenset[str]]
"""A GPU-share item class: (gpu_milli, gpu_spec)."""


def build_master(
    models: Sequence[str],
    gpus: Sequence[int],
    shares: dict[ShareKey, float],
    whole: dict[frozenset[str], float],
) -> PatternMaster:
    """Master over ``models`` (with ``gpus`` each), share counts and whole-GPU counts by spec.

    Counts may be fractional (a learned distribution scaled to the cluster).
    An empty spec admits every model; a spec naming none of ``models`` admits all,
    which is what a single pooled model ``[""]`` means.
    """

    def admits(spec: frozenset[str]) -> list[bool]:
        return [not spec or m in spec or not any(x in spec for x in models) for m in models]

    items = sorted(shares, key=lambda k: (k[0], sorted(k[1])))
    master = PatternMaster(
        sizes=[s for s, _ in items],
        counts=[shares[k] for k in items],
        admits=[admits(spec) for _, spec in items],
        gpus=list(gpus),
        whole=list(whole.values()),
        whole_admits=[admits(spec) for spec in whole],
        columns=[],
    )
    for i, size in enumerate(master.sizes):
        for m in range(len(models)):
            if master.admits[i][m]:
                single = [0] * len(items)
                single[i] = max(1, min(int(master.counts[i]), MILLI_PER_GPU // size))
                master.columns.append((m, tuple(single)))
    return master


def _master(nodes: Sequence[Node], pods: Sequence[Pod], by_model: bool) -> PatternMaster:
    models = sorted({n.gpu_model for n in nodes if n.num_gpu}) if by_model else [""]
    per_model = Counter(n.gpu_model if by_model else "" for n in nodes for _ in range(n.num_gpu))
    shares: Counter[ShareKey] = Counter(
        (p.gpu_milli, p.gpu_spec if by_model else frozenset()) for p in pods if p.is_gpu_share
    )
    whole: Counter[frozenset[str]] = Counter()
    for p in pods:
        if p.gpu_milli == MILLI_PER_GPU:
            whole[p.gpu_spec if by_model else frozenset()] += p.num_gpu
    return build_master(
        models, [per_model[m] for m in models], dict(shares.items()), dict(whole.items())
    )


def generate_columns(master: PatternMaster) -> MasterSolution:
    """Column generation to optimality; the last master's solution and the rounds taken."""
    rounds = 0
    while True:
        solution = _solve(master)
        rounds += 1
        new = [c for c in _price(master, solution.y, solution.z) if c not in master.columns]
        if not new or rounds >= MAX_ROUNDS:
            return MasterSolution(solution.optimum, solution.y, solution.z, solution.x, rounds)
        master.columns.extend(new)


def _left_out(master: PatternMaster, x: FloatArray) -> dict[int, float]:
    """Item counts (by size) and whole GPUs that the primal ``x`` does not place."""
    placed = np.zeros(len(master.sizes))
    for value, (_, counts) in zip(x[: len(master.columns)], master.columns, strict=True):
        placed += value * np.asarray(counts, dtype=np.float64)
    out: dict[int, float] = {}
    for size, asked, got in zip(master.sizes, master.counts, placed, strict=True):
        out[size] = out.get(size, 0.0) + max(asked - float(got), 0.0)
    whole_placed = float(x[len(master.columns) :].sum())
    out[MILLI_PER_GPU] = max(sum(master.whole) - whole_placed, 0.0)
    return {size: count for size, count in sorted(out.items()) if count > 1e-6}


def hostable(nodes: Sequence[Node], pod: Pod, by_model: bool = True) -> bool:
    """Some node, empty, has the pod's GPUs, CPU and memory (and, ``by_model``, its model)."""
    return any(
        n.num_gpu >= max(pod.num_gpu, 1)
        and n.cpu_milli >= pod.cpu_milli
        and n.memory_mib >= pod.memory_mib
        and (not by_model or not pod.gpu_spec or n.gpu_model in pod.gpu_spec)
        for n in nodes
    )


def _split_hostable(
    nodes: Sequence[Node], pods: Sequence[Pod], by_model: bool
) -> tuple[list[Pod], list[Pod]]:
    """GPU pods some empty node could host, and the others (checked once per request)."""
    verdict: dict[tuple[object, ...], bool] = {}
    kept: list[Pod] = []
    unhostable: list[Pod] = []
    for pod in pods:
        if pod.num_gpu == 0:
            continue
        key = (*pod.shape, pod.memory_mib)
        if key not in verdict:
            verdict[key] = hostable(nodes, pod, by_model)
        (kept if verdict[key] else unhostable).append(pod)
    return kept, unhostable


def lp_bound(nodes: Sequence[Node], pods: Sequence[Pod], by_model: bool = True) -> LpBound:
    """Lower bound on unallocated GPU % when exactly ``pods`` have arrived on ``nodes``."""
    kept, unhostable = _split_hostable(nodes, pods, by_model)
    master = _master(nodes, kept, by_model)
    capacity = sum(n.num_gpu for n in nodes) * MILLI_PER_GPU
    solution = generate_columns(master)
    left_out = Counter(_left_out(master, solution.x))
    for p in unhostable:
        left_out[p.gpu_milli] += p.num_gpu if p.gpu_milli == MILLI_PER_GPU else 1
    return LpBound(
        packed_milli=solution.optimum,
        capacity_milli=capacity,
        demand_milli=sum(p.total_gpu_milli for p in pods),
        rounds=solution.rounds,
        patterns=len(master.columns),
        left_out=dict(sorted(left_out.items())),
        unhostable=len(unhostable),
    )


Pattern = tuple[int, ...]
"""How many shares of each size one GPU holds, in the order of the sizes."""


def cutting_stock_prices(sizes: Sequence[int], counts: Sequence[float]) -> FloatArray:
    """Dual prices (in GPUs) of share sizes in the cutting-stock LP over single GPUs.

    ``min sum_p x_p`` subject to ``sum_p a_ip x_p >= n_i``: the fewest GPUs
    that hold every share. The dual ``y_i`` is how much of a GPU a share of
    size ``s_i`` costs in the best fractional packing; patterns are generated
    by the same knapsack pricing until none has ``sum_i a_i y_i > 1``.
    """
    return cutting_stock(sizes, counts)[0]


def cutting_stock(
    sizes: Sequence[int], counts: Sequence[float], start: Sequence[Pattern] = ()
) -> tuple[FloatArray, list[Pattern]]:
    """:func:`cutting_stock_prices` and the patterns generated, starting from ``start``.

    Passing the patterns of a solve over nearby counts saves most rounds: the
    master starts close to its optimum and the pricing step only confirms it.
    """
    n = len(sizes)
    columns = [
        tuple(int(i == j) * (MILLI_PER_GPU // s) for j in range(n)) for i, s in enumerate(sizes)
    ]
    columns += [c for c in start if c not in columns]
    y = np.zeros(n)
    for _ in range(MAX_ROUNDS):
        a = np.array(columns, dtype=np.float64).T
        res = linprog(
            np.ones(len(columns)),
            A_ub=-a,
            b_ub=-np.asarray(counts, dtype=np.float64),
            method="highs",
        )
        if res.status != 0:
            raise RuntimeError(f"cutting-stock LP: HiGHS failed: {res.message}")
        y = -np.asarray(res.ineqlin.marginals)
        new = tuple(_knapsack(y, sizes, [MILLI_PER_GPU] * n))
        if float(np.dot(new, y)) <= 1.0 + PRICING_TOLERANCE or new in columns:
            break
        columns.append(new)
    return y, columns
