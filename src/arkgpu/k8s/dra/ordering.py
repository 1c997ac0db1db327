"""Device order in the slice: the one in-band lever the placement policy has on DRA. Pure.

kube-scheduler 1.37's DRA allocator takes, on the node it chose, the first device in
slice order that satisfies a request (docs/k8s/DRA.md). The driver can therefore
choose *which GPU* a claim lands on, among those that fit, by the order it lists them:

- ``index`` (default): by NVML index, so the allocator packs the lowest index first;
- ``pack``: the most-loaded GPU that still has room first (consumed ``cores`` of the
  claims allocated on it, from the API server), full GPUs last, ties by index. A
  request then lands on the tightest GPU it fits (best fit within the node), which
  keeps emptier GPUs whole for larger requests, as FGD prefers on one node.

The loads come from the claims' ``status.allocation`` (``consumedCapacity``), kept by
:class:`ClaimLoads` from a list and watch of the claims (a reflector: one list, then
only the changes, never a list of every claim of the cluster on each resync); the
order lags the scheduler by one resync of the driver; a changed order rewrites the
slice with a new pool generation (:class:`arkgpu.k8s.dra.publishing.Publisher`).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from arkgpu.k8s.dra.claims import quantity
from arkgpu.k8s.dra.slices import CORES, WHOLE_GPU_CORES

DEVICE_ORDERS = ("index", "pack")
"""Accepted values of the driver's ``device_order``."""


def device_loads(claims: Iterable[Mapping[str, Any]], driver: str, pool: str) -> Counter[str]:
    """Consumed ``cores`` per device of ``pool`` over the allocated claims (a result without
    consumed capacity took the whole device)."""
    loads: Counter[str] = Counter()
    for claim in claims:
        allocation = (claim.get("status") or {}).get("allocation") or {}
        for result in (allocation.get("devices") or {}).get("results") or []:
            if result.get("driver") != driver or result.get("pool") != pool:
                continue
            cores = (result.get("consumedCapacity") or {}).get(CORES)
            loads[str(result.get("device"))] += (
                WHOLE_GPU_CORES if cores is None else int(quantity(str(cores)))
            )
    return loads


def ordered(
    devices: list[dict[str, Any]], loads: Mapping[str, int], order: str
) -> list[dict[str, Any]]:
    """``devices`` (in index order) in the order ``order`` asks for."""
    if order == "index":
        return list(devices)
    if order != "pack":
        raise ValueError(f"device order: expected one of {', '.join(DEVICE_ORDERS)}, got {order!r}")

    def key(position: int) -> tuple[bool, int, int]:
        load = loads.get(str(devices[position]["name"]), 0)
        return (load >= WHOLE_GPU_CORES, -load, position)

    return [devices[i] for i in sorted(range(len(devices)), key=key)]


class ClaimLoads:
    """This pool's device loads, per claim, from a reflector's list and events (a
    :class:`~arkgpu.k8s.cluster.watching.Sink`); claims on other pools are not kept."""

    def __init__(self, driver: str, pool: str) -> None:
        self.driver, self.pool = driver, pool
        self._lock = threading.Lock()
        self._by_claim: dict[str, Counter[str]] = {}

    def replace(self, resource: str, items: list[dict[str, Any]]) -> None:
        """A full list of the claims."""
        fresh = {_key(c): device_loads([c], self.driver, self.pool) for c in items}
        with self._lock:
            self._by_claim = {key: loads for key, loads in fresh.items() if loads}

    def event(self, resource: str, kind: str, obj: dict[str, Any]) -> None:
        """A claim added, changed (allocated, deallocated) or deleted."""
        loads = Counter() if kind == "DELETED" else device_loads([obj], self.driver, self.pool)
        with self._lock:
            if loads:
                self._by_claim[_key(obj)] = loads
            else:
                self._by_claim.pop(_key(obj), None)

    def loads(self) -> Counter[str]:
        """Consumed ``cores`` per device of the pool, over the claims known now."""
        with self._lock:
            return sum(self._by_claim.values(), Counter())


def _key(claim: Mapping[str, Any]) -> str:
    meta = claim.get("metadata") or {}
    return str(meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}")
