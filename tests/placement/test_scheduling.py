"""The scheduler-shaped interface: the simulator's path and the extender's place alike.

Pinned: one policy object, asked through the simulator's decision
(:func:`arkgpu.sim.placing.decide`) and through :class:`Scheduler`
(candidates in, per-node verdicts with scores and reasons out, a binding for
the chosen node), places every pod of a small trace on the same node and GPUs;
ranking never changes what a policy has learned; a node that does not fit
comes with a reason naming what it lacks; nodes join and leave by name.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from arkgpu.model.cluster import Assignment, ClusterState, PlacementError
from arkgpu.model.resources import Node, Pod
from arkgpu.placement import POLICIES, PolicyContext
from arkgpu.placement.arkgpu import ArkgpuPolicy
from arkgpu.placement.base import feasible_nodes
from arkgpu.placement.fgd import FgdPolicy
from arkgpu.placement.ranking import unfit_reason, unfit_reasons
from arkgpu.placement.scheduling import Scheduler, best_verdict, build_policy
from arkgpu.sim.placing import decide
from arkgpu.traces.openb import load_nodes, load_pods
from placement.placement_helpers import write_small_trace

#: Every registered policy whose choice draws nothing from the generator (Random
#: draws its node while ranking, so a second ranking for the bind draws again).
DETERMINISTIC = [n for n in POLICIES.names() if n != "random"]


def _trace(tmp_path: Path) -> tuple[list[Node], list[Pod]]:
    nodes, pods = write_small_trace(tmp_path, count=90)
    return load_nodes(nodes), load_pods(pods)


def _scheduler_choice(scheduler: Scheduler, pod: Pod) -> Assignment | None:
    names = [n.name for n in scheduler.state.nodes]
    verdicts = scheduler.filter_and_score(pod, names)
    assert [v.node for v in verdicts] == names
    assert all(v.fits == (v.reason == "") for v in verdicts)
    best = best_verdict(verdicts)
    if best is None:
        return None
    binding = scheduler.assign(pod, best.node)
    return Assignment(scheduler.state.node_index(binding.node), binding.gpus)


@pytest.mark.parametrize("name", DETERMINISTIC)
def test_one_policy_object_places_alike_through_both_paths(tmp_path: Path, name: str) -> None:
    """Per arrival, the same object is told of the pod once, then asked both ways."""
    nodes, pods = _trace(tmp_path)
    state = ClusterState.from_nodes(nodes)
    policy = POLICIES.create(name, PolicyContext(state, pods))
    scheduler = Scheduler(state, policy, np.random.default_rng(0))
    failed = 0
    for pod in pods:
        policy.observe(state, pod)
        simulated = policy.rank(state, pod, np.random.default_rng(0)).best()
        assert _scheduler_choice(scheduler, pod) == simulated, (name, pod.name)
        failed += simulated is None
    assert failed > 0  # the small cluster fills up: the reasons are exercised too


@pytest.mark.parametrize("name", DETERMINISTIC)
def test_simulator_run_and_scheduler_run_give_the_same_placements(
    tmp_path: Path, name: str
) -> None:
    """Two runs from the same start: the simulator's decide() and the extender's calls."""
    nodes, pods = _trace(tmp_path)
    simulated: list[Assignment | None] = []
    state = ClusterState.from_nodes(nodes)
    policy = POLICIES.create(name, PolicyContext(state, pods))
    for pod in pods:
        simulated.append(where := decide(policy, state, pod, np.random.default_rng(0)))
        if where is not None:
            state.place(pod, where)
    state = ClusterState.from_nodes(nodes)
    scheduler = Scheduler(
        state, POLICIES.create(name, PolicyContext(state, pods)), np.random.default_rng(0)
    )
    served = []
    for pod in pods:
        scheduler.arrived(pod)
        served.append(_scheduler_choice(scheduler, pod))
    assert served == simulated


@pytest.mark.parametrize("name", DETERMINISTIC)
def test_a_subset_of_candidates_is_answered_in_its_order(tmp_path: Path, name: str) -> None:
    """Only the candidates asked about are answered; scores of a node do not depend on the
    other candidates (bestfit's min-max normalisation aside)."""
    nodes, pods = _trace(tmp_path)
    state = ClusterState.from_nodes(nodes)
    scheduler = Scheduler(state, build_policy(name, state), np.random.default_rng(0))
    pod = pods[1]
    scheduler.arrived(pod)
    every = {v.node: v for v in scheduler.filter_and_score(pod, [n.name for n in nodes])}
    some = scheduler.filter_and_score(pod, ["n3", "n0"])
    assert [v.node for v in some] == ["n3", "n0"]
    if name != "bestfit":
        assert [v.score for v in some] == [every["n3"].score, every["n0"].score]


def test_a_node_that_does_not_fit_says_what_it_lacks() -> None:
    """CPU, memory, gpu_spec and GPU room each have their own reason."""
    state = ClusterState.from_nodes(
        [Node("small", 2000, 4096, 1, "T4"), Node("v100", 64000, 65536, 2, "V100M32")]
    )
    scheduler = Scheduler(state, build_policy("fgd", state), np.random.default_rng(0))
    cases = {
        Pod("cpu", 4000, 1024, 1, 500): ("small", "CPU"),
        Pod("mem", 1000, 8192, 1, 500): ("small", "memory"),
        Pod("spec", 1000, 1024, 1, 500, frozenset({"T4"})): ("v100", "the pod's GPU models are T4"),
        Pod("gpus", 1000, 1024, 2, 1000): ("small", "1 GPUs with 1000 milli-GPU"),
        Pod("vram", 1000, 1024, 1, 500, gpu_memory_mib=20_000): ("small", "GPU memory"),
    }
    for pod, (node, words) in cases.items():
        verdict = {v.node: v for v in scheduler.filter_and_score(pod, ["small", "v100"])}[node]
        assert not verdict.fits, pod.name
        assert words in verdict.reason, (pod.name, verdict)


def test_reasons_agree_with_the_feasibility_check() -> None:
    """unfit_reason is empty exactly where feasible_nodes says the node fits."""
    rng = np.random.default_rng(7)
    models = ["T4", "P100", "G2"]
    nodes = [
        Node(
            f"n{i}", int(rng.integers(4, 64)) * 1000, 65536, int(rng.integers(0, 5)), models[i % 3]
        )
        for i in range(12)
    ]
    state = ClusterState.from_nodes(nodes)
    policy = build_policy("bestfit", state)
    for i in range(200):
        num = int(rng.integers(0, 3))
        milli = 0 if num == 0 else int(rng.choice([250, 500, 1000]))
        milli = 1000 if num > 1 else milli
        spec = frozenset({models[int(rng.integers(3))]}) if rng.random() < 0.3 else frozenset()
        pod = Pod(f"p{i}", int(rng.integers(1, 16)) * 1000, 4096, num, milli, spec)
        ok = feasible_nodes(state, pod)
        for n in range(len(nodes)):
            assert (unfit_reason(state, pod, n) == "") == bool(ok[n])
        every = np.arange(len(nodes))[::-1]
        assert unfit_reasons(state, pod, every) == [unfit_reason(state, pod, n) for n in every]
        where = policy.choose(state, pod, rng)
        if where is not None:
            state.place(pod, where)


def test_ranking_never_changes_what_a_policy_learned(tmp_path: Path) -> None:
    """arkgpu and a trace-less FGD learn in observe() only; ranking twice answers the same."""
    nodes, pods = _trace(tmp_path)
    state = ClusterState.from_nodes(nodes)
    arkgpu = build_policy("arkgpu", state)
    fgd = build_policy("fgd", state)
    assert isinstance(arkgpu, ArkgpuPolicy)
    assert isinstance(fgd, FgdPolicy)
    assert len(fgd.tracker.typical.freq) == 0
    for pod in pods[:12]:
        arkgpu.observe(state, pod)
        fgd.observe(state, pod)
        counts = (sum(arkgpu.learner.shapes.values()), sum(fgd.shapes.values()))
        for policy in (arkgpu, fgd):
            first = policy.rank(state, pod, np.random.default_rng(0)).best()
            assert policy.rank(state, pod, np.random.default_rng(0)).best() == first
        assert (sum(arkgpu.learner.shapes.values()), sum(fgd.shapes.values())) == counts
        if first is not None:
            state.place(pod, first)
    assert counts == (12, 12)
    assert len(fgd.tracker.typical.freq) > 0  # FGD learned typical pods from the arrivals


@pytest.mark.parametrize("name", ["fgd", "arkgpu", "bestfit"])
def test_nodes_join_and_leave_by_name(name: str) -> None:
    """A joining node (new GPU model, more GPUs) takes pods; a busy node may not leave;
    a node that left is answered with that reason and may come back."""
    state = ClusterState.from_nodes([Node("a", 8000, 16384, 1, "T4")])
    scheduler = Scheduler(state, build_policy(name, state), np.random.default_rng(0))
    big = Pod("big", 4000, 4096, 4, 1000)
    scheduler.arrived(big)
    assert best_verdict(scheduler.filter_and_score(big, ["a"])) is None
    scheduler.join(Node("b", 32000, 65536, 4, "A100-80GB"))
    verdicts = scheduler.filter_and_score(big, ["a", "b"])
    assert best_verdict(verdicts) == verdicts[1]
    binding = scheduler.assign(big, "b")
    assert binding.gpus == (0, 1, 2, 3)
    assert binding.share_bp == 10_000
    with pytest.raises(PlacementError, match="still runs pods"):
        scheduler.leave("b")
    scheduler.release("big")
    scheduler.leave("b")
    small = Pod("small", 1000, 1024, 1, 500)
    scheduler.arrived(small)
    verdicts = scheduler.filter_and_score(small, ["a", "b"])
    assert verdicts[0].fits
    assert "left the cluster" in verdicts[1].reason
    scheduler.join(Node("b", 16000, 32768, 2, "A100-80GB"))
    assert scheduler.filter_and_score(small, ["b"])[0].fits
    with pytest.raises(PlacementError, match="already in the cluster"):
        scheduler.join(Node("a", 8000, 16384, 1, "T4"))


def test_reasons_of_many_candidates_read_as_each_alone() -> None:
    """Ranking.reasons gives, in the order asked, what Ranking.reason says node by node:
    "" for a fitting node, the policy's refusal, or what the node lacks."""
    nodes = [Node(f"n{i}", (4 + 8 * (i % 3)) * 1000, 65536, i % 3, "T4") for i in range(9)]
    state = ClusterState.from_nodes(nodes)
    rng = np.random.default_rng(3)
    policy = build_policy("arkgpu-reserve", state)
    for k in range(40):  # GPU pods that need CPU: a CPU-only pod strands a free GPU's share
        policy.observe(state, Pod(f"seen{k}", 8000, 1024, 1, 1000))
    pods = [Pod("cpu", 11000, 1024, 0, 0), Pod("gpu", 6000, 1024, 1, 500)]
    pods.append(Pod("big", 12000, 1024, 2, 1000))
    asked = np.array([8, 0, 3, 5, 1, 7], dtype=np.int64)
    kinds = set()
    for pod in pods:
        ranking = policy.rank(state, pod, rng, asked, 0.0)
        alone = [ranking.reason(int(n)) for n in asked]
        assert ranking.reasons(asked) == alone
        kinds |= {"fits" if r == "" else r.split()[0] for r in alone}
    assert {"fits", "node", "the"} <= kinds  # fits, lacks room, refused by the reserve
