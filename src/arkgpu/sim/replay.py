"""Time-ordered replay of a trace with departures and a waiting queue.

Closer to what the scheduler extender faces than the FGD protocol: pods arrive
at their ``creation_time`` and hold their resources for ``deletion_time -
creation_time`` seconds from the moment they are placed. A pod that finds no
room waits in a FIFO queue. When a pod leaves, only its node got room, so the
queue is scanned in order and a waiting pod is offered to the policy when it
would fit on that node (a cheap check); the policy may still put it anywhere.
A policy may also turn a pod away while some node has room for it
(``arkgpu-reserve`` keeps the CPU that free GPUs need); such a pod is offered
again, in queue order, whenever a pod is placed on a node it fits, since a
placement can change what the policy allows there (a GPU pod shrinks the
reservation of its node), and :attr:`ReplayConfig.refused_retry_s` after each
refusal, as kube-scheduler retries an unschedulable pod after at most five
minutes. Work-conserving policies never refuse a pod that fits, so for them
this changes nothing.
Events at the same second are handled departures first, then arrivals in trace
order, then timed retries (an event heap keyed by (time, kind, sequence)).

Metrics, sampled from the first to the last arrival: GPU milli allocated,
pods waiting over time, and the waiting time of the pods that got placed
(mean, p99); pods still waiting when the trace ends are counted apart.

:func:`place_until` runs the FGD protocol up to a share of capacity and keeps
where every pod went: the input of the defragmentation planners.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from arkgpu.model.arrays import BoolArray, FloatArray
from arkgpu.model.cluster import Assignment, ClusterState
from arkgpu.model.resources import Node, Pod
from arkgpu.placement import POLICIES, PolicyContext
from arkgpu.placement.base import Policy, feasible_nodes
from arkgpu.placement.defrag import DefragProblem
from arkgpu.sim.placing import ExperimentConfig, decide, offer_arrivals, set_up

DEPART, ARRIVE, RETRY = 0, 1, 2


@dataclass(frozen=True, slots=True)
class ReplayConfig:
    """How a replay is set up."""

    seed: int = 42
    """Seed of the policy's random tie-breaks (the trace order is fixed)."""
    samples: int = 200
    """Points of the allocation and queue curves, evenly spaced in trace time."""
    load: float | None = 1.2
    """Peak share of GPU capacity the pods would hold if none waited (over the
    arrival span); durations are stretched or shrunk (arrivals kept) to reach
    it. The openb default trace is a sample: as recorded it holds at most a few
    % of the GPU node list's capacity, so nothing would ever wait. A peak of
    1.2 makes the bursts overflow the cluster, which is when placement quality
    shows as waiting. None keeps the recorded durations."""
    node_fraction: float = 0.5
    """Share of the node list kept (drawn with the seed). The whole trace asks
    for 98% of the openb GPU nodes' GPUs, so on all of them no peak above 0.98
    exists; half of them leaves room for a peak of 1.2."""
    refused_retry_s: int = 300
    """Seconds after which a pod the policy turned away while some node had
    room is offered again even if nothing happened on its nodes: kube-scheduler
    moves such a pod back from its unschedulable pods after at most
    ``DefaultPodMaxInUnschedulablePodsDuration`` (5 minutes)."""

    def __post_init__(self) -> None:
        if not 0 < self.node_fraction <= 1:
            raise ValueError(
                "replay node_fraction (--node-fraction) must be in (0, 1], "
                f"got {self.node_fraction}"
            )
        if self.samples < 2:
            raise ValueError(f"replay samples must be at least 2, got {self.samples}")
        if self.refused_retry_s <= 0:
            raise ValueError(
                "replay refused_retry_s (--refused-retry-s) must be positive, "
                f"got {self.refused_retry_s}"
            )
        if self.load is not None and not self.load > 0:
            raise ValueError(f"replay load must be positive, got {self.load}")


@dataclass(slots=True)
class ReplayResult:
    """One policy over one trace."""

    policy: str
    times_s: FloatArray
    allocation_pct: FloatArray
    """GPU milli allocated, % of capacity, at :attr:`times_s`."""
    waiting: FloatArray
    """Pods in the queue at :attr:`times_s`."""
    wait_s: FloatArray = field(repr=False)
    """Waiting time of every pod that was placed after waiting 0 s or more."""
    wait_is_cpu_only: BoolArray = field(repr=False)
    """For each entry of :attr:`wait_s`: the pod asked for no GPU."""
    never_placed: int = 0
    never_placed_cpu_only: int = 0
    decisions: int = 0
    wall_s: float = 0.0

    def summary(self) -> dict[str, float | int | str]:
        """Headline figures."""
        waited = self.wait_s[self.wait_s > 0]
        return {
            "policy": self.policy,
            "mean_allocation_pct": float(self.allocation_pct.mean()),
            "peak_waiting": int(self.waiting.max()) if len(self.waiting) else 0,
            "mean_waiting": float(self.waiting.mean()) if len(self.waiting) else 0.0,
            "pods_waited": len(waited),
            "wait_s_mean": float(self.wait_s.mean()) if len(self.wait_s) else 0.0,
            "wait_s_p99": float(np.percentile(self.wait_s, 99)) if len(self.wait_s) else 0.0,
            "never_placed": self.never_placed,
            **_by_kind("cpu_only", self.wait_s[self.wait_is_cpu_only]),
            **_by_kind("gpu", self.wait_s[~self.wait_is_cpu_only]),
            "never_placed_cpu_only": self.never_placed_cpu_only,
            "decisions": self.decisions,
            "wall_s": self.wall_s,
        }


def _by_kind(kind: str, wait_s: FloatArray) -> dict[str, float | int]:
    return {
        f"{kind}_pods_waited": int((wait_s > 0).sum()),
        f"{kind}_wait_s_mean": float(wait_s.mean()) if len(wait_s) else 0.0,
    }


def occupancy(
    pods: Sequence[Pod], capacity_milli: int, stretch: float, samples: int = 200
) -> float:
    """Peak GPU share held over the arrival span if nothing waited, durations x ``stretch``."""
    created = np.array([p.creation_time for p in pods], dtype=np.float64)
    held = np.array([max(p.deletion_time - p.creation_time, 0) for p in pods], dtype=np.float64)
    milli = np.array([p.total_gpu_milli for p in pods], dtype=np.float64)
    grid = np.linspace(created.min(), created.max(), samples)
    ends = created + held * stretch
    alive = (created[None, :] <= grid[:, None]) & (ends[None, :] > grid[:, None])
    return float((alive @ milli).max() / capacity_milli)


def _checked(pods: Sequence[Pod]) -> list[Pod]:
    missing = [p.name for p in pods if p.creation_time < 0 or p.deletion_time < 0]
    if missing:
        raise ValueError(
            f"replay needs creation_time and deletion_time; {len(missing)} pods lack them "
            f"(first: {missing[0]}); multigpu* openb files keep only the first five columns"
        )
    return list(pods)


def stretch_durations(pods: Sequence[Pod], capacity_milli: int, load: float) -> list[Pod]:
    """Pods with durations multiplied so that :func:`occupancy` is ``load`` (arrivals kept).

    The occupancy only grows with the stretch, so the factor is found by
    bisection on its logarithm.
    """
    if not load > 0:
        raise ValueError(f"replay load must be positive, got {load}")
    low, high = -16.0, 16.0
    for _ in range(30):
        middle = (low + high) / 2
        if occupancy(pods, capacity_milli, float(np.exp(middle))) < load:
            low = middle
        else:
            high = middle
    factor = float(np.exp((low + high) / 2))
    out = []
    for p in pods:
        duration = round(max(p.deletion_time - p.creation_time, 0) * factor)
        out.append(replace(p, deletion_time=p.creation_time + duration))
    return out


def replay(
    nodes: Sequence[Node], pods: Sequence[Pod], policy: str, config: ReplayConfig
) -> ReplayResult:
    """Replay ``pods`` in creation order on ``nodes`` with ``policy``."""
    started = time.perf_counter()
    rng = np.random.default_rng(config.seed)
    keep = max(1, round(len(nodes) * config.node_fraction))
    chosen = np.sort(rng.permutation(len(nodes))[:keep])
    state = ClusterState.from_nodes([nodes[i] for i in chosen])
    pods = _checked(pods)
    if config.load is not None:
        pods = stretch_durations(pods, state.total_gpu_milli, config.load)
    chooser = POLICIES.create(policy, PolicyContext(state, pods))
    run = _Replay(state, pods, chooser, rng, config.refused_retry_s)
    start, end = min(p.creation_time for p in pods), max(p.creation_time for p in pods)
    grid = np.linspace(start, end, config.samples)
    alloc, queued_at = run.until(grid)
    return ReplayResult(
        policy=policy,
        times_s=grid,
        allocation_pct=np.array(alloc),
        waiting=np.array(queued_at, dtype=np.float64),
        wait_s=np.array(run.waits, dtype=np.float64),
        wait_is_cpu_only=np.array(run.cpu_only, dtype=bool),
        never_placed=len(run.queue),
        never_placed_cpu_only=sum(pods[j].num_gpu == 0 for j in run.queue),
        decisions=run.decisions,
        wall_s=time.perf_counter() - started,
    )


class _Replay:
    """The event loop of one replay: arrivals, departures, the waiting queue."""

    def __init__(
        self,
        state: ClusterState,
        pods: list[Pod],
        chooser: Policy,
        rng: np.random.Generator,
        retry_after_s: int,
    ) -> None:
        self.state, self.pods, self.chooser, self.rng = state, pods, chooser, rng
        self.retry_after_s = retry_after_s
        self.retry_due: set[int] = set()
        """Refused pods with a timed retry in the event heap."""
        self.events = [(p.creation_time, ARRIVE, i) for i, p in enumerate(pods)]
        heapq.heapify(self.events)
        self.queue: list[int] = []
        self.refused: set[int] = set()
        """Waiting pods the policy turned away while some node had room."""
        self.placed_on: list[int] = []
        self.where: dict[int, Assignment] = {}
        self.waits: list[int] = []
        self.cpu_only: list[bool] = []
        self.decisions = 0

    def until(self, grid: FloatArray) -> tuple[list[float], list[int]]:
        """Run every event; GPU allocation (%) and queue length at each time of ``grid``."""
        alloc: list[float] = []
        queued_at: list[int] = []
        k = 0
        while self.events:
            now, kind, i = heapq.heappop(self.events)
            while k < len(grid) and grid[k] < now:
                alloc.append(self._allocated_pct())
                queued_at.append(len(self.queue))
                k += 1
            if kind == ARRIVE:
                if not self._admit(i, now):
                    self.queue.append(i)
            elif kind == RETRY:
                self._timed_retry(i, now)
            else:
                self._depart(i, now)
            self._retry_refused(now)
        alloc += [self._allocated_pct()] * (len(grid) - k)
        queued_at += [len(self.queue)] * (len(grid) - k)
        return alloc, queued_at

    def _allocated_pct(self) -> float:
        return 100.0 * self.state.allocated_gpu_milli / self.state.total_gpu_milli

    def _admit(self, i: int, now: int, retry: bool = False) -> bool:
        self.decisions += 1
        pod = self.pods[i]
        waited = float(now - pod.creation_time) if retry else None
        choice = decide(self.chooser, self.state, pod, self.rng, waited)
        if choice is None:
            if feasible_nodes(self.state, pod).any():
                self._refused(i, now)
            else:
                self.refused.discard(i)
            return False
        self.refused.discard(i)
        self.state.place(pod, choice)
        self.placed_on.append(choice.node)
        self.where[i] = choice
        self.waits.append(now - pod.creation_time)
        self.cpu_only.append(pod.num_gpu == 0)
        duration = pod.deletion_time - pod.creation_time
        heapq.heappush(self.events, (now + max(duration, 0), DEPART, i))
        return True

    def _refused(self, i: int, now: int) -> None:
        """Keep ``i`` among the refused pods, with a timed retry pending."""
        self.refused.add(i)
        if i not in self.retry_due:
            self.retry_due.add(i)
            heapq.heappush(self.events, (now + self.retry_after_s, RETRY, i))

    def _timed_retry(self, i: int, now: int) -> None:
        """Offer a refused pod again if it is still waiting and still refused."""
        self.retry_due.discard(i)
        if i in self.refused and self._admit(i, now, True):
            self.queue.remove(i)

    def _depart(self, i: int, now: int) -> None:
        """Free the pod's room; offer it, in queue order, to the waiting pods that fit there."""
        freed = self.where.pop(i)
        self.state.remove(self.pods[i], freed)
        self._offer(freed.node, now)

    def _retry_refused(self, now: int) -> None:
        """Offer each node a pod was just placed on to the refused pods that fit there."""
        while self.placed_on and self.refused:
            self._offer(self.placed_on.pop(), now, self.refused.__contains__)
        self.placed_on.clear()

    def _offer(self, node: int, now: int, eligible: Callable[[int], bool] | None = None) -> None:
        """Offer the waiting pods (all, or those ``eligible``) that fit on ``node``, in order."""
        self.queue = [
            j
            for j in self.queue
            if not (
                (eligible is None or eligible(j))
                and feasible_nodes(self.state, self.pods[j], np.array([node]))[0]
                and self._admit(j, now, True)
            )
        ]


def place_until(
    nodes: Sequence[Node], pods: Sequence[Pod], policy: str, seed: int, inflate: float = 1.3
) -> DefragProblem:
    """FGD protocol up to 100% of capacity arrived: running pods and places, failed pods waiting."""
    setup = set_up(nodes, pods, ExperimentConfig(inflate=inflate, seed=seed))
    capacity = setup.state.total_gpu_milli
    chooser = POLICIES.create(policy, PolicyContext(setup.state, pods))
    running: list[tuple[Pod, Assignment]] = []
    waiting: list[Pod] = []
    for pod, where, _ in offer_arrivals(setup, chooser, lambda arrived: arrived <= capacity):
        if where is None:
            waiting.append(pod)
        else:
            running.append((pod, where))
    return DefragProblem(setup.state, tuple(running), tuple(waiting))
