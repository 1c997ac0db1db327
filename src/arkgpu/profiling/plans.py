"""What a profiling run measures: the points of a plan, and how long they take.

A plan names DNN models, batch sizes and compute shares (every model alone at
every batch and share: the *solo points*), and pairs of models run together at
chosen batches and share splits (the *pair points*). Pure code: no I/O.

The expected duration of a plan (:func:`estimate_s`) is::

    points x (warmup_s + measure_s + overhead_s) + models x startup_s

which holds while each batch's latency stays below ``measure_s / min_iterations``
(a point then ends when its measuring window does); a slower point runs until it
has ``min_iterations`` batches.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field

MAX_POINTS = 10_000
"""Most points one plan may hold: far beyond a day's profiling."""


@dataclass(frozen=True, slots=True)
class Timing:
    """How long each point runs."""

    warmup_s: float = 0.5
    """Batches run and thrown away before measuring, s: the first batches of a
    share pay for the pacing bucket filling and cuDNN picking kernels; 0.5 s is
    tens of batches of a vision model."""
    measure_s: float = 3.0
    """Measuring window of one point, s: 3 s holds 100 batches of a 30 ms batch,
    enough for a median and a rough p99, and keeps the default plan near 6.5 min
    (one 10-minute command of a lent GPU machine, with room to spare)."""
    min_iterations: int = 10
    """Fewest measured batches per point, even past ``measure_s`` (a slow batch)."""
    max_iterations: int = 5_000
    """Most measured batches per point: bounds memory and a sub-ms batch's overhead."""
    overhead_s: float = 0.3
    """Expected time per point outside the windows (limits write, commands,
    writing the point), s; only the estimate uses it."""


@dataclass(frozen=True, slots=True)
class SoloPoint:
    """One model alone at one batch size on one compute share."""

    model: str
    batch: int
    share: float

    @property
    def key(self) -> str:
        """A file-name-safe, unique name of the point."""
        return f"solo_{safe(self.model)}_b{self.batch}_s{self.share:g}"

    def label(self) -> str:
        """Short human text."""
        return f"solo {self.model} b{self.batch} s{self.share:g}"


@dataclass(frozen=True, slots=True)
class PairPoint:
    """Two models run together, each at its batch on its own share."""

    a: SoloPoint
    b: SoloPoint

    @property
    def key(self) -> str:
        """A file-name-safe, unique name of the point."""
        return f"pair_{self.a.key.removeprefix('solo_')}__{self.b.key.removeprefix('solo_')}"

    def label(self) -> str:
        """Short human text."""
        a, b = self.a, self.b
        return f"pair {a.model} b{a.batch} s{a.share:g} + {b.model} b{b.batch} s{b.share:g}"


Point = SoloPoint | PairPoint


def safe(name: str) -> str:
    """``name`` with every character outside ``[A-Za-z0-9.-]`` replaced by ``-``."""
    return re.sub(r"[^A-Za-z0-9.-]", "-", name)


@dataclass(frozen=True, slots=True)
class Plan:
    """Models, batches and shares alone, then pairs at chosen batches and share splits."""

    models: tuple[str, ...]
    """DNN models, as the backend names them."""
    batches: tuple[int, ...]
    """Batch sizes of the solo points."""
    shares: tuple[float, ...]
    """Compute shares of the solo points, each in (0, 1]."""
    pairs: tuple[tuple[str, str], ...] = ()
    """Pairs of models run together (each model one of ``models``)."""
    pair_batches: tuple[int, ...] = (4,)
    """Batch size of both models of a pair point."""
    pair_shares: tuple[tuple[float, float], ...] = ((0.5, 0.5),)
    """Share splits (a's share, b's share) of the pair points; each sums to at most 1."""
    timing: Timing = field(default_factory=Timing)
    """How long each point runs."""

    def __post_init__(self) -> None:
        check_plan(self)

    def solo_points(self) -> list[SoloPoint]:
        """Every model alone at every batch and share, model by model."""
        grid = itertools.product(self.models, self.batches, self.shares)
        return [SoloPoint(m, b, s) for m, b, s in grid]

    def pair_points(self) -> list[PairPoint]:
        """Every pair at every pair batch and share split."""
        grid = itertools.product(self.pairs, self.pair_batches, self.pair_shares)
        return [
            PairPoint(SoloPoint(a, batch, sa), SoloPoint(b, batch, sb))
            for (a, b), batch, (sa, sb) in grid
        ]

    def points(self) -> list[Point]:
        """Solo points first, then pair points."""
        return [*self.solo_points(), *self.pair_points()]


def check_plan(plan: Plan) -> None:
    """ValueError naming the first thing wrong with ``plan``."""
    if not plan.models:
        raise ValueError("models: none given")
    keys = {safe(m) for m in plan.models}
    if len(keys) != len(plan.models):
        raise ValueError(f"models: two names are the same once made file-safe: {plan.models}")
    for share in plan.shares:
        if not 0.0 < share <= 1.0:
            raise ValueError(f"shares: {share:g} is outside (0, 1]")
    if any(b < 1 for b in (*plan.batches, *plan.pair_batches)):
        raise ValueError("batches: every batch size must be >= 1")
    for a, b in plan.pairs:
        for model in (a, b):
            if model not in plan.models:
                raise ValueError(f"pairs: {model} is not one of the models")
    for sa, sb in plan.pair_shares:
        if not (0.0 < sa <= 1.0 and 0.0 < sb <= 1.0 and sa + sb <= 1.0 + 1e-9):
            raise ValueError(f"pair shares: {sa:g}:{sb:g} must be in (0, 1] and sum to <= 1")
    count = len(plan.models) * len(plan.batches) * len(plan.shares)
    count += len(plan.pairs) * len(plan.pair_batches) * len(plan.pair_shares)
    if count > MAX_POINTS:
        raise ValueError(f"the plan has {count} points, more than {MAX_POINTS}")


def all_pairs(models: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """Every unordered pair of distinct models, in the models' order."""
    return tuple(itertools.combinations(models, 2))


def point_s(timing: Timing) -> float:
    """Expected time of one point, s."""
    return timing.warmup_s + timing.measure_s + timing.overhead_s


def estimate_s(plan: Plan, startup_s: float) -> float:
    """Expected duration of the whole plan, s (module docstring); ``startup_s`` is the
    backend's time to start one model's worker."""
    return len(plan.points()) * point_s(plan.timing) + len(plan.models) * startup_s


TORCH_DEFAULT = Plan(
    models=("resnet50", "vgg19", "alexnet", "mobilenet_v2"),
    batches=(1, 4, 16, 32),
    shares=(0.2, 0.4, 0.6, 1.0),
    pairs=all_pairs(("resnet50", "vgg19", "alexnet", "mobilenet_v2")),
    pair_batches=(4,),
    pair_shares=((0.2, 0.8), (0.5, 0.5), (0.8, 0.2)),
)
"""The default plan on a real GPU: 4 torchvision models x 4 batches x 4 shares (64
solo points; models and shares as in the shipped V100 and A100 profiles, so
cross-GPU comparisons have common keys) and the 6 pairs at batch 4 on 3 share
splits (18 pair points): 82 points x 3.8 s + 4 workers x 20 s = about 6.5 min,
within 15 min with room for slow batches and model loading."""

FAKE_DEFAULT = Plan(
    models=("fake-tiny", "fake-small", "fake-mid", "fake-large"),
    batches=(1, 4, 16),
    shares=(0.25, 0.5, 1.0),
    pairs=all_pairs(("fake-tiny", "fake-small", "fake-mid", "fake-large")),
    pair_batches=(4,),
    pair_shares=((0.5, 0.5),),
    timing=Timing(warmup_s=0.1, measure_s=0.5, min_iterations=5, overhead_s=0.2),
)
"""The default plan on the fake driver: 4 fake models x 3 batches x 3 shares and the 6
pairs at an even split (42 points, about 34 s)."""


def default_plan(backend: str) -> Plan:
    """The default plan of backend ``torch`` or ``fake``."""
    return FAKE_DEFAULT if backend == "fake" else TORCH_DEFAULT
