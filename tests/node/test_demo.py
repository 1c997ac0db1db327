"""The node runtime with real processes on the fake GPU: one LC and one BE container.

Generous bounds (a loaded 2-core machine): the issue's must-show figures. They hold at a
load average of 8 on 2 cores, and fail when the runtime is broken (docs/NODE.md, "The
demo's tests under load"):

- the workloads start once the runtime has printed its start line (its predictor loaded),
  however long a loaded machine makes that, and the restart test measures from the
  restarted runtime's start line, not from a fixed time;
- the demo's processes run favoured (``FAVOURED_NICE``, as root), as a node's daemon and
  workloads have their CPU;
- LC latency: the p95 of each 4-s phase and the p99 of all phases but one within the
  target (the p99 of a phase rests on 3 to 6 requests, and one stall of the LC server's
  own process delays 5 to 15 at once); LC's recovery: the p95 of the requests from 2 s
  after the load step to the phase end.
"""

from __future__ import annotations

import pytest

from arkgpu.node.demo import DemoConfig, DemoRun, lc_percentile, phase_bounds, run_demo, summarise

SHORT = DemoConfig(warmup_s=2.0, phase_s=4.0)
"""A short run: 2 s warm-up, three 4-s phases."""
RECOVER_S = 2.0
"""LC is back within its target this long after the load doubles."""


def _lc_within_target(config: DemoConfig, run: DemoRun, after_s: float = 0.0) -> None:
    """Of the measured phases that start after ``after_s``: the p95 of every one and the
    p99 of all but one within the target (one stall of the LC server's process lands in
    one phase; a runtime that under-provisions LC puts several over)."""
    report = summarise(config, run)
    phases = [p for p, (start, _) in phase_bounds(config).items() if start >= after_s]
    over95 = [p for p in phases if not report["lc_p95_over_target"][p] <= 1.0]
    over99 = [p for p in phases if not report["lc_p99_over_target_max"][p] <= 1.0]
    assert not over95, (over95, report)
    assert len(over99) <= 1, (over99, report)


@pytest.mark.timeout(300)
def test_lc_within_target_be_takes_the_leftover_and_follows_the_steps() -> None:
    """LC within target in every phase; BE >= 80% of the busy time LC leaves; BE's
    share rises within 2 s of the load halving; LC back within target within 2 s."""
    run = run_demo(SHORT)
    assert run.lc_exit.startswith("status 0"), run.lc_exit
    report = summarise(SHORT, run)
    _lc_within_target(SHORT, run)
    assert report["be_busy_share_of_leftover"] >= 0.8, report
    assert report["be_share_rise_s"] <= 2.0, report
    step, end = phase_bounds(SHORT)["high_again"]
    recovered = lc_percentile(run, step + RECOVER_S, end, 95.0)
    assert recovered <= SHORT.target_ms, (recovered, report)
    assert report["be_iterations"] > 0, report


@pytest.mark.timeout(300)
def test_a_killed_runtime_leaves_limits_and_its_restart_carries_on() -> None:
    """SIGKILL of the runtime mid-run: no limit changes while none runs, the restarted
    runtime takes over (it writes again), and LC stays within target."""
    config = DemoConfig(warmup_s=2.0, phase_s=4.0, kill_runtime_at_s=3.5, restart_after_s=1.0)
    run = run_demo(config)
    assert run.lc_exit.startswith("status 0"), run.lc_exit
    assert run.limits_at_kill, "the runtime was never killed"
    assert run.limits_before_restart == run.limits_at_kill
    assert run.restarted_at is not None, "the restarted runtime never loaded its predictor"
    restarted = run.restarted_at + 1.0  # its first period, then the rebuild period
    later = {s["lc_bp"] for s in run.samples if s["t"] > restarted}
    assert len(later) > 1, "the restarted runtime never wrote a share"
    _lc_within_target(config, run)


@pytest.mark.timeout(300)
def test_a_killed_container_leaves_the_others_unaffected() -> None:
    """SIGKILL of the BE container's processes: the runtime stops deciding for it (its
    limits freeze) and the LC container stays within target."""
    config = DemoConfig(warmup_s=2.0, phase_s=4.0, kill_be_at_s=4.0)
    run = run_demo(config)
    assert run.lc_exit.startswith("status 0"), run.lc_exit
    assert run.be_killed_at is not None
    settled = run.be_killed_at + 1.0
    frozen = {(s["be_bp"], s["lent_bp"]) for s in run.samples if s["t"] > settled}
    assert len(frozen) == 1, frozen
    lc_after = {s["lc_bp"] for s in run.samples if s["t"] > settled}
    assert len(lc_after) > 1, "the runtime stopped deciding for the LC container too"
    _lc_within_target(config, run, config.warmup_s)
