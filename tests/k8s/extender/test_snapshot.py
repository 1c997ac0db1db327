"""The snapshot follows the API server: list then watch, a 410 Gone lists again, a cut
connection retries with back-off; finished and deleted pods give their shares back; a node
that changes or leaves and comes back keeps its pods on their GPUs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from arkgpu.k8s.cluster.api import ApiError, Listed, WatchEvent
from arkgpu.k8s.cluster.memory import MemoryApi
from arkgpu.k8s.contract import ANNOTATION_ASSIGNMENT, ANNOTATION_INVENTORY

from .helpers import args, binding, inventory, node, pod, post, started, wait

WHOLE = {"nvidia.com/gpu": "1"}


class FlakyApi(MemoryApi):
    """Fails the next ``failures`` lists and watches as a cut connection would."""

    def __init__(self) -> None:
        super().__init__(keep_events=3)
        self.failures = 0

    def _maybe_fail(self) -> None:
        if self.failures:
            self.failures -= 1
            raise ApiError(0, "connection refused")

    def list(self, resource: str) -> Listed:
        self._maybe_fail()
        return super().list(resource)

    def watch(self, resource: str, resource_version: str, timeout_s: float) -> Iterator[WatchEvent]:
        self._maybe_fail()
        return super().watch(resource, resource_version, 0.3)


def _metric(running: Any, name: str) -> float:
    value = running.server.registry.get_sample_value(name, {"resource": "pods"})
    return float(value or 0.0)


def test_watch_survives_cuts_and_gone_and_counts_restarts() -> None:
    api = FlakyApi()
    api.put("nodes", node("n1", gpus=2))
    api.failures = 2
    running = started(api)
    for name in ("a", "b"):
        api.put("pods", pod(name, WHOLE))
        assert post(running.port, "/bind", binding(pod(name, WHOLE), "n1"))[1] == {"Error": ""}
    api.failures = 2
    for k in range(6):  # more changes than the 3 events kept: the watch gets 410, lists again
        api.put("pods", pod(f"x{k}", {"nvidia.com/gpu": "0"}))
    api.delete("pods", "team-a/a")
    view = running.extender.view
    wait(lambda: "uid-team-a-a" not in view.placed, "a released")
    assert set(view.placed) == {"uid-team-a-b"}
    assert _metric(running, "arkgpu_extender_watch_restarts_total") >= 1
    running.close()


def test_finished_pods_free_their_gpu() -> None:
    api = MemoryApi()
    api.put("nodes", node("n1", gpus=1))
    api.put("pods", pod("a", WHOLE))
    running = started(api)
    assert post(running.port, "/bind", binding(pod("a", WHOLE), "n1"))[1] == {"Error": ""}
    api.put("pods", pod("b", WHOLE))
    assert post(running.port, "/filter", args(pod("b", WHOLE), ["n1"]))[1]["NodeNames"] == []
    done = api.get_pod("team-a", "a")
    done["status"]["phase"] = "Succeeded"
    api.put("pods", done)
    wait(lambda: not running.extender.view.placed, "a released")
    assert post(running.port, "/filter", args(pod("b", WHOLE), ["n1"]))[1]["NodeNames"] == ["n1"]
    running.close()


def test_node_changes_keep_pods_on_their_gpus() -> None:
    """GPU 1 turns unhealthy: the pod on GPU 0 stays counted there, GPU 1 is no longer
    offered; the node leaves and returns: its pod is counted again."""
    api = MemoryApi()
    api.put("nodes", node("n1", gpus=2))
    api.put("pods", pod("a", WHOLE))
    running = started(api)
    assert post(running.port, "/bind", binding(pod("a", WHOLE), "n1"))[1] == {"Error": ""}
    gpu = json.loads(api.get_pod("team-a", "a")["metadata"]["annotations"][ANNOTATION_ASSIGNMENT])
    used = gpu["gpus"][0]["index"]
    sick = node("n1", gpus=2, unhealthy=(1 - used,))
    api.put("nodes", sick)
    view = running.extender.view
    wait(lambda: len(view.nodes.get("n1", node_stub()).gpus) == 1, "inventory change seen")
    # counted again once both the node's change and the pod's bound event are in (two
    # watches, no order between them)
    wait(lambda: "uid-team-a-a" in view.placed, "the pod counted on the changed node")
    _status, answer = post(running.port, "/filter", args(pod("b", WHOLE), ["n1"]))
    assert answer["FailedNodes"]["n1"].startswith("node n1 has 0 GPUs")
    api.delete("nodes", "n1")
    wait(lambda: "n1" not in view.nodes, "node gone")
    assert view.placed == {}
    api.put("nodes", node("n1", gpus=2))
    wait(lambda: "uid-team-a-a" in view.placed, "pod counted again")
    assert (
        inventory("n1", 2)
        == api.list("nodes").items[0]["metadata"]["annotations"][ANNOTATION_INVENTORY]
    )
    running.close()


def node_stub() -> Any:
    class Stub:
        gpus = ()

    return Stub()
