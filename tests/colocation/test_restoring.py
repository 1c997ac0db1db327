"""A controller restarted over running containers continues from the limits in force.

:meth:`NodeController.restore` (and :meth:`AdjustmentUnit.restore` under it)
rebuild one GPU's state from the shares the containers run with: the node
runtime calls it in its first period after a start, instead of deciding.
"""

from __future__ import annotations

from arkgpu.colocation.adjusting import AdjustmentUnit
from arkgpu.colocation.deciding import ControlConfig, NodeController
from arkgpu.colocation.observations import BeObservation, GpuObservations, LcObservation
from arkgpu.colocation.sizing import LcDemand, ShareSizer

DEMAND = LcDemand("resnet50", 50.0, 120.0, 8, 2.0)
BES = (BeObservation("be", "vgg16", 32), BeObservation("be2", "resnet50", 16))


def _obs(p99_ms: float, rate: float = 120.0, gpu: int = 0) -> GpuObservations:
    lcs = (
        LcObservation("lc", DEMAND.at_rate(rate), p99_ms),
        LcObservation("lc2", DEMAND.at_rate(rate / 2), p99_ms / 2),
    )
    return GpuObservations(gpu, lcs, BES)


def _shares(controller: NodeController, obs: GpuObservations) -> dict[str, int]:
    return {e.name: e.share_bp for e in controller.tick(obs).containers()}


def test_a_restored_controller_decides_as_the_one_that_kept_running(
    fake_sizer: ShareSizer,
) -> None:
    """A controller run through a violation (its boosts raised) and a fresh one restored
    from the shares the first one wrote decide the same next period, within rounding."""
    running = NodeController(fake_sizer)
    for p99 in (20.0, 48.0, 48.0, 30.0):  # quiet, two coming violations, between the ratios
        current = _shares(running, _obs(p99))
    restored = NodeController(ShareSizer(fake_sizer.predictor))
    restored.restore(_obs(30.0), current)
    assert restored.units[0].boosts["lc"] > 0.0  # the raised boost was rebuilt
    mine, theirs = _shares(restored, _obs(30.0)), _shares(running, _obs(30.0))
    assert mine.keys() == theirs.keys()
    for name, bp in theirs.items():
        assert abs(mine[name] - bp) <= 10, (name, mine, theirs)


def test_restore_clamps_the_boost_and_decides_nothing(fake_sizer: ShareSizer) -> None:
    """A share in force above base + max_boost gives the largest boost, one under the base
    none; the previous split is the one in force; other GPUs' units are left alone."""
    controller = NodeController(fake_sizer, ControlConfig())
    other = controller.units[7] = AdjustmentUnit(fake_sizer)
    in_force = {"lc": 9_000, "lc2": 100, "be": 450, "be2": 450}
    controller.restore(_obs(30.0), in_force)
    unit = controller.units[0]
    top = controller.config.adjustment.max_boost
    assert unit.boosts == {"lc": top, "lc2": 0.0}
    assert unit.last.lc_bp == {"lc": 9_000, "lc2": 100}
    assert unit.last.be_bp == {"be": 450, "be2": 450}
    assert set(unit.batches) == {"lc", "lc2"}
    assert controller.units[7] is other
