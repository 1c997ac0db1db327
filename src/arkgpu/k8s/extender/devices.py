"""Containers per GPU, bounded by the devices the kubelet advertises for it.

The kubelet admits a container only while the node has a free ``nvidia.com/gpu``
device, and the device plugin advertises ``split_count`` devices per GPU (device
IDs ``<uuid>::<k>``): an eleventh small container on a GPU split ten ways finds no
device of that GPU. The placement model knows shares and memory, not devices, so
this layer counts the containers on each GPU slot and hides a slot that holds
``NodeInfo.devices_per_gpu`` of them from the policies (``gpu_exists`` false:
every feasibility check skips it) until one leaves. Pods already assigned are
always counted, even beyond the bound (a slot is opened while they are adopted).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from arkgpu.model.cluster import ClusterState


class DeviceCounts:
    """Containers per (node row, GPU slot) and each node's bound."""

    def __init__(self) -> None:
        self.bound: dict[int, int] = {}
        """Devices per GPU of each node row (absent or 0: no bound)."""
        self.used: Counter[tuple[int, int]] = Counter()

    def join(self, row: int, per_gpu: int) -> None:
        """A node (re)joins at ``row``, empty."""
        self.bound[row] = per_gpu
        for key in [k for k in self.used if k[0] == row]:
            del self.used[key]

    def rebound(self, state: ClusterState, row: int, per_gpu: int) -> None:
        """The node's devices per GPU changed (its plugin's ``split_count``)."""
        self.bound[row] = per_gpu
        for slot in range(int(state.gpu_count[row])):
            self._show(state, row, slot)

    def take(self, state: ClusterState, row: int, slots: Sequence[int]) -> None:
        """A container holds one device of each of ``slots``."""
        for slot in slots:
            self.used[row, slot] += 1
            self._show(state, row, slot)

    def give_back(self, state: ClusterState, row: int, slots: Sequence[int]) -> None:
        """The container is gone."""
        for slot in slots:
            self.used[row, slot] = max(0, self.used[row, slot] - 1)
            self._show(state, row, slot)

    def full(self, row: int, slot: int) -> bool:
        """Whether every device of the slot's GPU is held."""
        bound = self.bound.get(row, 0)
        return bound > 0 and self.used[row, slot] >= bound

    @contextmanager
    def opened(self, state: ClusterState, row: int, slots: Sequence[int]) -> Iterator[None]:
        """``slots`` visible while the block runs (adopting a pod already assigned)."""
        for slot in slots:
            state.gpu_exists[row, slot] = slot < state.gpu_count[row]
        try:
            yield
        finally:
            for slot in slots:
                self._show(state, row, slot)

    def _show(self, state: ClusterState, row: int, slot: int) -> None:
        real = slot < state.gpu_count[row]
        state.gpu_exists[row, slot] = real and not self.full(row, slot)
