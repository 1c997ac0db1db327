"""HAMi's selection by GPU UUID, several GPUs with a part of each, reasons fit for events."""

from __future__ import annotations

import json
from typing import Any

from arkgpu.k8s.cluster.memory import MemoryApi
from arkgpu.k8s.contract import ANNOTATION_ASSIGNMENT
from arkgpu.k8s.extender import wire

from .helpers import args, binding, node, pod, post, started

PART = {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "10", "nvidia.com/gpumem": "1024"}


def _placed(api: MemoryApi, name: str) -> list[tuple[str, int, int]]:
    notes = api.get_pod("team-a", name)["metadata"]["annotations"]
    gpus = json.loads(notes[ANNOTATION_ASSIGNMENT])["gpus"]
    return [(g["uuid"], g["share_bp"], g["memory_mib"]) for g in gpus]


def _bind(port: int, api: MemoryApi, p: dict[str, Any], names: list[str]) -> dict[str, Any]:
    api.put("pods", p)
    _status, answer = post(port, "/filter", args(p, names))
    if answer["NodeNames"]:
        assert post(port, "/bind", binding(p, answer["NodeNames"][0]))[1] == {"Error": ""}
    result: dict[str, Any] = answer
    return result


def test_use_and_nouse_gpuuuid_choose_the_gpu_and_say_why_a_node_fails() -> None:
    """A pod naming GPU n2-1 lands on it (n1 fails with a reason naming the annotation); a pod
    excluding every GPU of n1 but one lands on that one; a binding straight to a node whose
    GPUs the pod excludes is refused."""
    api = MemoryApi()
    api.put("nodes", node("n1", gpus=4))
    api.put("nodes", node("n2", gpus=4))
    running = started(api)
    try:
        use = pod("use", PART, {"nvidia.com/use-gpuuuid": "GPU-n2-1"})
        api.put("pods", use)
        # Where a node fits, filter answers the chosen node alone: n1's reason shows when
        # n1 is the only candidate, as kube-scheduler reads it when the pod fits nowhere.
        _status, answer = post(running.port, "/filter", args(use, ["n1"]))
        assert answer["NodeNames"] == []
        assert answer["FailedNodes"] == {
            "n1": "node n1 has 0 GPUs the pod's selection admits, it asks for 1 "
            "(nvidia.com/use-gpuuuid is 'GPU-n2-1'): name GPUs of this node in "
            "nvidia.com/use-gpuuuid or remove the annotation"
        }
        assert _bind(running.port, api, use, ["n1", "n2"])["NodeNames"] == ["n2"]
        assert _placed(api, "use") == [("GPU-n2-1", 1000, 1024)]
        nouse = pod("nouse", PART, {"nvidia.com/nouse-gpuuuid": "GPU-n1-0,GPU-n1-1,GPU-n1-3"})
        _bind(running.port, api, nouse, ["n1"])
        assert _placed(api, "nouse") == [("GPU-n1-2", 1000, 1024)]
        lost = pod("lost", PART, {"nvidia.com/use-gpuuuid": "GPU-n2-3"})
        api.put("pods", lost)
        error = post(running.port, "/bind", binding(lost, "n1"))[1]["Error"]
        assert "node n1 has 0 GPUs the pod's selection admits" in error
    finally:
        running.close()


def test_several_gpus_with_a_part_of_each_are_placed_as_hami_does() -> None:
    """gpu 2 with 30 percent and 1000 MiB of each: two distinct GPUs, each with that share."""
    api = MemoryApi()
    api.put("nodes", node("n1", gpus=4))
    running = started(api)
    try:
        limits = {"nvidia.com/gpu": "2", "nvidia.com/gpucores": "30", "nvidia.com/gpumem": "1000"}
        for name in ("a", "b", "c"):
            assert _bind(running.port, api, pod(name, limits), ["n1"])["NodeNames"] == ["n1"]
        placed = [_placed(api, n) for n in ("a", "b", "c")]
        for gpus in placed:
            assert len({u for u, _, _ in gpus}) == 2
            assert [(s, m) for _, s, m in gpus] == [(3000, 1000), (3000, 1000)]
        per_gpu: dict[str, int] = {}
        for gpus in placed:
            for uuid, share, _ in gpus:
                per_gpu[uuid] = per_gpu.get(uuid, 0) + share
        assert max(per_gpu.values()) <= 10_000
    finally:
        running.close()


def test_a_percent_sign_in_a_reason_never_reaches_the_event_as_a_format_verb() -> None:
    """A pod's annotation quoted in a reason keeps its sign as U+FF05 on the wire; none of
    the extender's own reasons has a percent sign."""
    api = MemoryApi()
    api.put("nodes", node("n1", gpus=1))
    running = started(api)
    try:
        odd = pod("odd", PART, {"nvidia.com/use-gpuuuid": "GPU-%d"})
        answer = _bind(running.port, api, odd, ["n1"])
        reason = answer["FailedNodes"]["n1"]
        assert "%" not in reason
        assert "'GPU-\uff05d'" in reason
        full = pod("full", {"nvidia.com/gpu": "2", "nvidia.com/gpucores": "30"})
        reason = _bind(running.port, api, full, ["n1"])["FailedNodes"]["n1"]
        assert "%" not in reason
    finally:
        running.close()
    assert wire.event_safe("30% each") == "30\uff05 each"
