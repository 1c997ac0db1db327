"""Bind: one write, the Binding carrying the assignment; concurrent binds never over-commit a
GPU; a failure undoes the placement; a restart rebuilds the state from the API server."""

from __future__ import annotations

import json
import threading
from collections import defaultdict
from typing import Any

from arkgpu.k8s.cluster.api import ApiError
from arkgpu.k8s.cluster.memory import MemoryApi
from arkgpu.k8s.contract import ANNOTATION_ASSIGNMENT

from .helpers import args, binding, node, pod, post, started, wait


def _assignments(api: MemoryApi) -> dict[str, dict[str, Any]]:
    out = {}
    for p in api.list("pods").items:
        note = p["metadata"].get("annotations", {}).get(ANNOTATION_ASSIGNMENT)
        if note:
            out[p["metadata"]["name"]] = json.loads(note)
    return out


def _share_per_gpu(api: MemoryApi) -> dict[str, int]:
    used: dict[str, int] = defaultdict(int)
    for a in _assignments(api).values():
        for g in a["gpus"]:
            used[g["uuid"]] += g["share_bp"]
    return used


def test_concurrent_binds_never_over_commit() -> None:
    """60 pods of 40% on 2 nodes x 2 GPUs (room for 8): 8 threads bind them all to the two
    nodes at once; exactly 8 bind, every GPU holds at most 100%, the rest get an error."""
    api = MemoryApi()
    api.put("nodes", node("n1"))
    api.put("nodes", node("n2"))
    pods = [pod(f"p{i}", {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "40"}) for i in range(60)]
    for p in pods:
        api.put("pods", p)
    running = started(api)
    errors: list[str] = []

    def work(chunk: list[dict[str, Any]]) -> None:
        for k, p in enumerate(chunk):
            status, answer = post(running.port, "/bind", binding(p, "n1" if k % 2 else "n2"))
            assert status == 200
            errors.append(answer["Error"])

    threads = [threading.Thread(target=work, args=(pods[t::8],)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    running.close()
    assert sum(e == "" for e in errors) == 8
    assert all("GPU" in e or "fit" in e or "node" in e for e in errors if e)
    used = _share_per_gpu(api)
    assert len(used) == 4
    assert max(used.values()) <= 10_000
    bound = [p for p in api.list("pods").items if p["spec"].get("nodeName")]
    assert len(bound) == 8 == len(_assignments(api))


class FailingApi(MemoryApi):
    """Refuses the Binding (and, when ``cut``, every later write: the connection is gone)."""

    def __init__(self) -> None:
        super().__init__()
        self.cut = False
        self.fail_binding = True

    def bind_pod(
        self, namespace: str, name: str, uid: str, node: str, annotations: Any = None
    ) -> None:
        if self.fail_binding:
            raise ApiError(0 if self.cut else 500, "binding refused")
        super().bind_pod(namespace, name, uid, node, annotations)


def test_bind_is_one_write_that_carries_the_assignment() -> None:
    """One Binding per pod: the pod comes back bound and annotated, no patch before it."""
    api = MemoryApi()
    api.put("nodes", node("n1"))
    api.put("pods", pod("a"))
    running = started(api)
    before = api.writes
    assert post(running.port, "/bind", binding(pod("a"), "n1"))[1] == {"Error": ""}
    running.close()
    assert api.writes - before == 1
    stored = api.get_pod("team-a", "a")
    assert stored["spec"]["nodeName"] == "n1"
    assert _assignments(api)["a"]["node"] == "n1"


def test_failed_binding_undoes_the_placement_and_its_annotation() -> None:
    api = FailingApi()
    api.put("nodes", node("n1", gpus=1))
    whole = {"nvidia.com/gpu": "1"}
    api.put("pods", pod("a", whole))
    running = started(api)
    _status, answer = post(running.port, "/bind", binding(pod("a", whole), "n1"))
    assert "binding failed" in answer["Error"]
    assert _assignments(api) == {}
    assert running.extender.view.placed == {}
    api.fail_binding = False
    assert post(running.port, "/bind", binding(pod("a", whole), "n1"))[1] == {"Error": ""}
    running.close()


def test_cut_connection_keeps_the_pod_counted_until_the_api_settles_it() -> None:
    """The Binding fails and the annotation cannot be removed: the pod stays counted (its
    annotation may be there); kube-scheduler's retry binds it to the same GPUs."""
    api = FailingApi()
    api.cut = True
    api.put("nodes", node("n1", gpus=1))
    whole = {"nvidia.com/gpu": "1"}
    api.put("pods", pod("a", whole))
    api.put("pods", pod("b", whole))
    running = started(api)
    answer = post(running.port, "/bind", binding(pod("a", whole), "n1"))[1]
    assert "binding failed" in answer["Error"]
    assert "uid-team-a-a" in running.extender.view.placed  # counted: no over-commit
    assert "GPU" in post(running.port, "/bind", binding(pod("b", whole), "n1"))[1]["Error"]
    api.cut = api.fail_binding = False
    assert post(running.port, "/bind", binding(pod("a", whole), "n1"))[1] == {"Error": ""}
    assert api.get_pod("team-a", "a")["spec"]["nodeName"] == "n1"
    running.close()


def test_restart_rebuilds_the_state_and_finishes_a_half_done_bind() -> None:
    """Pod a bound, pod b annotated but not bound (a crash between the two writes): a new
    extender counts both; b's bind to its node only binds; deleting a frees its GPU."""
    api = MemoryApi()
    api.put("nodes", node("n1", gpus=2))
    whole = {"nvidia.com/gpu": "1"}
    for name in ("a", "b", "c"):
        api.put("pods", pod(name, whole))
    first = started(api)
    assert post(first.port, "/bind", binding(pod("a", whole), "n1"))[1] == {"Error": ""}
    placed = first.extender.view.placed
    first.close()
    note = placed["uid-team-a-a"].assignment
    other = note.gpus[0].index
    half = {
        "version": 1,
        "node": "n1",
        "qos": "be",
        "container": "main",
        "gpus": [
            {"index": 1 - other, "uuid": f"GPU-n1-{1 - other}", "memory_mib": 0, "share_bp": 10000}
        ],
    }
    api.annotate_pod("team-a", "b", "uid-team-a-b", {ANNOTATION_ASSIGNMENT: json.dumps(half)})
    second = started(api)
    view = second.extender.view
    assert set(view.placed) == {"uid-team-a-a", "uid-team-a-b"}
    _status, answer = post(second.port, "/filter", args(pod("c", whole), ["n1"]))
    assert answer["NodeNames"] == []
    assert "n1" in answer["FailedNodes"]
    assert post(second.port, "/bind", binding(pod("b", whole), "n1"))[1] == {"Error": ""}
    assert _assignments(api)["b"] == half
    api.delete("pods", "team-a/a")
    wait(lambda: "uid-team-a-a" not in view.placed, "a released")
    assert post(second.port, "/filter", args(pod("c", whole), ["n1"]))[1]["NodeNames"] == ["n1"]
    second.close()


def test_nothing_is_decided_before_the_first_lists() -> None:
    """A half-listed snapshot would show held GPUs free: filter and bind answer an Error."""
    api = MemoryApi()
    api.put("nodes", node("n1", gpus=1))
    api.put("pods", pod("a", {"nvidia.com/gpu": "1"}))
    running = started(api)
    running.extender.ready = lambda: False
    whole = {"nvidia.com/gpu": "1"}
    answer = post(running.port, "/filter", args(pod("a", whole), ["n1"]))[1]
    assert "not listed the cluster yet" in answer["Error"]
    assert answer["NodeNames"] == []
    assert "not listed" in post(running.port, "/bind", binding(pod("a", whole), "n1"))[1]["Error"]
    assert _assignments(api) == {}
    running.close()


class LostAnswerApi(MemoryApi):
    """The Binding goes through but its answer is lost, and the connection stays cut for
    the reads and the annotation's removal that follow."""

    def __init__(self) -> None:
        super().__init__()
        self.cut = False

    def bind_pod(
        self, namespace: str, name: str, uid: str, node: str, annotations: Any = None
    ) -> None:
        super().bind_pod(namespace, name, uid, node, annotations)
        self.cut = True
        raise ApiError(0, "connection reset")

    def get_pod(self, namespace: str, name: str) -> Any:
        if self.cut:
            raise ApiError(0, "connection refused")
        return super().get_pod(namespace, name)

    def annotate_pod(self, namespace: str, name: str, uid: str, annotations: dict[str, Any]) -> Any:
        if self.cut:
            raise ApiError(0, "connection refused")
        return super().annotate_pod(namespace, name, uid, annotations)


def test_a_lost_binding_answer_never_strips_or_moves_the_assignment() -> None:
    """The pod stays on the node of the cut-off bind: filtered to it alone, refused elsewhere;
    the retry there finds it bound and answers success; its assignment is that node's."""
    api = LostAnswerApi()
    api.put("nodes", node("n1", gpus=1))
    api.put("nodes", node("n2", gpus=1))
    whole = {"nvidia.com/gpu": "1"}
    api.put("pods", pod("a", whole))
    running = started(api)
    assert (
        "binding failed" in post(running.port, "/bind", binding(pod("a", whole), "n1"))[1]["Error"]
    )
    api.cut = False
    answer = post(running.port, "/bind", binding(pod("a", whole), "n2"))[1]["Error"]
    # kept on n1: pinned while the outcome is unknown, or found bound once the watch told
    assert "it stays on node n1" in answer or "already bound to node n1" in answer
    assert post(running.port, "/bind", binding(pod("a", whole), "n1"))[1] == {"Error": ""}
    stored = api.get_pod("team-a", "a")
    assert stored["spec"]["nodeName"] == "n1"
    assert _assignments(api)["a"]["node"] == "n1"
    placed = running.extender.view.placed["uid-team-a-a"]
    assert (placed.assignment.node, placed.confirmed) == ("n1", True)
    running.close()


def test_a_pod_whose_bind_was_cut_off_stays_on_its_node() -> None:
    """The Binding's connection is cut (outcome unknown): the annotation is not removed, the
    pod is offered its node only, a bind elsewhere is refused, the retry there binds."""
    api = FailingApi()
    api.cut = True
    api.put("nodes", node("n1", gpus=1))
    api.put("nodes", node("n2", gpus=1))
    whole = {"nvidia.com/gpu": "1"}
    api.put("pods", pod("a", whole))
    running = started(api)
    assert (
        "binding failed" in post(running.port, "/bind", binding(pod("a", whole), "n1"))[1]["Error"]
    )
    assert _assignments(api) == {}  # a late Binding would bring its own annotation
    answer = post(running.port, "/filter", args(pod("a", whole), ["n1", "n2"]))[1]
    assert answer["NodeNames"] == ["n1"]
    answer = post(running.port, "/filter", args(pod("a", whole), ["n2"]))[1]
    assert answer["NodeNames"] == []
    assert "no known outcome yet" in answer["FailedNodes"]["n2"]
    assert (
        "stays on node n1"
        in post(running.port, "/bind", binding(pod("a", whole), "n2"))[1]["Error"]
    )
    api.cut = api.fail_binding = False
    assert post(running.port, "/bind", binding(pod("a", whole), "n1"))[1] == {"Error": ""}
    running.close()
