"""What a node is worth to pod shapes that few nodes can host, for the ``arkgpu`` policy.

Some shapes fit only a small part of the cluster: on the openb node list an
8-GPU pod asking for 120 cores fits only the 39 G3 nodes (128 cores), 5% of
the GPUs, and a pod whose ``gpu_spec`` names one model fits only that model's
nodes. FGD's measure and the CPU stranding term do not see this: an 8-GPU
88-core pod fills a G2 node as well as a G3 one, and a CPU-hungry pod strands
less on a G3, so G3 nodes get used up by pods that fit elsewhere and the
specialised pods fail later (on multigpu50, seed 49: 21 of them, 2.7% of the
GPUs).

For each learned typical shape ``t`` (frequency ``p_t``, GPU demand ``d_t =
num_t * milli_t``), ``phi_t`` is the share of the cluster's GPUs on nodes that
could host it when empty (GPU count, CPU capacity, GPU model). A node that
could host ``k_t`` copies of ``t`` when empty and can host ``c_t`` now is
worth ``c_t / k_t`` of its hosting; a placement that takes copies away loses

    ``p_t * d_t * max(0, 1 / phi_t - 2) * (c_t(before) - c_t(after)) / k_t``

milli-GPU, zero for a shape that at least half of the GPUs can host, growing
as its hosts thin out (19x its demand for the 8-GPU 120-core shape, ``phi =
0.05``). Counting copies rather than "can still host one" charges every GPU a
pod takes from a scarce model's node, not only the last one: with hosting as
a yes/no, a node of a model that few pods may use was filled by pods that fit
anywhere until its last GPU went (on the gpuspec33 robustness variant 539 G2
GPUs stayed free while pods that may only run on V100 or P100 failed). For a
shape that takes a whole node (an 8-GPU pod on an 8-GPU node) ``k_t = 1`` and
the two readings agree.

The excess over 2 (not ``1/phi`` itself) keeps common shapes from pushing pods
apart: losing one host of a shape that most nodes can host costs nothing, as
another node will do, and a tiny weight would only reshuffle FGD's integer
ties (measured: with ``1/phi - 1`` the default trace's 1-GPU 18-core shape,
``phi = 0.96``, got 1.3 milli and moved the default trace's mean by +0.04
point, noise from broken ties). Static capacities rather than what is left keep
the weights cheap and stable: the term ranks nodes by what only they can do,
not by how full they are (FGD's measure does that).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from arkgpu.model.arrays import BoolArray, FloatArray, IntArray
from arkgpu.model.cluster import ClusterState
from arkgpu.model.resources import MILLI_PER_GPU
from arkgpu.placement.fragmentation import FragTables, TypicalPods


@dataclass(frozen=True, slots=True)
class Scarcity:
    """Per learned shape, milli-GPU per node's worth of hosting; per node, copies when empty.

    Only the scarce shapes (positive weight) are scored, and only on the nodes
    that may host one of them; their columns are kept apart once per learning.
    """

    weights: FloatArray
    """[t]: milli-GPU lost when a node stops being able to host any copy of ``t``."""
    columns: IntArray
    """The scarce shapes ``s``: indices into the typical shapes."""
    empty_copies: FloatArray
    """[node, s]: copies of ``s`` the node could host with nothing on it (at least 1)."""
    access: BoolArray
    """[node, s]: the node's GPU model admits ``s``."""
    hosts_any: BoolArray
    """[node]: the node may host some scarce shape."""
    num: FloatArray
    cpu: FloatArray
    """GPUs and CPU milli per copy of ``s`` (a shape asking no CPU is not bounded by it)."""

    @classmethod
    def none(cls, nodes: int) -> Scarcity:
        """No shapes learned yet."""
        empty = np.zeros((nodes, 0))
        return cls(
            np.zeros(0),
            np.zeros(0, np.int64),
            empty,
            empty > 0,
            np.zeros(nodes, bool),
            np.zeros(0),
            np.zeros(0),
        )

    def loss(
        self,
        nodes: IntArray,
        before: tuple[FragTables, IntArray],
        after: tuple[FragTables, IntArray],
    ) -> FloatArray:
        """Per option on ``nodes`` (tables and CPU left, before and after): milli-GPU of
        scarce hosting taken away."""
        lost = np.zeros(len(nodes))
        if len(self.columns) == 0:
            return lost
        rows = np.flatnonzero(self.hosts_any[nodes])
        if len(rows) == 0:
            return lost
        at = nodes[rows]
        lost[rows] = hosting_loss(
            self.weights[self.columns],
            self._copies(before[0].big_count[rows], before[1][rows], at),
            self._copies(after[0].big_count[rows], after[1][rows], at),
            self.empty_copies[at],
        )
        return lost

    def _copies(self, big_count: IntArray, cpu_left: IntArray, at: IntArray) -> FloatArray:
        return _copies(big_count[:, self.columns], cpu_left, self.access[at], self.num, self.cpu)


def _copies(
    big_count: IntArray,
    cpu_left: IntArray,
    access: BoolArray,
    num: npt.NDArray[np.number[Any]],
    cpu: npt.NDArray[np.number[Any]],
) -> FloatArray:
    """[node, t]: ``min(GPUs big enough // num_t, cpu_left // cpu_t)`` where the model admits
    ``t``, else 0; a shape asking no CPU is bounded by GPUs alone."""
    by_gpu = big_count / num[None, :]
    by_cpu = np.where(cpu[None, :] > 0, cpu_left[:, None] / np.maximum(cpu, 1)[None, :], np.inf)
    return np.asarray(np.floor(np.where(access, np.minimum(by_gpu, by_cpu), 0.0)))


def hosting_copies(
    tables: FragTables, cpu_left: IntArray, access: BoolArray, typical: TypicalPods
) -> FloatArray:
    """[node, t]: copies of GPU shape ``t`` the node can host at once (GPUs, CPU, model)."""
    return _copies(tables.big_count, cpu_left, access, np.maximum(typical.num, 1), typical.cpu)


def scarcity(state: ClusterState, typical: TypicalPods, access: BoolArray) -> Scarcity:
    """The weights and empty-node copies for ``typical`` on this cluster's capacities."""
    if len(typical.freq) == 0:
        return Scarcity.none(len(state.nodes))
    empty = FragTables.compute(np.where(state.gpu_exists, MILLI_PER_GPU, 0), typical)
    copies = hosting_copies(empty, state.cpu_capacity, access, typical)
    gpus = state.gpu_count.astype(np.float64)
    phi = (gpus @ (copies > 0)) / max(gpus.sum(), 1.0)
    demand = typical.freq * typical.num * typical.milli
    excess = np.where(phi > 0, np.maximum(1.0 / np.maximum(phi, 1e-12) - 2.0, 0.0), 0.0)
    weights = np.asarray(demand * excess, dtype=np.float64)
    columns = np.flatnonzero(weights > 0)
    scarce_access = access[:, columns]
    return Scarcity(
        weights=weights,
        columns=columns,
        empty_copies=np.maximum(copies[:, columns], 1.0),
        access=scarce_access,
        hosts_any=np.asarray(scarce_access.any(axis=1), dtype=np.bool_),
        num=np.maximum(typical.num[columns], 1).astype(np.float64),
        cpu=typical.cpu[columns].astype(np.float64),
    )


def hosting_loss(
    weights: FloatArray,
    before: npt.NDArray[np.number[Any]],
    after: npt.NDArray[np.number[Any]],
    empty: npt.NDArray[np.number[Any]],
) -> FloatArray:
    """Per option: each shape's weight times the share of an empty node's copies taken away."""
    taken = np.maximum(before - after, 0) / np.maximum(empty, 1)
    return np.asarray(taken @ weights, dtype=np.float64)
