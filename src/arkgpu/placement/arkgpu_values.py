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

import numpy as np

from arkgpu.model.cluster import ClusterState, FloatArray, IntArray
from arkgpu.model.resources import MILLI_PER_GPU, Pod
from arkgpu.placement.bounds import ShareKey, cutting_stock_prices

Shape = tuple[int, int, int, frozenset[str]]


class ShareValues:
    """Dual prices of share sizes and per-model remainder values; zero until learned.

    The cutting-stock LP pools the share classes of one size whatever their
    ``gpu_spec`` (about 20 sizes instead of sizes x specs: the re-learning step
    took 1.6 s with 33% of GPU pods constrained, against tens of ms pooled); the
    specs still decide which sizes count on each model's remainder table.
    """

    def __init__(self, state: ClusterState) -> None:
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
        """Re-solve the cutting-stock LP over the shares seen and rebuild the remainder tables."""
        shares: Counter[ShareKey] = Counter()
        for (_, milli, num, spec), count in shapes.items():
            if num == 1 and milli < MILLI_PER_GPU:
                shares[(milli, spec)] += count
        if not shares or not self.models:
            return
        sizes = sorted({milli for milli, _ in shares})
        counts = [float(sum(c for (s, _), c in shares.items() if s == size)) for size in sizes]
        y = dict(
            zip(
                sizes,
                (MILLI_PER_GPU * float(v) for v in cutting_stock_prices(sizes, counts)),
                strict=True,
            )
        )
        self.price = {k: y[k[0]] for k in shares}
        cache: dict[tuple[tuple[int, float], ...], FloatArray] = {}
        for m, model in enumerate(self.models):
            here = {s for s, spec in shares if not spec or model in spec}
            admitted = tuple((s, y[s]) for s in sizes if s in here)
            if admitted not in cache:
                cache[admitted] = _remainder_values(admitted)
            self.table[m] = cache[admitted]

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
    """``V[r]``: most total price of items (size, price), each any number of times, within r."""
    value = np.zeros(MILLI_PER_GPU + 1)
    if not items:
        return value
    sizes = np.array([size for size, _ in items], dtype=np.int64)
    prices = np.array([price for _, price in items])
    for r in range(1, MILLI_PER_GPU + 1):
        fits = sizes <= r
        best = (value[r - sizes[fits]] + prices[fits]).max() if fits.any() else 0.0
        value[r] = max(value[r - 1], best)
    return value
