"""Splits of profile records into training and test folds, registered by name.

A split turns the records into folds (train and test records, for solo and
for pair profiles). Splits register with :func:`split`; a duplicate name raises.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from arkgpu.predictor.groups import Group
from arkgpu.predictor.workloads import Workload
from arkgpu.traces.profiles import SoloRecord

TEST_FRACTION = 0.2
"""Share of records held out by the random split (the issue's 80/20)."""
T = TypeVar("T")


@dataclass(frozen=True)
class Fold:
    """One train/test division of the solo records and the co-located groups (pairs, MPS)."""

    solo_train: list[SoloRecord]
    solo_test: list[SoloRecord]
    pair_train: list[Group]
    pair_test: list[Group]
    scored: Callable[[Workload], bool] = lambda _: True
    """Which targets of the test groups this fold scores (each target once over all folds)."""
    new_model: str | None = None
    """A model level 1 predicts as if never profiled, from one anchor point of its own."""


SplitFunction = Callable[[Sequence[SoloRecord], Sequence[Group], int], list[Fold]]
SPLITS: dict[str, SplitFunction] = {}
SEEDED_SPLITS = frozenset({"random"})
"""Splits whose folds depend on the seed (the only ones worth repeating)."""
NEW_MODEL_SPLIT = "leave-one-model-out"
"""The split whose folds hold out a model as never profiled (:attr:`Fold.new_model`)."""


def seeds_label(seed: int, repeats: int) -> str:
    """``seed 3``, or ``seeds 3-12`` for the seeds of ``repeats`` pooled splits."""
    return f"seed {seed}" if repeats == 1 else f"seeds {seed}-{seed + repeats - 1}"


def split(name: str) -> Callable[[SplitFunction], SplitFunction]:
    """Register a split under ``name``; a duplicate name raises."""

    def register(function: SplitFunction) -> SplitFunction:
        if name in SPLITS:
            raise ValueError(f"split {name!r} registered twice")
        SPLITS[name] = function
        return function

    return register


def _random_halves(items: Sequence[T], rng: np.random.Generator) -> tuple[list[T], list[T]]:
    order = rng.permutation(len(items))
    cut = round(len(items) * TEST_FRACTION)
    return [items[i] for i in order[cut:]], [items[i] for i in order[:cut]]


@split("random")
def random_split(solo: Sequence[SoloRecord], pairs: Sequence[Group], seed: int) -> list[Fold]:
    """One fold: a random 20% of solo records and, independently, 20% of groups held out."""
    rng = np.random.default_rng(seed)
    solo_train, solo_test = _random_halves(solo, rng)
    pair_train, pair_test = _random_halves(pairs, rng)
    return [Fold(solo_train, solo_test, pair_train, pair_test)]


def _matching(key: Callable[[Workload], object], value: object) -> Callable[[Workload], bool]:
    def matches(workload: Workload) -> bool:
        return key(workload) == value

    return matches


def _leave_one_out(
    solo: Sequence[SoloRecord],
    pairs: Sequence[Group],
    solo_key: Callable[[SoloRecord], object],
    pair_keys: Callable[[Group], frozenset[object]],
    target_key: Callable[[Workload], object],
) -> list[Fold]:
    values = sorted({solo_key(r) for r in solo} | {k for p in pairs for k in pair_keys(p)}, key=str)
    folds = []
    for value in values:
        folds.append(
            Fold(
                [r for r in solo if solo_key(r) != value],
                [r for r in solo if solo_key(r) == value],
                [p for p in pairs if value not in pair_keys(p)],
                [p for p in pairs if value in pair_keys(p)],
                _matching(target_key, value),
            )
        )
    return folds


@split("leave-one-batch-out")
def leave_one_batch_out(
    solo: Sequence[SoloRecord], pairs: Sequence[Group], seed: int
) -> list[Fold]:
    """One fold per batch size: every solo record and every pair with that batch held out;
    the fold scores the held-out pairs' targets of that batch (each target once)."""
    del seed
    return _leave_one_out(
        solo, pairs, lambda r: r.batch, lambda g: frozenset(g.batches), lambda w: w.batch
    )


@split("leave-one-share-out")
def leave_one_share_out(
    solo: Sequence[SoloRecord], pairs: Sequence[Group], seed: int
) -> list[Fold]:
    """One fold per share (a MIG size stands for a smaller GPU): predict an unseen size."""
    del seed
    return _leave_one_out(
        solo,
        pairs,
        lambda r: round(r.share, 4),
        lambda g: frozenset(g.shares),
        lambda w: round(w.share, 4),
    )


@split(NEW_MODEL_SPLIT)
def leave_one_model_out(
    solo: Sequence[SoloRecord], pairs: Sequence[Group], seed: int
) -> list[Fold]:
    """One fold per DNN model, as if it were new.

    Level 1 predicts the model from one measured point of its own (the anchor,
    :func:`arkgpu.predictor.anchoring.pick_anchor`) and the other models'
    curves, and is scored on its other points. Level 2 holds out every pair
    involving the model, with its solo profile measured (a new model gets its
    solo profile, never its interference with everything else, measured).
    """
    del seed
    models = sorted({r.model for r in solo}.union(*(g.models for g in pairs)))
    return [
        Fold(
            list(solo),
            [],
            [g for g in pairs if model not in g.models],
            [g for g in pairs if model in g.models],
            _matching(lambda w: w.model, model),
            new_model=model,
        )
        for model in models
    ]


@split("cross-gpu")
def cross_gpu(solo: Sequence[SoloRecord], pairs: Sequence[Group], seed: int) -> list[Fold]:
    """One fold per GPU model: predict its models from their profiles on the other GPUs.

    The predictor then scales shares by the GPUs' speed ratio (config
    ``gpu_speed``). Only models profiled on another GPU are scored; level 2 is
    not scored (its pairs were measured on one GPU).
    """
    del seed, pairs
    folds = []
    for gpu in sorted({r.gpu for r in solo}):
        train = [r for r in solo if r.gpu != gpu]
        elsewhere = {r.model for r in train}
        test = [r for r in solo if r.gpu == gpu and r.model in elsewhere]
        if train and test:
            folds.append(Fold(train, test, [], []))
    return folds
