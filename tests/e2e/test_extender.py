"""The extender on the real control plane: kube-scheduler 1.37 calls it; pods land where the
placement policy puts them; 200 pods at once never over-commit a GPU; deleting pods frees
their shares; the extender killed (SIGKILL) mid-stream or at any step of a bind loses nothing.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s

from arkgpu.k8s.cluster.objects import read_node, read_pod
from arkgpu.k8s.extender.config import ExtenderConfig
from arkgpu.k8s.extender.running import build_scheduler
from arkgpu.k8s.extender.state import ClusterView

from .controlplane import ExtenderPlane
from .extender_helpers import (
    ExtenderProcess,
    assignment,
    check_consistent,
    create_nodes,
    gpu_pod,
    pods_json,
    wait_bound,
)
from .kube_types import body as json_body
from .kube_types import filled
from .nodes import wait_for

SETTLE_TIMEOUT_S = 120.0
"""Generous bound for pods to bind (kube-scheduler's back-off reaches 10 s after failures)."""


@pytest.fixture(scope="module")
def extender(extender_plane: ExtenderPlane) -> Iterator[ExtenderProcess]:
    process = ExtenderProcess(extender_plane)
    process.start()
    yield process
    process.kill()


@pytest.fixture
def admin(extender_plane: ExtenderPlane) -> Iterator[k8s.ApiClient]:
    with extender_plane.plane.api_client() as api_client:
        yield api_client


@pytest.fixture
def ns(admin: k8s.ApiClient) -> Iterator[str]:
    """A fresh namespace; its pods are deleted afterwards (no controller manager runs to
    empty a deleted namespace), so no pending pod reaches the next test's extender."""
    core = k8s.CoreV1Api(admin)
    name = f"ext-{time.monotonic_ns() % 10**9}"
    core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=name)))
    core.create_namespaced_service_account(
        name, k8s.V1ServiceAccount(metadata=k8s.V1ObjectMeta(name="default"))
    )
    yield name
    core.delete_collection_namespaced_pod(name, grace_period_seconds=0)


SHARE = {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "25", "nvidia.com/gpumem": "16384"}
SHAPES: list[dict[str, str]] = [
    {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "30", "nvidia.com/gpumem": "8192"},
    {"nvidia.com/gpu": "1"},
    {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "50", "nvidia.com/gpumem-percentage": "50"},
    {"nvidia.com/gpu": "2"},
    {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "60"},
    {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "20000"},
]


def test_pods_land_where_the_policy_puts_them(
    extender: ExtenderProcess, admin: k8s.ApiClient, ns: str
) -> None:
    """One pod at a time through kube-scheduler: its node has the policy's best score (a
    replica of the extender's view, fed the same nodes and placements) and its GPUs are the
    ones the policy gives on that node."""
    core = k8s.CoreV1Api(admin)
    group, names = create_nodes(admin, 3, 2)
    replica = ClusterView(
        build_scheduler(ExtenderConfig(lc_check=False, relearn_in_background=False)),
        "arkgpu-scheduler",
        0,
    )
    for name in names:
        raw = admin.sanitize_for_serialization(core.read_node(name))  # type: ignore[no-untyped-call]
        replica.node_seen(read_node(raw))
    for k, limits in enumerate(SHAPES):
        core.create_namespaced_pod(ns, json_body(gpu_pod(f"p{k}", group, limits)))
        pod = _wait_bound_pod(admin, ns, f"p{k}")
        info = read_pod({**pod, "metadata": {**pod["metadata"], "annotations": {}}})
        fits = replica.verdicts(info, names).fits
        assert fits[pod["spec"]["nodeName"]] == max(fits.values()), (k, fits, pod["spec"])
        expected = replica.assign(info, pod["spec"]["nodeName"])
        expected.writing = False
        actual = assignment(pod)
        assert actual is not None
        assert [g["index"] for g in actual["gpus"]] == [g.index for g in expected.assignment.gpus]
        assert [g["share_bp"] for g in actual["gpus"]] == [
            g.share_bp for g in expected.assignment.gpus
        ]
    assert check_consistent(pods_json(admin, ns)) == len(SHAPES)
    bad = gpu_pod("bad", group, {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "50"})
    bad["metadata"]["annotations"] = {"arkgpu.io/qos": "lc"}  # an LC pod without its model
    core.create_namespaced_pod(ns, json_body(bad))

    def refusal() -> str | None:
        events = core.list_namespaced_event(ns, field_selector="involvedObject.name=bad").items
        said = [e.message for e in events if e.reason == "FailedScheduling"]
        return said[0] if said else None

    message = wait_for(refusal, SETTLE_TIMEOUT_S, "FailedScheduling of the bad pod")
    stored = core.read_namespaced_pod("bad", ns)
    (scheduled,) = [c for c in filled(stored.status).conditions or [] if c.type == "PodScheduled"]
    assert message == scheduled.message  # the event is the condition's text, whole
    assert f"pod {ns}/bad: arkgpu.io/model: required for an lc pod" in message


def _wait_bound_pod(admin: k8s.ApiClient, ns: str, name: str) -> dict[str, Any]:
    try:
        return wait_for(lambda: _bound(admin, ns, name), SETTLE_TIMEOUT_S, f"{name} bound")
    except AssertionError as exc:
        events = k8s.CoreV1Api(admin).list_namespaced_event(ns).items
        said = [f"{e.involved_object.name}: {e.reason}: {e.message}" for e in events]
        raise AssertionError(f"{exc}; events: {said[-5:]}") from None


def _bound(admin: k8s.ApiClient, ns: str, name: str) -> dict[str, Any] | None:
    for p in pods_json(admin, ns):
        if p["metadata"]["name"] == name and p["spec"].get("nodeName"):
            return p
    return None


def test_200_pods_at_once_never_over_commit_and_deletes_free_shares(
    extender: ExtenderProcess, admin: k8s.ApiClient, ns: str
) -> None:
    """5 nodes x 4 GPUs hold 80 pods of 25%: of 200 created at once exactly 80 bind, no GPU
    over 100%; deleting 30 bound pods lets 30 pending ones bind."""
    core = k8s.CoreV1Api(admin)
    group, _ = create_nodes(admin, 5, 4)
    for k in range(200):
        core.create_namespaced_pod(ns, json_body(gpu_pod(f"p{k}", group, SHARE)))
    pods = wait_bound(admin, ns, 80, SETTLE_TIMEOUT_S)
    time.sleep(2.0)  # room for an over-commit to show, were there one
    pods = pods_json(admin, ns)
    assert check_consistent(pods) == 80
    assert sum(assignment(p) is not None for p in pods) == 80
    bound = [p["metadata"]["name"] for p in pods if p["spec"].get("nodeName")]
    for name in bound[:30]:
        core.delete_namespaced_pod(name, ns, grace_period_seconds=0)
    wait_for(lambda: len(pods_json(admin, ns)) == 170 or None, SETTLE_TIMEOUT_S, "30 deleted")
    pods = wait_bound(admin, ns, 80, SETTLE_TIMEOUT_S)
    assert check_consistent(pods_json(admin, ns)) == 80


def test_killed_mid_stream_and_restarted_loses_no_assignment(
    extender: ExtenderProcess, admin: k8s.ApiClient, ns: str
) -> None:
    """60 pods (room for 64): the extender is SIGKILLed once some are bound and started
    again; every pod ends bound, each with its assignment, none over-committed."""
    core = k8s.CoreV1Api(admin)
    group, _ = create_nodes(admin, 4, 4)
    for k in range(60):
        core.create_namespaced_pod(ns, json_body(gpu_pod(f"p{k}", group, SHARE)))
    wait_bound(admin, ns, 10, SETTLE_TIMEOUT_S)
    extender.kill()
    check_consistent(pods_json(admin, ns))
    extender.start()
    wait_bound(admin, ns, 60, SETTLE_TIMEOUT_S)
    assert check_consistent(pods_json(admin, ns)) == 60


def test_killed_at_each_step_of_a_bind(
    extender: ExtenderProcess, admin: k8s.ApiClient, ns: str
) -> None:
    """The process SIGKILLs itself right after one step of a bind: after the decision (nothing
    written), after the Binding (bound with its assignment: one write carries both). Each
    next process picks up what the last one left: the pod ends bound once, on its annotated
    GPU, and the node takes the next pod (no lock left behind)."""
    core = k8s.CoreV1Api(admin)
    group, _ = create_nodes(admin, 1, 1)
    half = {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "50"}
    extender.kill()
    extender.start(kill_at="decision")
    core.create_namespaced_pod(ns, json_body(gpu_pod("a", group, half)))
    seen: list[tuple[str, bool, bool]] = []
    for step, after in (("decision", "binding"), ("binding", "")):
        assert extender.wait_dead(SETTLE_TIMEOUT_S) == -9, step
        (pod,) = pods_json(admin, ns)
        seen.append((step, assignment(pod) is not None, bool(pod["spec"].get("nodeName"))))
        extender.start(kill_at=after)
    assert seen == [("decision", False, False), ("binding", True, True)]
    core.create_namespaced_pod(ns, json_body(gpu_pod("b", group, half)))
    core.create_namespaced_pod(ns, json_body(gpu_pod("c", group, half)))
    wait_bound(admin, ns, 2, SETTLE_TIMEOUT_S)
    time.sleep(1.0)
    assert check_consistent(pods_json(admin, ns)) == 2
