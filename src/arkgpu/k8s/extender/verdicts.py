"""One pod's verdicts over the candidate nodes, and the 0..10 scores kube-scheduler reads.

:func:`rank_group` asks the scheduler's policy (``Policy.rank``, the call the
simulator makes) about a group of candidates and keeps the answer as arrays
are turned into names once: the fitting nodes with their scores, the others
with the reason a person reads. An LC pod goes through
:meth:`~arkgpu.placement.scheduling.Scheduler.filter_and_score`, which adds
the predictor's check.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from arkgpu.model.arrays import FloatArray, IntArray
from arkgpu.model.resources import Pod
from arkgpu.placement.scheduling import Scheduler

MAX_SCORE = 10
"""kube-scheduler's MaxExtenderPriority."""


@dataclass
class Verdicts:
    """Per candidate: fits with the policy's score, or why not."""

    order: list[str] = field(default_factory=list)
    """Candidates in the order asked."""
    fits: dict[str, float] = field(default_factory=dict)
    """Fitting nodes and their policy scores (higher is better)."""
    failed: dict[str, str] = field(default_factory=dict)
    """Nodes with too little room or turned away by the policy, and why."""
    unknown: dict[str, str] = field(default_factory=dict)
    """Nodes without ArkGPU GPUs in the snapshot, and why (no preemption helps)."""
    _scores: dict[str, int] | None = None

    def covers(self, names: Sequence[str]) -> bool:
        """Whether every name has a verdict here."""
        left = set(names).difference(self.fits, self.failed, self.unknown)
        return not left

    def best(self, names: Sequence[str]) -> str | None:
        """The policy's node among ``names``: the highest score, the earliest of equal ones
        (the node :meth:`scores` gives 10); None when none fits."""
        fits = self.fits
        if fits and len(fits) < len(names):  # a group's best each: unless tied, no scan
            top_score = max(fits.values())
            tops = [n for n, v in fits.items() if v == top_score]
            if len(tops) == 1 and tops[0] in names:
                return tops[0]
        best, top = None, -np.inf
        for name in names:
            score = fits.get(name)
            if score is not None and score > top:
                best, top = name, score
        return best

    def scores(self) -> dict[str, int]:
        """0..10 per candidate: 10 for the policy's best (the earliest of equal scores), the
        other fitting nodes 0..9 by score, 0 where the pod does not fit."""
        if self._scores is None:
            self._scores = _scale(self.order, self.fits)
        return self._scores


def _scale(order: list[str], fits: dict[str, float]) -> dict[str, int]:
    out = dict.fromkeys(order, 0)
    if not fits:
        return out
    fitting = [n for n in order if n in fits]
    values = np.array([fits[n] for n in fitting], dtype=np.float64)
    low, high = float(values.min()), float(values.max())
    top = MAX_SCORE - 1
    scaled = (
        np.rint(top * (values - low) / (high - low)) if high > low else np.full(len(values), top)
    )
    out.update(zip(fitting, scaled.astype(int).tolist(), strict=True))
    out[fitting[int(np.argmax(values))]] = MAX_SCORE  # argmax keeps the earliest of ties
    return out


def rank_group(
    scheduler: Scheduler,
    pod: Pod,
    names: Sequence[str],
    index: IntArray,
    into: Verdicts,
    full: bool = True,
) -> None:
    """The policy's verdicts for ``pod`` on ``names`` (all in the scheduler's state, at the
    rows ``index``). Not ``full`` (a filter that answers with the chosen node alone): when
    some node fits, only the group's best is kept (no other fit, no reason)."""
    if pod.lc is not None and scheduler.lc_check is not None:
        for v in scheduler.filter_and_score(pod, names):
            if v.fits:
                into.fits[v.node] = v.score
            else:
                into.failed[v.node] = v.reason
        return
    state = scheduler.state
    ranking = scheduler.policy.rank(state, pod, scheduler.rng, index, 0.0)
    nodes = state.nodes
    if not full and len(ranking.nodes):
        scores = np.asarray(ranking.scores, dtype=np.float64)
        into.fits[nodes[_first_best(ranking.nodes, scores, index)].name] = float(scores.max())
        return
    fitting = ranking.nodes.tolist()
    into.fits.update(zip((nodes[i].name for i in fitting), ranking.scores.tolist(), strict=True))
    if len(fitting) < len(names):
        fits = into.fits
        unfit = [(n, i) for n, i in zip(names, index.tolist(), strict=True) if n not in fits]
        rows_unfit = np.fromiter((i for _, i in unfit), dtype=np.int64, count=len(unfit))
        why = ranking.reasons(rows_unfit)
        into.failed.update(zip((name for name, _ in unfit), why, strict=True))


def _first_best(rows: IntArray, scores: FloatArray, order: IntArray) -> int:
    """The row of the highest score, the earliest in ``order`` on ties (as :meth:`Verdicts.
    scores` gives 10)."""
    tied = rows[scores == scores.max()]
    if len(tied) == 1:
        return int(tied[0])
    return int(order[np.argmax(np.isin(order, tied))])
