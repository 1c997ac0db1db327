"""Which GPU models the pods with a ``gpu_spec`` will need, for the ``arkgpu`` policy.

A pod whose ``gpu_spec`` names a few GPU models can only use their free GPUs;
a pod without one can use any. When the constrained demand still to come
exceeds what its models have left, every GPU of those models that an
unconstrained pod takes is a GPU a constrained pod will miss, while an
unconstrained pod would have found room elsewhere. The scarcity term
(:mod:`arkgpu.placement.scarcity`) sees hosts thin out shape by shape from
static capacities; it does not compare the demand with what is left, so on a
cluster where the constrained demand for V100 and P100 exceeds their GPUs it
still let pods that fit anywhere fill them (gpuspec33 variant, seed 42: 118
V100 and 94 P100 GPUs held by unconstrained pods at 100% arrived, while pods
that may only use those models failed and 404 GPUs of other models were
free).

The measure is a transportation LP over the constrained classes and the GPU
models. Whole-GPU pods need wholly free GPUs, shares can also use the milli
left on GPUs already in use, so each class ``k`` (one per ``gpu_spec``) has a
whole and a share row, and each model ``m`` a free and a partial supply::

    maximise   sum f                          over admitted (row, supply) pairs
    subject to sum_s f_rs <= D_r              (dual v_r; row r = class and kind)
               sum_r f_rs <= S_s              (dual u_s; s = model and free/partial)

where whole rows may only use free supply. ``S`` is the GPU milli left on
wholly free GPUs of ``m`` and on its partly used ones; ``D_r`` is the row's
share of the GPU milli that has arrived so far times all GPU milli left (the
pods still to come are expected in the mix seen so far, until the cluster is
full, which is where the FGD protocol measures). Unconstrained pods are left
out: they can go anywhere, so the LP asks what the constrained pods alone
need. ``u_s`` in [0, 1] is the constrained demand one more milli of that
supply would serve. A placement loses its reduced cost: for ``g`` milli on
model ``m``, ``(u_free + v_r - 1) g`` for a whole-GPU pod,
``(u_partial + v_r - 1) g`` for a share on a GPU in use, and
``1000 u_free - (1000 - g) u_partial + (v_r - 1) g`` for a share that starts
a free GPU (it takes the GPU from the free supply and leaves the rest as
partial), never below 0; ``v = 1`` for unconstrained pods. So a share that
fits anywhere may fill the gap on a model whose constrained demand is
whole-GPU pods, but not start one of its free GPUs; a ``T4|P100`` pod on a
P100 that P100-only pods need, while T4 has room, loses all of it.

The cost jumps from 0 to 1 as the demand crosses the supply, and the demand
is an estimate from the pods seen: early on from a handful of a class, later
from a few dozen. On a low draw a saturated model reads as free, and pods
that fit anywhere pour into it (gs40-spec33-s13 variant, seed 42: 32 GPU
pods in, two of them V100-only, put V100 at 5.3% of the demand against 6.4%
of the GPUs, and unconstrained pods took 49 V100M16 GPUs before the next
re-learning; gpuspec33, seed 42: the P100 read as free between arrivals 620
and 910). So a class seen ``n_k`` times is taken at one standard error above
its estimate, ``D_k (1 + 1 / sqrt(n_k))`` (a count's relative standard error
is about ``1 / sqrt(n)``): a model is left to unconstrained pods only while
the evidence says the constrained pods fit. Averaging the reduced costs over
demands of half and twice the estimate was tried first and did no better
(4 seeds of gpuspec33: 8.78% unallocated against 8.52%). A first version
without the free/partial split charged a share that fills a gap as much as
one that starts a GPU; the split changed little (lower on 9 of 12 variant
files, within the seed spread, docs/BENCHMARKS.md) but prices what whole-GPU
pods can use.

It is a soft cost in the policy's score, not a filter: an unconstrained pod
still takes a saturated model's GPU when nothing else fits. Where no pod has a
``gpu_spec`` the loss is exactly zero, so the openb traces place as before.

Known weakness: the LP assumes an unconstrained pod kept off a saturated model
finds room elsewhere. Where the constrained demand is mostly GPU shares and
the whole cluster fills up (gpushare60/80 with specs), that room does not
exist at the end: the term then only moves failures from constrained to
unconstrained pods and packs the shares in smaller pools, 0.1-0.3 point worse
than without it. Ten variants that tried to tell the two cases apart (all
classes in the LP in cutting-stock price units, whole-GPU rows only, smaller
share losses, ...) each gave back more on the files where the term gains
(docs/BENCHMARKS.md, "Follow-up on that regression").
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import linprog

from arkgpu.model.arrays import BoolArray, FloatArray, IntArray
from arkgpu.model.resources import MILLI_PER_GPU, Pod

#: Standard errors above the estimate at which a class's demand is taken
#: (module docstring): one, the usual width of "within the evidence".
UPPER_ERRORS = 1.0
#: Duals below this (per milli) count as zero: HiGHS returns them to about
#: 1e-9 and a loss of 1e-9 milli must not break the score's ties.
DUAL_TOLERANCE = 1e-7


FREE, PARTIAL = 0, 1
"""Supply rows of :attr:`SpecDemand.u`: milli on wholly free GPUs, and on GPUs in use."""
WHOLE, SHARE = 0, 1
"""Columns of :attr:`SpecDemand.v`: a class's whole-GPU and GPU-share pods."""


@dataclass(frozen=True, slots=True)
class SpecDemand:
    """Duals of the transportation LP (module docstring), to price placements with."""

    rows: Mapping[frozenset[str], int]
    """Row of each class in :attr:`v`; 0 is the unconstrained spec (and unseen ones)."""
    u: FloatArray
    """[FREE or PARTIAL, model]: constrained demand one more milli there would serve."""
    v: FloatArray
    """[row, WHOLE or SHARE]: demand rows' duals; 1 where the row is not in the LP."""

    @classmethod
    def none(cls) -> SpecDemand:
        """No constrained demand: every loss is zero."""
        return cls({}, np.zeros((2, 0)), np.ones((1, 2)))

    @property
    def empty(self) -> bool:
        """No constrained demand was learned: every loss is zero."""
        return bool(self.u.shape[1] == 0)

    def loss(self, pod: Pod, models: IntArray, left: IntArray | None = None) -> FloatArray:
        """Per option on GPU models ``models``: milli-GPU of constrained demand lost.

        ``left``, the milli left on each option's GPU, is needed for a GPU share.
        """
        if self.empty or pod.num_gpu == 0:
            return np.zeros(len(models))
        row = self.rows.get(pod.gpu_spec, 0)
        free, partial = self.u[FREE, models], self.u[PARTIAL, models]
        if not pod.is_gpu_share:
            lost = (free + self.v[row, WHOLE] - 1.0) * pod.total_gpu_milli
        else:
            g = pod.gpu_milli
            own = (self.v[row, SHARE] - 1.0) * g
            fresh = MILLI_PER_GPU * free - (MILLI_PER_GPU - g) * partial + own
            if left is None:
                raise ValueError("a GPU share's loss needs the milli left on each option's GPU")
            lost = np.where(left >= MILLI_PER_GPU, fresh, partial * g + own)
        return np.asarray(np.maximum(lost, 0.0), dtype=np.float64)


@dataclass(frozen=True, slots=True)
class Arrived:
    """What one ``gpu_spec`` class has brought so far, of one kind (whole or share)."""

    milli: float
    """GPU milli asked for."""
    pods: int


ClassKey = tuple[frozenset[str], bool]
"""A demand row: (``gpu_spec``, is a GPU share)."""


def spec_demand(
    model_names: Sequence[str], supply: FloatArray, arrived: Mapping[ClassKey, Arrived]
) -> SpecDemand:
    """The measure for GPU milli left ``supply`` ([FREE or PARTIAL, model]) and the
    arrivals by spec and kind.

    A spec naming none of ``model_names`` has no GPU to use and is left out.
    """
    total = sum(a.milli for a in arrived.values())
    left = float(supply.sum())
    admits = {
        (spec, share): _admits(np.array([m in spec for m in model_names]), share) & (supply > 0)
        for spec, share in arrived
        if spec
    }
    keys = [key for key, ok in admits.items() if ok.any() and arrived[key].pods > 0]
    if total <= 0 or left <= 0 or not keys:
        return SpecDemand.none()
    demand = np.array(
        [
            arrived[k].milli / total * left * (1.0 + UPPER_ERRORS / math.sqrt(arrived[k].pods))
            for k in keys
        ]
    )
    u, v_rows = _duals([admits[k] for k in keys], demand, supply)
    specs = list(dict.fromkeys(spec for spec, _ in keys))
    rows = {frozenset[str](): 0} | {s: i + 1 for i, s in enumerate(specs)}
    v = np.ones((len(rows), 2))
    for (spec, share), dual in zip(keys, v_rows, strict=True):
        v[rows[spec], SHARE if share else WHOLE] = dual
    u[u < DUAL_TOLERANCE] = 0.0
    v[v > 1.0 - DUAL_TOLERANCE] = 1.0
    return SpecDemand(rows, u, v)


def _admits(named: BoolArray, share: bool) -> BoolArray:
    """[FREE or PARTIAL, model]: supply a row may use (whole-GPU pods: free GPUs only)."""
    return np.vstack([named, named & share])


def _duals(
    admits: Sequence[BoolArray], demand: FloatArray, supply: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """``(u, v)``: duals of the supply ([FREE or PARTIAL, model]) and demand rows."""
    flat = [np.flatnonzero(ok.ravel()) for ok in admits]
    pairs = [(r, s) for r, cells in enumerate(flat) for s in cells]
    a = np.zeros((len(admits) + supply.size, len(pairs)))
    for j, (r, s) in enumerate(pairs):
        a[r, j] = 1.0
        a[len(admits) + s, j] = 1.0
    result = linprog(
        -np.ones(len(pairs)),
        A_ub=a,
        b_ub=np.concatenate([demand, supply.ravel()]),
        bounds=(0, None),
        method="highs",
    )
    if result.status != 0:
        raise RuntimeError(f"spec demand LP failed: {result.message}")
    marginals = -np.asarray(result.ineqlin.marginals, dtype=np.float64)
    return marginals[len(admits) :].reshape(supply.shape), marginals[: len(admits)]
