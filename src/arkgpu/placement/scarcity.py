"""What a node is worth to pod shapes that few nodes can host, for the ``arkgpu`` policy.

Some shapes fit only a small part of the cluster: on the openb node list an
8-GPU pod asking for 120 cores fits only the 39 G3 nodes (128 cores), 5% of
the GPUs. FGD's measure and the CPU stranding term do not see this: an 8-GPU
88-core pod fills a G2 node as well as a G3 one, and a CPU-hungry pod strands
less on a G3, so G3 nodes get used up by pods that fit elsewhere and the
specialised pods fail later (on multigpu50, seed 49: 21 of them, 2.7% of the
GPUs).

For each learned typical shape ``t`` (frequency ``p_t``, GPU demand ``d_t =
num_t * milli_t``), ``phi_t`` is the share of the cluster's GPUs on nodes that
could host it when empty (GPU count, CPU capacity, GPU model). A placement that
takes from a node the ability to host ``t`` loses

    ``p_t * d_t * max(0, 1 / phi_t - 2)``  milli-GPU,

zero for a shape that at least half of the GPUs can host, growing as its hosts
thin out (19x its demand for the 8-GPU 120-core shape, ``phi = 0.05``). The
excess over 2 (not ``1/phi`` itself) keeps common shapes from pushing pods
apart: losing one host of a shape that most nodes can host costs nothing, as
another node will do, and a tiny weight would only reshuffle FGD's integer
ties (measured: with ``1/phi - 1`` the default trace's 1-GPU 18-core shape,
``phi = 0.96``, got 1.3 milli and moved the default trace's mean by +0.04
point, noise from broken ties). Static capacities rather than what is left keep it cheap
and stable: the term ranks nodes by what only they can do, not by how full
they are (FGD's measure does that).
"""

from __future__ import annotations

import numpy as np

from arkgpu.model.cluster import BoolArray, ClusterState, FloatArray
from arkgpu.model.resources import MILLI_PER_GPU
from arkgpu.placement.fragmentation import FragTables, TypicalPods, satisfiable


def scarcity_weights(state: ClusterState, typical: TypicalPods, access: BoolArray) -> FloatArray:
    """Milli-GPU lost per shape ``t`` when a node stops being able to host it."""
    if len(typical.freq) == 0:
        return np.zeros(0)
    empty = FragTables.compute(np.where(state.gpu_exists, MILLI_PER_GPU, 0), typical)
    hosts = satisfiable(empty, state.cpu_capacity, access, typical)
    gpus = state.gpu_count.astype(np.float64)
    phi = (gpus @ hosts) / max(gpus.sum(), 1.0)
    demand = typical.freq * typical.num * typical.milli
    excess = np.where(phi > 0, np.maximum(1.0 / np.maximum(phi, 1e-12) - 2.0, 0.0), 0.0)
    return np.asarray(demand * excess, dtype=np.float64)


def hosting_loss(
    weights: FloatArray,
    before: BoolArray,
    after: BoolArray,
) -> FloatArray:
    """Per option: summed weights of the shapes it can host before but not after."""
    lost = before & ~after
    return np.asarray(lost @ weights, dtype=np.float64)
