"""The simulator's arkgpu modes decide through the node's control loop, and nothing else.

Seed of "the simulator and the runtime make the same decision": every
observation the simulator hands its ``arkgpu`` mode, replayed into a fresh
:class:`~arkgpu.colocation.deciding.NodeController` (what ``arkgpu node run``
will hold), gives the same decision; and the shares the simulated pods run at
are that decision's basis points.
"""

from __future__ import annotations

import pytest

from arkgpu.colocation.deciding import ControlConfig, GpuDecision, NodeController
from arkgpu.colocation.observations import GpuObservations
from arkgpu.colocation.sizing import ShareSizer
from arkgpu.model.shares import share_fraction
from arkgpu.sim.colocation.modes.arkgpu import ArkGpuMode
from arkgpu.sim.colocation.simulating import CoLocationSim, RunOptions
from arkgpu.sim.colocation.truth import GroundTruth
from colocation.colocation_helpers import be, lc, tiny

SCENARIO = (
    lc("a", rps=300.0)
    + lc("b", model="alexnet", target=10.0, rps=600.0)
    + lc("c", model="vgg19", target=40.0, rps=80.0)
    + be("t")
    + be("u", model="resnet50", iterations=400)
)


@pytest.mark.parametrize(("mode", "lends"), [("arkgpu", True), ("arkgpu-static", False)])
def test_simulator_and_node_controller_decide_alike(
    truth: GroundTruth, sizer: ShareSizer, mode: str, lends: bool
) -> None:
    """Same observations in, same decisions out (shares, memory caps, loans), period by
    period; the pods' shares are the last decision's, converted once."""
    sim = CoLocationSim(
        tiny(SCENARIO, gpus=2, duration_s=30.0),
        mode=mode,
        seed=3,
        truth=truth,
        sizer=sizer,
        options=RunOptions(record_series=False),
    )
    assert isinstance(sim.mode, ArkGpuMode)
    seen: list[tuple[GpuObservations, GpuDecision]] = []
    tick = sim.mode.controller.tick

    def record(observations: GpuObservations) -> GpuDecision:
        decision = tick(observations)
        seen.append((observations, decision))
        return decision

    sim.mode.controller.tick = record  # type: ignore[method-assign]
    sim.run()
    assert len(seen) > 30
    assert any(d.bes and d.lcs for _, d in seen)
    assert any(d.bes[0].lent_bp for _, d in seen if d.bes) is lends
    node = NodeController(sizer, ControlConfig(lend_idle_share=lends))
    for observations, decided in seen:
        assert node.tick(observations) == decided
    for gpu in sim.gpus:
        decision = sim.mode.decisions[gpu.index]
        for pod in gpu.pods():
            entry = decision.entry(pod.name)
            assert entry is not None
            assert pod.share == share_fraction(entry.share_bp)
