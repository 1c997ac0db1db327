"""Co-located measurements as level 2 sees them: workloads sharing one GPU, with latencies.

Two kinds of measured files become groups: pairs (``*_pairs.csv``, two
workloads on their own MPS shares, both latencies measured) and MPS groups
(``*_mps.csv``, ``n`` identical processes on the whole GPU without an
active-thread limit, one process's latency measured). A group yields one
level-2 :class:`Target` per measured member: that member with every other
member as its co-runners. An MPS group's members are identical, so it yields
one target (not ``n`` copies of the same measurement).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from arkgpu.predictor.workloads import Workload
from arkgpu.traces.profiles import MpsRecord, PairRecord

MPS_SHARE = 1.0
"""Share of each process of an MPS group: MPS defaults put no active-thread limit."""


@dataclass(frozen=True, slots=True)
class Group:
    """Workloads measured together on one GPU."""

    gpu: str
    """GPU model name."""
    members: tuple[Workload, ...]
    """The workloads running at once (two or more)."""
    latencies_ms: tuple[float | None, ...]
    """Measured batch latency of each member while the others ran; None: not a target."""

    @property
    def models(self) -> frozenset[str]:
        """DNN models in the group."""
        return frozenset(w.model for w in self.members)

    @property
    def batches(self) -> frozenset[int]:
        """Batch sizes in the group."""
        return frozenset(w.batch for w in self.members)

    @property
    def shares(self) -> frozenset[float]:
        """Shares in the group, rounded to 4 digits."""
        return frozenset(round(w.share, 4) for w in self.members)


@dataclass(frozen=True, slots=True)
class Target:
    """One measured co-located latency: a target workload and its co-runners."""

    gpu: str
    target: Workload
    corunners: tuple[Workload, ...]
    latency_ms: float
    """Measured latency of the target's batch."""


def from_pair(p: PairRecord) -> Group:
    """A pair as a group of two, both latencies measured."""
    a = Workload(p.model_a, p.batch_a, p.share_a)
    b = Workload(p.model_b, p.batch_b, p.share_b)
    return Group(p.gpu, (a, b), (p.latency_a_ms, p.latency_b_ms))


def from_mps(r: MpsRecord) -> Group:
    """``processes`` identical workloads on the whole GPU; one latency stands for all."""
    member = Workload(r.model, r.batch, MPS_SHARE)
    rest: tuple[float | None, ...] = tuple(None for _ in range(r.processes - 1))
    return Group(r.gpu, (member,) * r.processes, (r.latency_ms, *rest))


def as_groups(records: Iterable[PairRecord | MpsRecord | Group]) -> list[Group]:
    """Pairs, MPS rows and groups, all as groups (in order)."""
    out = []
    for r in records:
        if isinstance(r, Group):
            out.append(r)
        elif isinstance(r, PairRecord):
            out.append(from_pair(r))
        else:
            out.append(from_mps(r))
    return out


def group_targets(groups: Sequence[Group]) -> list[Target]:
    """One target per measured member of each group, the other members its co-runners."""
    out = []
    for g in groups:
        for i, latency in enumerate(g.latencies_ms):
            if latency is not None:
                others = g.members[:i] + g.members[i + 1 :]
                out.append(Target(g.gpu, g.members[i], others, latency))
    return out
