"""LP prices of GPU shares and the value of what a GPU has left, for the ``arkgpu`` policy.

From the shapes seen so far, share classes (gpu_milli, gpu_spec) and whole
GPUs are counted and scaled so that their GPU demand equals the cluster's
capacity (the FGD protocol's regime at 100% arrived). The pattern LP of
:mod:`arkgpu.placement.bounds` over these counts gives a dual price ``y_i``
per share class. For each GPU model ``m`` the table ``V_m[r]``, the largest
sum of prices of admitted shares fitting in ``r`` milli (unbounded knapsack),
says what a GPU with ``r`` left can still earn; the *loss* of putting share
``i`` there is ``V_m[r] - y_i - V_m[r - s_i]``, never negative.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from arkgpu.model.arrays import FloatArray, IntArray
from arkgpu.model.cluster import ClusterState
from arkgpu.model.resources import MILLI_PER_GPU, Pod
from arkgpu.placement.bounds import ShareKey
from arkgpu.placement.share_prices import bagged_prices

Shape = tuple[int, int, int, frozenset[str]]


@dataclass(frozen=True, slots=True)
class PriceTables:
    """What one re-learning step produces: prices per share class and remainder tables."""

    price: dict[ShareKey, float]
    table: FloatArray
    """``V_m[r]``: one row per GPU model (in :attr:`ShareValues.models` order) and a zero
    row for nodes without a model, 1001 columns."""


class ShareValues:
    """Dual prices of share sizes and per-model remainder values; zero until learned.

    The cutting-stock LP pools the share classes of one size whatever their
    ``gpu_spec`` (about 20 sizes instead of sizes x specs: the re-learning step
    took 1.6 s with 33% of GPU pods constrained, against tens of ms pooled); the
    specs still decide which sizes count on each model's remainder table.

    :meth:`solve` only reads the cluster's static model list, so it may run on
    another thread while :meth:`loss` serves decisions; :meth:`install` swaps
    the result in.
    """

    def __init__(self, state: ClusterState, resamples: int = 0) -> None:
        self.resamples = resamples
        """Bootstrap replicates the prices are averaged over
        (:func:`arkgpu.placement.share_prices.bagged_prices`); 0: plain LP duals."""
        names = state.model_names
        self.models = [m for m in names if m]
        self.row_of_model = np.array(
            [self.models.index(m) if m else len(self.models) for m in names], dtype=np.int64
        )
        counts = Counter(
            state.nodes[i].gpu_model
            for i in range(len(state.nodes))
            for _ in range(state.nodes[i].num_gpu)
        )
        self.gpus = [counts[m] for m in self.models]
        self.capacity = sum(self.gpus) * MILLI_PER_GPU
        self.table = np.zeros((len(self.models) + 1, MILLI_PER_GPU + 1))
        self.price: dict[ShareKey, float] = {}

    def learn(self, shapes: Counter[Shape]) -> None:
        """Solve and install at once."""
        tables = self.solve(shapes)
        if tables is not None:
            self.install(tables)

    def solve(self, shapes: Counter[Shape]) -> PriceTables | None:
        """Cutting-stock LP over the shares in ``shapes`` and the remainder tables; None if
        there is no share or no GPU model to price."""
        shares: Counter[ShareKey] = Counter()
        for (_, milli, num, spec), count in shapes.items():
            if num == 1 and milli < MILLI_PER_GPU:
                shares[(milli, spec)] += count
        if not shares or not self.models:
            return None
        sizes = sorted({milli for milli, _ in shares})
        counts = [float(sum(c for (s, _), c in shares.items() if s == size)) for size in sizes]
        y = dict(
            zip(
                sizes,
                (MILLI_PER_GPU * float(v) for v in bagged_prices(sizes, counts, self.resamples)),
                strict=True,
            )
        )
        table = np.zeros((len(self.models) + 1, MILLI_PER_GPU + 1))
        cache: dict[tuple[tuple[int, float], ...], FloatArray] = {}
        for m, model in enumerate(self.models):
            here = {s for s, spec in shares if not spec or model in spec}
            admitted = tuple((s, y[s]) for s in sizes if s in here)
            if admitted not in cache:
                cache[admitted] = _remainder_values(admitted)
            table[m] = cache[admitted]
        return PriceTables({k: y[k[0]] for k in shares}, table)

    def install(self, tables: PriceTables) -> None:
        """Use ``tables`` from the next :meth:`loss` on."""
        self.price, self.table = tables.price, tables.table

    def loss(self, model_index: IntArray, left: IntArray, pod: Pod) -> FloatArray:
        """Pattern loss of putting ``pod`` on GPUs of these models with ``left`` milli free."""
        price = self.price.get((pod.gpu_milli, pod.gpu_spec))
        if price is None:
            return np.zeros(len(left))
        rows = self.row_of_model[model_index]
        return np.asarray(
            self.table[rows, left] - price - self.table[rows, left - pod.gpu_milli],
            dtype=np.float64,
        )


def _remainder_values(items: Sequence[tuple[int, float]]) -> FloatArray:
    """``V[r]``: most total price of items (size, price), each any number of times, within r.

    Unbounded knapsack, item by item: ``V[r] = max(V[r], V[r - s] + p)`` for rising
    ``r``, done one block of ``s`` capacities at a time (a block reads only the
    one before it, already final), then made non-decreasing.
    """
    value = np.zeros(MILLI_PER_GPU + 1)
    for size, price in items:
        for start in range(size, MILLI_PER_GPU + 1, size):
            stop = min(start + size, MILLI_PER_GPU + 1)
            np.maximum(
                value[start:stop], value[start - size : stop - size] + price, out=value[start:stop]
            )
    return np.asarray(np.maximum.accumulate(value), dtype=np.float64)
