"""The predictor-driven GPU choice for LC services and BE jobs, as per-GPU verdicts, and
the same check on the scheduler's path for pods that carry LC attributes.

Pinned: each GPU that cannot take the pod says why (memory, no share meets
every target, shares over what BE work must keep); the chosen GPU is the
fitting one with the most spare share, an earlier GPU winning float ties;
the new service's share is given in basis points.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from arkgpu.colocation.sizing import LcDemand, ShareSizer
from arkgpu.model.cluster import ClusterState, PlacementError
from arkgpu.model.resources import LcAttributes, Node, Pod
from arkgpu.placement.lc_checking import LcCheck
from arkgpu.placement.lc_placing import (
    GpuSnapshot,
    be_verdicts,
    best_gpu,
    choose_gpu_for_lc,
    lc_verdicts,
)
from arkgpu.placement.scheduling import Scheduler, build_policy
from arkgpu.predictor import Workload


class LinearPredictor:
    """Batch latency 2 ms per request at the whole GPU, inversely proportional to the share;
    each co-runner adds 10%."""

    def latency_ms(self, model: str, batch: int, share: float, gpu: str = "V100") -> float:
        """Level 1."""
        return 2.0 * batch / share

    def colocated_latency_ms(
        self, target: Workload, corunners: Sequence[Workload], gpu: str = "V100"
    ) -> float:
        """Level 2."""
        return self.latency_ms(target.model, target.batch, target.share) * (
            1 + 0.1 * len(corunners)
        )


SIZER = ShareSizer(LinearPredictor())
SERVICE = LcDemand("m", target_ms=40.0, rate_rps=100.0, max_batch=8)


def test_every_gpu_that_cannot_take_an_lc_service_says_why() -> None:
    """Memory, an impossible target and the BE reserve each give their own reason."""
    crowded = GpuSnapshot(0, 10_000, (SERVICE.at_rate(250.0), SERVICE.at_rate(250.0)))
    small: GpuSnapshot[LcDemand] = GpuSnapshot(1, 500)
    empty: GpuSnapshot[LcDemand] = GpuSnapshot(2, 10_000)
    verdicts = lc_verdicts(SERVICE, 1000, [crowded, small, empty], SIZER, be_reserve=0.0)
    assert [v.fits for v in verdicts] == [False, False, True]
    assert "shares" in verdicts[0].reason or "no share" in verdicts[0].reason
    assert "500 MiB free" in verdicts[1].reason
    assert verdicts[2].reason == ""
    assert 0 < verdicts[2].share_bp < 10_000
    impossible = LcDemand("m", target_ms=1.0, rate_rps=100.0, max_batch=8)
    assert "no share meets" in lc_verdicts(impossible, 1000, [empty], SIZER)[0].reason
    reserved = lc_verdicts(SERVICE.at_rate(300.0), 1000, [empty], SIZER, be_reserve=0.9)[0]
    assert "> 0.10" in reserved.reason


def test_the_gpu_with_most_spare_share_wins_and_ties_go_to_the_earlier() -> None:
    """Two empty GPUs tie (the first wins); a GPU already hosting a service loses to both."""
    busy = GpuSnapshot(0, 10_000, (SERVICE,))
    first: GpuSnapshot[LcDemand] = GpuSnapshot(1, 10_000)
    second: GpuSnapshot[LcDemand] = GpuSnapshot(2, 10_000)
    assert choose_gpu_for_lc(SERVICE, 1000, [busy, first, second], SIZER) == 1
    verdicts = lc_verdicts(SERVICE, 1000, [busy, first, second], SIZER)
    assert verdicts[0].score < verdicts[1].score == verdicts[2].score


def test_be_jobs_go_where_lc_services_leave_most_per_job() -> None:
    """A GPU with an LC service and no BE job beats one with no LC service and three BE jobs
    when its spare share per job is larger; memory still filters."""
    hosting = GpuSnapshot(0, 10_000, (SERVICE.at_rate(20.0),))
    shared: GpuSnapshot[LcDemand] = GpuSnapshot(1, 10_000, (), be_jobs=3)
    full: GpuSnapshot[LcDemand] = GpuSnapshot(2, 100)
    verdicts = be_verdicts(1000, [hosting, shared, full], SIZER)
    assert verdicts[0].score > verdicts[1].score == 0.25
    assert not verdicts[2].fits
    assert "100 MiB free" in verdicts[2].reason
    assert best_gpu(verdicts) == 0


def _lc_scheduler() -> Scheduler:
    state = ClusterState.from_nodes(
        [Node("a", 64000, 65536, 1, "T4"), Node("b", 64000, 65536, 1, "T4")]
    )
    check = LcCheck(SIZER, lambda a: LcDemand(a.model, a.target_ms, a.peak_rps, a.max_batch))
    return Scheduler(state, build_policy("packing", state), np.random.default_rng(0), check)


def test_the_scheduler_places_lc_pods_only_where_every_target_still_holds() -> None:
    """Packing would stack both LC services on one GPU; the predictor check refuses that
    GPU for the second (with its reason) and the service goes to the other node, bound
    with its predicted share; a BE pod is not checked."""
    scheduler = _lc_scheduler()
    heavy = LcAttributes("m", target_ms=40.0, peak_rps=300.0, max_batch=8)
    first = Pod("lc1", 1000, 1024, 1, 500, lc=heavy)
    second = Pod("lc2", 1000, 1024, 1, 400, lc=heavy)
    scheduler.arrived(first)
    binding = scheduler.assign(first, "a")
    expected = lc_verdicts(SERVICE.at_rate(300.0), 0, [GpuSnapshot(0, 1)], SIZER)[0].share_bp
    assert binding.share_bp == expected
    assert binding.share_bp != 5000  # the predicted share, not the milli-GPU request
    scheduler.arrived(second)
    verdicts = scheduler.filter_and_score(second, ["a", "b"])
    assert not verdicts[0].fits
    assert "node a: GPU 0" in verdicts[0].reason
    assert verdicts[1].fits
    with pytest.raises(PlacementError, match="node a"):
        scheduler.assign(second, "a")
    be = Pod("be", 1000, 1024, 1, 300)
    scheduler.arrived(be)
    assert scheduler.filter_and_score(be, ["a"])[0].fits
    scheduler.release("lc1")
    assert scheduler.filter_and_score(second, ["a"])[0].fits
