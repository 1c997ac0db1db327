"""Each sharing mode's mechanism on small cases with hand-checked outcomes."""

import dataclasses

import pytest

from arkgpu.colocation.observations import GpuObservations, LcObservation
from arkgpu.colocation.sizing import LcDemand, ShareSizer
from arkgpu.sim.colocation.modes import ModeNotApplicableError, ModeOptions
from arkgpu.sim.colocation.runtime import GpuRuntime, PodState
from arkgpu.sim.colocation.scenarios import Scenario
from arkgpu.sim.colocation.simulating import CoLocationSim, RunOptions
from arkgpu.sim.colocation.truth import GroundTruth
from colocation.colocation_helpers import be, lc, tiny


def _sim(
    scenario: Scenario,
    mode: str,
    truth: GroundTruth,
    sizer: ShareSizer,
    options: ModeOptions | None = None,
    *,
    seed: int = 1,
) -> CoLocationSim:
    opts = RunOptions(modes=options or ModeOptions(), record_series=False)
    return CoLocationSim(scenario, mode=mode, seed=seed, truth=truth, sizer=sizer, options=opts)


def test_exclusive_gpu_never_hosts_two_pods(truth: GroundTruth, sizer: ShareSizer) -> None:
    """k8s-native: a third pod waits until the BE job on a GPU finishes, then takes that GPU."""
    sc = tiny(lc("a") + be("short", iterations=30) + be("long"), gpus=2)
    sim = _sim(sc, "k8s-native", truth, sizer)
    sim._admit()
    assert [p.name for p in sim.pending] == ["long"]
    assert all(len(g.pods()) == 1 for g in sim.gpus)
    result = sim.run()
    short, long = sim.bes
    assert short.state is PodState.FINISHED
    assert short.finished_at is not None
    assert long.state is PodState.RUNNING
    assert long.gpu == short.gpu
    assert all(len(g.pods()) <= 1 for g in sim.gpus)
    # the waiting job ran only after the short one finished (whole-GPU rate, 1 s periods)
    rate = result.bes[1].solo_rate
    assert long.iterations <= rate * (sc.duration_s - short.finished_at + 1.0)
    assert long.iterations > 0
    assert result.lcs[0].slo_attainment_pct > 99.0


def test_timeslice_stretches_by_contexts_and_fails_overcommitted_memory(
    truth: GroundTruth, sizer: ShareSizer
) -> None:
    """A batch next to a running BE job takes twice its solo time; a pod whose memory does
    not fit beside the others fails (out of memory) instead of waiting."""
    sc = tiny(lc("a", mem=2048) + be("t", mem=20_000) + be("u", mem=20_000), gpus=1)
    sim = _sim(sc, "timeslice", truth, sizer)
    sim._admit()
    a, (t, u) = sim.lcs[0], sim.bes
    assert (a.state, t.state, u.state) == (PodState.RUNNING, PodState.RUNNING, PodState.FAILED)
    solo = truth.latency_ms("resnet50", 4, 1.0)
    assert sim.mode.lc_batch_ms(a, 4, sim.gpus[0]) == pytest.approx(2 * solo)


def test_mps_fault_fails_every_client_of_the_gpu(truth: GroundTruth, sizer: ShareSizer) -> None:
    """MPS is one fault domain: with faults on, LC requests are lost and the BE job loses
    time; both clients are down until the same restart time. Fault rate 0: nothing lost."""
    sc = tiny(lc("a", rps=200.0) + be("t"), gpus=1)
    faulty = ModeOptions(fault_rate_per_h=1800.0, restart_s=0.5)
    sim = _sim(sc, "mps", truth, sizer, faulty)
    result = sim.run()
    clean = _sim(sc, "mps", truth, sizer).run()
    assert result.lcs[0].lost > 0
    assert clean.lcs[0].lost == 0
    assert sim.lcs[0].down_until == sim.bes[0].down_until > 0
    assert result.bes[0].iterations < clean.bes[0].iterations
    assert result.lcs[0].good < clean.lcs[0].good


def test_mps_equal_gives_each_pod_an_equal_static_share(
    truth: GroundTruth, sizer: ShareSizer
) -> None:
    """mps-equal: n pods on a GPU get 1/n each; mps (default) gives a lone client the whole GPU."""
    sc = tiny(lc("a") + lc("b") + be("t"), gpus=1)
    sim = _sim(sc, "mps-equal", truth, sizer)
    sim._admit()
    assert [p.share for p in sim.gpus[0].pods()] == pytest.approx([1 / 3] * 3)
    alone = _sim(tiny(lc("a")), "mps", truth, sizer)
    alone._admit()
    a = alone.lcs[0]
    assert alone.mode.lc_batch_ms(a, 8, alone.gpus[0]) == pytest.approx(
        truth.latency_ms("resnet50", 8, truth.saturation_share("resnet50", 8))
    )


def test_hami_token_bucket_paces_to_the_limit(truth: GroundTruth, sizer: ShareSizer) -> None:
    """hami: limits on a GPU add up to at most 1; with an empty bucket a batch of work W
    under limit 0.5 takes 2W; with a full bucket a small batch runs at full speed."""
    sc = tiny(lc("a") + lc("b") + be("t"), gpus=1)
    sim = _sim(sc, "hami", truth, sizer)
    sim._admit()
    gpu = sim.gpus[0]
    assert sum(p.share for p in gpu.pods()) <= 1.0 + 1e-9
    lone = _sim(tiny(lc("a")), "hami", truth, sizer)
    lone._admit()
    a = lone.lcs[0]
    a.share, a.tokens_s, a.tokens_at, a.batch_start = 0.5, 0.0, 0.0, 0.0
    work = truth.latency_ms("resnet50", 8, 1.0)
    assert lone.mode.lc_batch_ms(a, 8, lone.gpus[0]) == pytest.approx(2 * work)
    a.tokens_s, a.tokens_at, a.batch_start = 0.0, 0.0, 100.0
    assert lone.mode.lc_batch_ms(a, 1, lone.gpus[0]) == pytest.approx(
        truth.latency_ms("resnet50", 1, 1.0)
    )


def test_tgs_rate_is_aimd_on_lc_throughput(truth: GroundTruth, sizer: ShareSizer) -> None:
    """tgs: +increase per calm period, x decrease when an LC queue grows past a full batch."""
    sim = _sim(tiny(lc("a") + be("t")), "tgs", truth, sizer)
    gpu = GpuRuntime(0, 32768)
    demand = LcDemand("resnet50", 25.0, 100.0, max_batch=32)
    calm = GpuObservations(0, (LcObservation("a", demand, 5.0, queued=0),))
    sim.mode.on_tick(gpu, calm)
    sim.mode.on_tick(gpu, calm)
    assert gpu.control["rate"] == pytest.approx(0.05 + 0.05 + 0.05)
    sim.mode.on_tick(gpu, GpuObservations(0, (LcObservation("a", demand, 50.0, queued=100),)))
    assert gpu.control["rate"] == pytest.approx(0.15 * 0.5)


def test_mig_needs_a100_and_gives_isolated_instances(truth: GroundTruth, sizer: ShareSizer) -> None:
    """mig: refused on V100; on an A100 the 3g+2g+2g layout hosts three pods, a fourth waits.
    (The V100 truth stands in for an A100 here: this pins the mechanism, not figures.)"""
    with pytest.raises(ModeNotApplicableError):
        _sim(tiny(lc("a")), "mig", truth, sizer).run()
    sc = tiny(lc("a") + lc("b") + lc("c") + lc("d"), gpus=1, gpu="A100-80GB")
    sim = _sim(sc, "mig", truth, sizer)
    sim._admit()
    shares = sorted(p.share for p in sim.gpus[0].pods())
    assert shares == pytest.approx([2 / 7, 2 / 7, 3 / 7])
    assert [p.name for p in sim.pending] == ["d"]
    a = sim.lcs[0]
    assert sim.mode.lc_batch_ms(a, 4, sim.gpus[0]) == pytest.approx(
        truth.latency_ms("resnet50", 4, a.share)
    )


def test_arkgpu_places_only_where_targets_are_predicted_to_hold(
    truth: GroundTruth, sizer: ShareSizer
) -> None:
    """arkgpu: two services that each need most of a GPU at peak do not share one; BE gets
    what the LC shares leave."""
    heavy = lc("a", rps=800.0) + lc("b", rps=800.0)
    sim = _sim(tiny(heavy + be("t"), gpus=1), "arkgpu", truth, sizer)
    sim._admit()
    assert [p.name for p in sim.pending] == ["b"]
    gpu = sim.gpus[0]
    lc_share = sum(x.share for x in gpu.lcs if x.state is PodState.RUNNING)
    assert sim.bes[0].share == pytest.approx(1.0 - lc_share)
    both = _sim(tiny(heavy, gpus=2), "arkgpu", truth, sizer)
    both._admit()
    assert {x.gpu for x in both.lcs} == {0, 1}


def test_arkgpu_static_does_not_lend_idle_share(truth: GroundTruth, sizer: ShareSizer) -> None:
    """With lending the BE job is at least as fast as without, on the same seed."""
    sc = tiny(lc("a", rps=100.0) + be("t"), gpus=1)
    lend = _sim(sc, "arkgpu", truth, sizer).run()
    static = _sim(sc, "arkgpu-static", truth, sizer).run()
    assert lend.bes[0].iterations > static.bes[0].iterations
    assert dataclasses.asdict(lend.lcs[0])["arrived"] == static.lcs[0].arrived
