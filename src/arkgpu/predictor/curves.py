"""Level 1: a model's latency alone on a share of a GPU, as a formula with named parameters.

The formula (one set of parameters per GPU and DNN model)::

    latency(b, s) = (fixed_ms**overlap + gpu(b, s)**overlap) ** (1 / overlap)
    gpu(b, s)     = work_ms * (b + work_offset) * blend(s, u(b))
    blend(s, u)   = (s**-sharpness + u**-sharpness) ** (1 / sharpness)
    u(b)          = parallelism * (b + work_offset + extra_offset)

``b`` is the batch size and ``s`` the compute share in (0, 1]. The batch's work
``work_ms * (b + work_offset)`` (ms on the whole GPU) runs on a usable fraction
of the GPU that is the smaller of the share ``s`` and what the batch can keep
busy, ``u(b)``; the two are blended by a smooth minimum whose ``sharpness`` says
how abruptly a small batch stops gaining from more share. ``fixed_ms`` is the
part that no share speeds up (launch, copies, host work); ``overlap`` >= 1 says
how much of it hides behind the GPU part (1: none, they add up; large: the
longer of the two sets the latency, as in host-bound serving loops).

Monotone by construction for every parameter inside the fitted bounds (all
>= 0, sharpness > 0, overlap >= 1): latency never rises with share, and never
falls with batch, since work/u(b) = (work_ms/parallelism)(b+o)/(b+o+e) and the
smooth minimum both grow with b, and the power mean grows with gpu(b, s). It
interpolates smoothly between measured points, grows as 1/s when the share
shrinks and linearly in b for large batches.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy.optimize import least_squares

from arkgpu.model.arrays import FloatArray

PARAMETER_NAMES: tuple[str, ...] = (
    "fixed_ms",
    "work_ms",
    "work_offset",
    "parallelism",
    "extra_offset",
    "sharpness",
    "overlap",
)
SHARPNESS_PRIOR = 2.0
"""Sharpness the fit leans towards when the data cannot tell (a quadratic-mean blend)."""
PRIOR_WEIGHT = 0.02
"""Weight of the weak priors that keep fits on few points well-posed (in log units)."""
ELASTICITY_STEP = 1e-3
"""Relative batch step of the numerical batch elasticity (:meth:`SoloCurve.activity`)."""


@dataclass(frozen=True, slots=True)
class SoloCurve:
    """Fitted level-1 parameters of one (GPU, DNN model); the formula is the module's docstring."""

    fixed_ms: float
    """Latency no share speeds up, ms."""
    work_ms: float
    """Work per request on the whole GPU, ms."""
    work_offset: float
    """Work of the batch's fixed part, in requests' worth."""
    parallelism: float
    """GPU fraction one request's worth of batch keeps busy."""
    extra_offset: float
    """How much further the batch's parallelism reaches than its work, in requests."""
    sharpness: float
    """Exponent of the smooth minimum between share and usable parallelism."""
    overlap: float = 1.0
    """Exponent >= 1 combining the fixed and GPU parts: 1 adds them (host work then
    GPU work), large values take the larger (host work hidden behind the GPU's)."""

    def latency_ms(self, batch: float, share: float) -> float:
        """Latency of one batch in ms, by the formula (scalar, no numpy)."""
        k = self.sharpness
        used = self.batch_parallelism(batch)
        blend = (share**-k + used**-k) ** (1.0 / k)
        gpu = self.work_ms * (batch + self.work_offset) * blend
        m = self.overlap
        result: float = (self.fixed_ms**m + gpu**m) ** (1.0 / m)
        return result

    def activity(self, batch: float, share: float) -> float:
        """Batch elasticity of the latency, d ln latency / d ln batch, clipped to [0, 1].

        The fraction of the latency that grows with the batch: near 0 where
        fixed costs or idle SMs absorb more work (a co-runner finds the GPU
        partly free), near 1 where the GPU part is saturated and the latency is
        per-sample work (a co-runner must time-share it). It is the GPU part's
        share of the latency times the GPU part's own elasticity, so it needs
        no SM occupancy figure (which latency alone does not pin down). Level 2
        uses it as a workload's pressure on the shared GPU when no L2/DRAM
        utilisation was measured.
        """
        step = 1.0 + ELASTICITY_STEP
        ratio = self.latency_ms(batch * step, share) / self.latency_ms(batch, share)
        return float(min(1.0, max(0.0, math.log(ratio) / math.log(step))))

    def occupancy_duty(self, batch: float, share: float) -> tuple[float, float]:
        """(busy SM fraction, capped at 1; GPU part's fraction of the latency), both in [0, 1]."""
        k = self.sharpness
        used = self.batch_parallelism(batch)
        occupancy = (share**-k + used**-k) ** (-1.0 / k)
        gpu = self.work_ms * (batch + self.work_offset) / occupancy
        duty = gpu / self.latency_ms(batch, share)
        return float(min(1.0, occupancy)), float(min(1.0, duty))

    def level2_parts(self, batch: float, share: float) -> tuple[float, float, float]:
        """(:meth:`activity`, then :meth:`occupancy_duty`) in one pass: level 2 asks for all
        three of every workload, and they share the latency at (batch, share)."""
        k, m = self.sharpness, self.overlap
        used = self.batch_parallelism(batch)
        occupancy = (share**-k + used**-k) ** (-1.0 / k)
        gpu = self.work_ms * (batch + self.work_offset) / occupancy
        latency = (self.fixed_ms**m + gpu**m) ** (1.0 / m)
        step = 1.0 + ELASTICITY_STEP
        elasticity = math.log(self.latency_ms(batch * step, share) / latency) / math.log(step)
        activity = min(1.0, max(0.0, elasticity))
        return float(activity), float(min(1.0, occupancy)), float(min(1.0, gpu / latency))

    def batch_parallelism(self, batch: float) -> float:
        """u(b): the GPU fraction a batch of ``batch`` can keep busy."""
        return self.parallelism * (batch + self.work_offset + self.extra_offset)

    def latency_ms_many(self, batch: FloatArray, share: FloatArray) -> FloatArray:
        """Vectorised :meth:`latency_ms` over arrays of batches and shares."""
        return _evaluate(self.as_array(), batch, share)

    def as_array(self) -> FloatArray:
        """The parameters in :data:`PARAMETER_NAMES` order."""
        return np.array([getattr(self, n) for n in PARAMETER_NAMES], dtype=np.float64)

    def to_dict(self) -> dict[str, float]:
        """Parameters by name (for JSON)."""
        return asdict(self)


def _evaluate(p: FloatArray, batch: FloatArray, share: FloatArray) -> FloatArray:
    fixed, work, offset, par, extra, k, m = p
    used = par * (batch + offset + extra)
    blend = (share**-k + used**-k) ** (1.0 / k)
    gpu = work * (batch + offset) * blend
    result: FloatArray = (fixed**m + gpu**m) ** (1.0 / m)
    return result


STARTS: tuple[tuple[float, float], ...] = ((0.05, 0.1), (0.5, 0.02), (0.0, 0.5))
"""(fixed part as a fraction of the smallest latency, parallelism) of each start of the fit:
a small, a large and no host part, with batches that fill the GPU late, soon or at once."""


def _log_jacobian(p: FloatArray, batch: FloatArray, share: FloatArray) -> FloatArray:
    """d log latency / d parameter, one row per point (the formula differentiated by hand)."""
    fixed, work, offset, par, extra, k, m = p
    used = par * (batch + offset + extra)
    total_s = share**-k + used**-k
    blend = total_s ** (1.0 / k)
    gpu = work * (batch + offset) * blend
    total_t = fixed**m + gpu**m
    d_fixed = np.full_like(batch, fixed ** (m - 1.0)) / total_t
    d_gpu = gpu ** (m - 1.0) / total_t
    d_blend_d_used = -blend * used ** (-k - 1.0) / total_s
    d_blend_d_k = blend * (
        -np.log(total_s) / k**2
        + (-np.log(share) * share**-k - np.log(used) * used**-k) / (k * total_s)
    )
    fixed_term = fixed**m * math.log(fixed) if fixed > 0 else 0.0
    d_m = -np.log(total_t) / m**2 + (fixed_term + gpu**m * np.log(gpu)) / (m * total_t)
    columns = [
        d_fixed,
        d_gpu * (batch + offset) * blend,
        d_gpu * work * (blend + (batch + offset) * d_blend_d_used * par),
        d_gpu * work * (batch + offset) * d_blend_d_used * (batch + offset + extra),
        d_gpu * work * (batch + offset) * d_blend_d_used * par,
        d_gpu * work * (batch + offset) * d_blend_d_k,
        d_m,
    ]
    return np.column_stack(columns)


BAD_RESIDUAL = 1e3
"""Residual given to a trial point whose latency overflows or is not positive."""
SCOUT_STEPS = 20
"""Solver steps each start gets before only the best one is run to convergence."""
MAX_STEPS = 2000
"""Cap on the solver's steps for the final fit."""


def _initial(
    batch: FloatArray, share: FloatArray, latency: FloatArray, start: tuple[float, float]
) -> FloatArray:
    slope_points = latency * share / np.maximum(batch, 1.0)
    work = float(np.median(slope_points))
    fixed = start[0] * float(latency.min())
    return np.array([fixed, max(work, 1e-6), 0.5, start[1], 1.0, SHARPNESS_PRIOR, 1.5])


LOWER = np.array([0.0, 1e-9, 0.0, 1e-4, 0.0, 0.5, 1.0])
UPPER = np.array([np.inf, np.inf, 1e3, 1e2, 1e4, 20.0, 20.0])


def fit_curve(batch: FloatArray, share: FloatArray, latency: FloatArray) -> SoloCurve:
    """Fit :class:`SoloCurve` to measured points by least squares on log latency.

    Log residuals make the fit minimise relative error, the quantity MAPE
    reports; weak priors on sharpness, overlap and the offsets keep fits on a
    handful of points (one batch size, say) from running off along flat
    directions. The fit scouts from each of :data:`STARTS` and runs the best to convergence.
    """
    if len(latency) == 0:
        raise ValueError("cannot fit a curve to no points")
    log_obs = np.log(latency)

    def residuals(p: FloatArray) -> FloatArray:
        pred = _evaluate(p, batch, share)
        prior = PRIOR_WEIGHT * np.array(
            [math.log(p[5] / SHARPNESS_PRIOR), math.log1p(p[2]), math.log1p(p[4]), math.log(p[6])]
        )
        misfit = np.log(np.where(pred > 0, pred, np.nan)) - log_obs
        return np.concatenate([np.nan_to_num(misfit, nan=BAD_RESIDUAL, posinf=BAD_RESIDUAL), prior])

    def jacobian(p: FloatArray) -> FloatArray:
        prior = np.zeros((4, len(p)))
        prior[0, 5] = PRIOR_WEIGHT / p[5]
        prior[1, 2] = PRIOR_WEIGHT / (1.0 + p[2])
        prior[2, 4] = PRIOR_WEIGHT / (1.0 + p[4])
        prior[3, 6] = PRIOR_WEIGHT / p[6]
        return np.vstack([_log_jacobian(p, batch, share), prior])

    def solve(x0: FloatArray, budget: int) -> Any:
        with np.errstate(all="ignore"):  # trial steps may overflow; residuals then say so
            return least_squares(
                residuals,
                x0,
                jac=lambda p: np.nan_to_num(jacobian(p), nan=0.0, posinf=0.0, neginf=0.0),
                bounds=(LOWER, UPPER),
                x_scale="jac",
                max_nfev=budget,
            )

    scouts = [
        solve(np.clip(_initial(batch, share, latency, s), LOWER, UPPER), SCOUT_STEPS)
        for s in STARTS
    ]
    best = min(scouts, key=lambda fit: float(fit.cost))
    if best.status == 0:
        best = solve(best.x, MAX_STEPS)
    return SoloCurve(*(float(v) for v in best.x))
