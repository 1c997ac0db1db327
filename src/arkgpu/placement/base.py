"""What every placement policy shares: the policy protocol, its registry, filters.

A policy is built once per run from the cluster and the workload it will see
(FGD learns its typical pods from it), then asked, pod by pod, where the pod
should go. It reads the :class:`~arkgpu.model.cluster.ClusterState` and never
changes it: the caller (simulator or scheduler extender) applies the answer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from arkgpu.model.arrays import BoolArray, IntArray
from arkgpu.model.cluster import Assignment, ClusterState
from arkgpu.model.resources import MILLI_PER_GPU, Pod

#: Largest node the FGD simulator normalises by: 128 cores (milli-CPU).
MAX_SPEC_CPU = 128_000
#: Largest node the FGD simulator normalises by: 8 GPUs (milli-GPU).
MAX_SPEC_GPU = 8_000
#: Score range of a Kubernetes score plugin.
MAX_NODE_SCORE = 100


class Policy(Protocol):
    """Chooses where a pod goes, or None when no node can take it."""

    def choose(self, state: ClusterState, pod: Pod, rng: np.random.Generator) -> Assignment | None:
        """Return the node and GPU slots for ``pod``; never mutate ``state``."""
        ...


@runtime_checkable
class LearnsArrivals(Protocol):
    """A policy that learns from each arrival, and so must be told when a pod is offered again."""

    def choose_again(
        self, state: ClusterState, pod: Pod, rng: np.random.Generator, waited_s: float
    ) -> Assignment | None:
        """:meth:`Policy.choose` for a pod already offered once, ``waited_s`` seconds ago
        or more (it has waited that long since it was created)."""
        ...


RetryChooser = Callable[[ClusterState, Pod, np.random.Generator, float], Assignment | None]
"""Where a pod that waited goes: (state, pod, rng, seconds it has waited)."""


def retry_chooser(policy: Policy) -> RetryChooser:
    """What to call for a pod that waited: ``choose_again`` where the policy learns arrivals."""
    if isinstance(policy, LearnsArrivals):
        return policy.choose_again

    def choose(
        state: ClusterState, pod: Pod, rng: np.random.Generator, _waited: float
    ) -> Assignment | None:
        return policy.choose(state, pod, rng)

    return choose


@dataclass(frozen=True, slots=True)
class PolicyContext:
    """What a policy may learn from before the first pod arrives."""

    state: ClusterState
    workload: Sequence[Pod]
    """The trace's pods (before inflation), as the FGD simulator gives FGD."""


PolicyFactory = Callable[[PolicyContext], Policy]


class PolicyRegistry:
    """Policies by name; each policy module registers itself with :meth:`register`."""

    def __init__(self) -> None:
        self._factories: dict[str, PolicyFactory] = {}

    def register(self, name: str) -> Callable[[PolicyFactory], PolicyFactory]:
        """Decorator registering a policy factory under ``name``; a duplicate name raises."""

        def add(factory: PolicyFactory) -> PolicyFactory:
            if name in self._factories:
                raise ValueError(f"placement policy {name!r} is registered twice")
            self._factories[name] = factory
            return factory

        return add

    def names(self) -> list[str]:
        """Registered names, in registration order."""
        return list(self._factories)

    def create(self, name: str, context: PolicyContext) -> Policy:
        """Build the policy called ``name``; unknown names raise with the known ones listed."""
        try:
            factory = self._factories[name]
        except KeyError:
            known = ", ".join(self._factories)
            raise ValueError(f"unknown placement policy {name!r} (known: {known})") from None
        return factory(context)


#: The registry every built-in policy module adds itself to at import.
POLICIES = PolicyRegistry()


def fits_gpu(state: ClusterState, pod: Pod) -> BoolArray:
    """[node, slot]: GPU slots with room for one of the pod's GPUs."""
    return state.gpu_exists & (state.gpu_left >= pod.gpu_milli)


def feasible_nodes(state: ClusterState, pod: Pod) -> BoolArray:
    """Nodes that can take the pod: CPU, memory, GPU share or whole GPUs, gpu_spec."""
    ok = (state.cpu_left >= pod.cpu_milli) & (state.memory_left >= pod.memory_mib)
    if pod.num_gpu == 0:
        return ok
    ok &= state.allowed_nodes(pod)
    free = fits_gpu(state, pod).sum(axis=1)
    return np.asarray(ok & (free >= pod.num_gpu), dtype=np.bool_)


def pick_best(scores: npt.NDArray[np.generic]) -> int:
    """Index of the highest score; ties go to the lowest index.

    The FGD authors' simulator changed kube-scheduler's random tie-break to
    "smallest node name" for reproducibility; node names follow node order,
    which the experiment draws per seed as the simulator's random name
    prefixes do (:mod:`arkgpu.sim.placing`).
    """
    return int(np.argmax(scores))


def best_fit_gpus(state: ClusterState, node: int, pod: Pod) -> tuple[int, ...]:
    """The FGD simulator's default GPU choice inside a node.

    A GPU-share pod takes the GPU with the least room that still fits (lowest
    index on ties); whole-GPU pods take the lowest-indexed free GPUs.
    """
    if pod.num_gpu == 0:
        return ()
    left = state.gpu_left[node]
    fits = np.flatnonzero(state.gpu_exists[node] & (left >= pod.gpu_milli))
    if pod.is_gpu_share:
        return (int(fits[np.argmin(left[fits])]),)
    return tuple(int(g) for g in fits[: pod.num_gpu])


def node_gpu_left(state: ClusterState, nodes: IntArray) -> IntArray:
    """Milli-GPU left in all, for each of ``nodes``."""
    return np.asarray(state.gpu_left[nodes].sum(axis=1), dtype=np.int64)


def free_gpu_count(state: ClusterState, nodes: IntArray) -> IntArray:
    """Wholly free GPUs, for each of ``nodes``."""
    return np.asarray((state.gpu_left[nodes] == MILLI_PER_GPU).sum(axis=1), dtype=np.int64)
