"""Share prices that do not flip with sampling noise: bagged cutting-stock duals.

The ``arkgpu`` policy prices GPU shares with the duals of the cutting-stock
LP over the share counts seen so far (:mod:`arkgpu.placement.arkgpu_values`).
That LP often has two or more dual vertices whose objectives differ by less
than the counts' own sampling noise. On the openb gpushare40 trace (seed 42)
one prices the 320-440 milli shares at 1/3 of a GPU and the 550-650 ones at
2/3, the other at 1/4 and 3/4, and the two objectives differ by 0.5 GPU in
1,858 (3e-4); as the counts drift, re-learning flips between them seven times
in one run, and shares placed to continue the patterns of one price set are
then judged by the other.

:func:`bagged_prices` returns instead the mean of the duals over Poisson
bootstrap replicates of the counts: an estimate of the expected dual under
that noise. Each replicate's duals satisfy ``sum_i a_i y_i <= 1`` for every
pattern ``a``, a set that depends only on the sizes, so their mean does too:
it is a valid price vector. Where one vertex is clearly optimal every
replicate returns it and nothing changes; where two are within the noise the
mean lies between them and moves little from one re-learning to the next.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from arkgpu.model.arrays import FloatArray
from arkgpu.placement.bounds import cutting_stock


def bagged_prices(sizes: Sequence[int], counts: Sequence[float], resamples: int) -> FloatArray:
    """Mean cutting-stock duals over ``resamples`` Poisson replicates of ``counts``.

    With ``resamples`` 0, the plain duals of ``counts``. The replicates are
    drawn from a generator seeded by the counts themselves, so the prices are
    a function of the snapshot alone (the re-learning task may run on another
    thread, and a run is reproducible). Every replicate starts from the
    patterns of the plain solve, which usually leaves it one or two rounds.
    """
    y, columns = cutting_stock(sizes, counts)
    if resamples <= 0:
        return y
    lam = np.asarray(counts, dtype=np.float64)
    rng = np.random.default_rng([len(sizes), *(int(c) for c in lam)])
    total = np.zeros(len(sizes))
    for _ in range(resamples):
        total += cutting_stock(sizes, rng.poisson(lam).astype(np.float64).tolist(), columns)[0]
    return total / resamples
