"""Containers per GPU never exceed the devices the kubelet advertises for it (issue 32, item 4):
small pods fit the share and memory of a GPU many times over, but the kubelet admits only as
many containers on it as the device plugin advertises devices (``split_count``)."""

from __future__ import annotations

from typing import Any

from arkgpu.k8s.cluster.memory import MemoryApi
from arkgpu.k8s.cluster.objects import read_node

from .helpers import args, binding, node, pod, post, started, wait

SMALL = {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "5", "nvidia.com/gpumem": "1024"}


def _node(name: str, gpus: int, devices: int | None, **kwargs: Any) -> dict[str, Any]:
    obj = node(name, gpus=gpus, **kwargs)
    if devices is not None:
        obj["status"]["allocatable"] = {
            **obj["status"]["allocatable"],
            "nvidia.com/gpu": str(devices),
        }
    return obj


def test_devices_per_gpu_is_allocatable_over_the_healthy_gpus() -> None:
    """10 devices on 2 GPUs, one unhealthy (its devices are not allocatable): 10 per GPU; no
    nvidia.com/gpu in allocatable yet (plugin not registered): 0, no bound."""
    assert read_node(_node("n", 2, 10, unhealthy=(1,))).devices_per_gpu == 10
    assert read_node(_node("n", 2, 6)).devices_per_gpu == 3
    assert read_node(_node("n", 2, None)).devices_per_gpu == 0


def test_a_gpu_takes_no_more_containers_than_it_has_devices() -> None:
    """One GPU with 3 devices: three 5% pods are bound, the fourth fits no node although share
    and memory are left; once one finishes, it fits again."""
    api = MemoryApi()
    api.put("nodes", _node("n1", 1, 3))
    running = started(api)
    try:
        for name in ("a", "b", "c"):
            api.put("pods", pod(name, SMALL))
            names = post(running.port, "/filter", args(pod(name, SMALL), ["n1"]))[1]["NodeNames"]
            assert names == ["n1"]
            assert post(running.port, "/bind", binding(pod(name, SMALL), "n1"))[1] == {"Error": ""}
        api.put("pods", pod("d", SMALL))
        assert post(running.port, "/filter", args(pod("d", SMALL), ["n1"]))[1]["NodeNames"] == []
        done = api.get_pod("team-a", "a")
        done["status"]["phase"] = "Succeeded"
        api.put("pods", done)
        view = running.extender.view
        wait(lambda: "uid-team-a-a" not in view.placed, "a released")
        assert post(running.port, "/filter", args(pod("d", SMALL), ["n1"]))[1]["NodeNames"] == [
            "n1"
        ]
    finally:
        running.close()


def test_pods_already_assigned_beyond_the_bound_are_all_counted() -> None:
    """An extender restarting over 3 pods assigned to a GPU that now advertises 2 devices counts
    all three (they hold their GPU) and places no fourth."""
    api = MemoryApi()
    api.put("nodes", _node("n1", 1, 3))
    first = started(api)
    for name in ("a", "b", "c"):
        api.put("pods", pod(name, SMALL))
        assert post(first.port, "/bind", binding(pod(name, SMALL), "n1"))[1] == {"Error": ""}
    first.close()
    api.put("nodes", _node("n1", 1, 2))
    again = started(api)
    try:
        view = again.extender.view
        wait(lambda: len(view.placed) == 3, "three pods counted")
        api.put("pods", pod("d", SMALL))
        assert post(again.port, "/filter", args(pod("d", SMALL), ["n1"]))[1]["NodeNames"] == []
    finally:
        again.close()
