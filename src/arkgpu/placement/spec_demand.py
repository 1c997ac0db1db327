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

The measure is a transportation LP over the constrained classes ``k`` (one
per ``gpu_spec``) and the GPU models ``m``::

    maximise   sum_{k,m} f_km                 over models m that spec k admits
    subject to sum_m f_km <= D_k              (dual v_k)
               sum_k f_km <= S_m              (dual u_m)

``S_m`` is the GPU milli left on model ``m``; ``D_k`` is class ``k``'s share
of the GPU milli that has arrived so far times all GPU milli left (the pods
still to come are expected in the mix seen so far, until the cluster is full,
which is where the FGD protocol measures). Unconstrained pods are left out:
they can go anywhere, so the LP asks what the constrained pods alone need.
``u_m`` in [0, 1] is then the constrained demand one more milli of model ``m``
would serve: 1 where the constrained demand saturates the model, 0 where it
leaves room. Placing ``g`` milli of a pod of class ``k`` on model ``m`` loses
its reduced cost times ``g``: ``u_m * g`` for an unconstrained pod, and
``max(0, u_m + v_k - 1) * g`` for a constrained one (a ``T4|P100`` pod on a
P100 that P100-only pods need, while T4 has room, loses all of it).

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
(4 seeds of gpuspec33: 8.78% unallocated against 8.52%).

It is a soft cost in the policy's score, not a filter: an unconstrained pod
still takes a saturated model's GPU when nothing else fits. Where no pod has a
``gpu_spec`` the loss is exactly zero, so the openb traces place as before.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import linprog

from arkgpu.model.cluster import BoolArray, FloatArray, IntArray
from arkgpu.model.resources import Pod

#: Standard errors above the estimate at which a class's demand is taken
#: (module docstring): one, the usual width of "within the evidence".
UPPER_ERRORS = 1.0
#: Duals below this (per milli) count as zero: HiGHS returns them to about
#: 1e-9 and a loss of 1e-9 milli must not break the score's ties.
DUAL_TOLERANCE = 1e-7


@dataclass(frozen=True, slots=True)
class SpecDemand:
    """Per ``gpu_spec`` class and GPU model: milli of constrained demand lost per milli placed."""

    rows: Mapping[frozenset[str], int]
    """Row of each class in :attr:`reduced`; the empty spec (unconstrained) included."""
    reduced: FloatArray
    """[row, model]: reduced cost in [0, 1] (module docstring)."""

    @classmethod
    def none(cls) -> SpecDemand:
        """No constrained demand: every loss is zero."""
        return cls({}, np.zeros((0, 0)))

    def loss(self, pod: Pod, models: IntArray) -> FloatArray:
        """Per option (nodes of GPU model ``models``): milli-GPU of constrained demand lost."""
        row = self.rows.get(pod.gpu_spec)
        if row is None or pod.num_gpu == 0:
            return np.zeros(len(models))
        return np.asarray(self.reduced[row, models] * pod.total_gpu_milli, dtype=np.float64)


@dataclass(frozen=True, slots=True)
class Arrived:
    """What one ``gpu_spec`` class has brought so far."""

    milli: float
    """GPU milli asked for."""
    pods: int


def spec_demand(
    model_names: Sequence[str], supply: FloatArray, arrived: Mapping[frozenset[str], Arrived]
) -> SpecDemand:
    """The measure for GPU milli left per model ``supply`` and the arrivals by spec.

    A spec naming none of ``model_names`` has no GPU to use and is left out.
    """
    total = sum(a.milli for a in arrived.values())
    left = float(supply.sum())
    admits = {
        spec: np.array([m in spec for m in model_names]) & (supply > 0) for spec in arrived if spec
    }
    specs = [spec for spec, ok in admits.items() if ok.any() and arrived[spec].pods > 0]
    if total <= 0 or left <= 0 or not specs:
        return SpecDemand.none()
    demand = np.array(
        [
            arrived[s].milli / total * left * (1.0 + UPPER_ERRORS / math.sqrt(arrived[s].pods))
            for s in specs
        ]
    )
    reduced = _reduced([admits[s] for s in specs], demand, supply)
    rows = {frozenset[str](): 0} | {s: i + 1 for i, s in enumerate(specs)}
    return SpecDemand(rows, reduced)


def _reduced(admits: Sequence[BoolArray], demand: FloatArray, supply: FloatArray) -> FloatArray:
    """[unconstrained, then each class; model]: reduced costs at one demand."""
    u, v = _duals(admits, demand, np.asarray(supply, dtype=np.float64))
    reduced = np.vstack([u, np.maximum(u[None, :] + v[:, None] - 1.0, 0.0)])
    reduced[reduced < DUAL_TOLERANCE] = 0.0
    return reduced


def _duals(
    admits: Sequence[BoolArray], demand: FloatArray, supply: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """``(u, v)``: duals of the supply and demand rows of the transportation LP."""
    pairs = [(k, m) for k, ok in enumerate(admits) for m in np.flatnonzero(ok)]
    a = np.zeros((len(admits) + len(supply), len(pairs)))
    for j, (k, m) in enumerate(pairs):
        a[k, j] = 1.0
        a[len(admits) + m, j] = 1.0
    result = linprog(
        -np.ones(len(pairs)),
        A_ub=a,
        b_ub=np.concatenate([demand, supply]),
        bounds=(0, None),
        method="highs",
    )
    if result.status != 0:
        raise RuntimeError(f"spec demand LP failed: {result.message}")
    marginals = -np.asarray(result.ineqlin.marginals, dtype=np.float64)
    return marginals[len(admits) :], marginals[: len(admits)]
