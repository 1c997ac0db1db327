"""The extender speaks kube-scheduler's extender v1 JSON: golden bodies, both node modes, 4xx.

The golden requests are what kube-scheduler's Go code marshals (ExtenderArgs
with a v1.Pod and NodeNames; ExtenderBindingArgs); the golden answers are
what it decodes. Bodies that are not that JSON get a 400 with a reason, never
a crash or a hang (hypothesis feeds arbitrary JSON).
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arkgpu.k8s.cluster.memory import MemoryApi
from arkgpu.k8s.extender import wire
from arkgpu.k8s.extender.running import Running

from .helpers import GOLDEN, node, post, started


def _golden(name: str) -> Any:
    return json.loads((GOLDEN / name).read_text())


@pytest.fixture
def served() -> Iterator[tuple[Running, MemoryApi]]:
    api = MemoryApi()
    for n in (node("gpu-a"), node("gpu-b"), node("cpu-only", gpus=None)):
        api.put("nodes", n)
    request = _golden("filter_names.request.json")
    api.put("pods", request["Pod"])
    running = started(api, filter_chosen_only=False)  # every fitting node: the full answer
    yield running, api
    running.close()


def test_filter_keeps_only_the_chosen_node_by_default() -> None:
    """The default answer: the node prioritize would score 10, alone (kube-scheduler then
    skips prioritize); with no node fitting, every node with its reason."""
    api = MemoryApi()
    for n in (node("gpu-a"), node("gpu-b"), node("cpu-only", gpus=None)):
        api.put("nodes", n)
    request = _golden("filter_names.request.json")
    api.put("pods", request["Pod"])
    running = started(api)
    try:
        scores = post(running.port, "/prioritize", request)[1]
        best = next(s["Host"] for s in scores if s["Score"] == 10)
        assert post(running.port, "/filter", request) == (
            200,
            {
                "Nodes": None,
                "NodeNames": [best],
                "FailedNodes": {},
                "FailedAndUnresolvableNodes": {},
                "Error": "",
            },
        )
        none_fit = {**request, "NodeNames": ["cpu-only"]}
        answer = post(running.port, "/filter", none_fit)[1]
        assert answer["NodeNames"] == []
        assert "no ArkGPU GPU inventory" in answer["FailedAndUnresolvableNodes"]["cpu-only"]
    finally:
        running.close()


def test_golden_filter_prioritize_bind(served: tuple[Running, MemoryApi]) -> None:
    """NodeNames in, NodeNames out; cpu-only refused as unresolvable with its reason; the
    policy's node scores 10; the bind answers an empty Error and the pod is bound."""
    running, api = served
    request = _golden("filter_names.request.json")
    assert post(running.port, "/filter", request) == (200, _golden("filter_names.response.json"))
    ranked = {**request, "NodeNames": ["gpu-a", "gpu-b"]}
    assert post(running.port, "/prioritize", ranked) == (
        200,
        _golden("prioritize_names.response.json"),
    )
    bind = _golden("bind.request.json")
    assert post(running.port, "/bind", bind) == (200, _golden("bind.response.json"))
    stored = api.get_pod("team-a", "infer-0")
    assert stored["spec"]["nodeName"] == "gpu-a"
    note = json.loads(stored["metadata"]["annotations"]["arkgpu.io/assignment"])
    assert note["node"] == "gpu-a"
    assert note["gpus"] == [
        {"index": 0, "uuid": "GPU-gpu-a-0", "memory_mib": 8192, "share_bp": 3000}
    ]


def test_full_node_list_is_answered_with_node_objects(served: tuple[Running, MemoryApi]) -> None:
    """nodeCacheCapable false: the Nodes list in, the fitting v1.Node objects out (as sent)."""
    running, _ = served
    request = _golden("filter_names.request.json")
    items = [node("gpu-a"), node("cpu-only", gpus=None)]
    full = {"Pod": request["Pod"], "Nodes": {"metadata": {}, "items": items}, "NodeNames": None}
    status, answer = post(running.port, "/filter", full)
    assert status == 200
    assert answer["NodeNames"] is None
    assert answer["Nodes"]["items"] == [items[0]]
    assert list(answer["FailedAndUnresolvableNodes"]) == ["cpu-only"]
    status, scores = post(running.port, "/prioritize", full)
    assert scores == [{"Host": "gpu-a", "Score": 10}, {"Host": "cpu-only", "Score": 0}]


BAD_BODIES = [
    ([], "expected a JSON object"),
    ({"Pod": {}, "NodeNames": []}, "metadata.name"),
    ({"Pod": None, "NodeNames": ["a"]}, "Pod: expected"),
    ({"Pod": {"metadata": {"name": "p", "namespace": "n", "uid": "u"}}}, "neither"),
    (
        {"Pod": {"metadata": {"name": "p", "namespace": "n", "uid": "u"}}, "NodeNames": [1]},
        "NodeNames",
    ),
    ({"Pod": {"metadata": {"name": "p", "namespace": "n", "uid": "u"}}, "Extra": 1}, "unknown key"),
    (
        {"Pod": {"metadata": {"name": "p", "namespace": "n", "uid": "u"}}, "Nodes": {"items": [3]}},
        "items",
    ),
]


@pytest.mark.parametrize(("body", "reason"), BAD_BODIES)
def test_malformed_args_get_400_with_reason(
    served: tuple[Running, MemoryApi], body: Any, reason: str
) -> None:
    running, _ = served
    for path in ("/filter", "/prioritize"):
        status, answer = post(running.port, path, body)
        assert status == 400
        assert reason in answer["error"]


def test_malformed_binding_and_oversized_and_unknown_path(
    served: tuple[Running, MemoryApi],
) -> None:
    running, _ = served
    status, answer = post(running.port, "/bind", {"PodName": "p", "PodNamespace": "n", "Node": "x"})
    assert (status, answer["error"]) == (400, "ExtenderBindingArgs: PodUID: required")
    status, answer = post(running.port, "/bind", {}, raw=b"{not json")
    assert status == 400
    assert "not JSON" in answer["error"]
    status, _ = post(running.port, "/preempt", {})
    assert status == 404
    conn = http.client.HTTPConnection("127.0.0.1", running.port, timeout=30)
    conn.putrequest("POST", "/filter")
    conn.putheader("Content-Length", str(17 * 1024 * 1024))  # over the 16 MiB default
    conn.endheaders()
    answer = conn.getresponse()
    assert answer.status == 413
    assert "body over" in json.loads(answer.read())["error"]
    conn.close()


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=20,
)
KEYS = st.sampled_from(["Pod", "Nodes", "NodeNames", "PodName", "PodNamespace", "PodUID", "Node"])
SHAPED = st.dictionaries(KEYS, JSON, max_size=4)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(body=JSON | SHAPED)
def test_fuzzed_bodies_never_crash(served: tuple[Running, MemoryApi], body: Any) -> None:
    """Arbitrary JSON: 200 with a well-formed answer, or a 4xx with a reason; never a 5xx."""
    running, _ = served
    for path in ("/filter", "/prioritize", "/bind"):
        status, answer = post(running.port, path, body)
        assert status in (200, 400), (path, body, answer)
        if status == 400:
            assert answer["error"]


@given(body=JSON | SHAPED)
@settings(max_examples=300, deadline=None)
def test_readers_raise_only_wire_errors(body: Any) -> None:
    for reader in (wire.read_args, wire.read_binding):
        message = ""
        try:
            reader(body)
        except wire.WireError as exc:
            message = str(exc) or "empty reason"
        assert "empty reason" not in message


def test_the_chosen_node_is_the_one_prioritize_scores_10_in_any_order() -> None:
    """Equal empty nodes tie: the filter keeps the earliest in the order asked, the node
    prioritize gives 10; a node not in the snapshot is never chosen."""
    api = MemoryApi()
    for name in ("gpu-a", "gpu-b", "gpu-c"):
        api.put("nodes", node(name))
    request = _golden("filter_names.request.json")
    api.put("pods", request["Pod"])
    running = started(api)
    try:
        for order in (["gpu-a", "gpu-b", "gpu-c"], ["gpu-c", "nowhere", "gpu-a", "gpu-b"]):
            asked = {**request, "NodeNames": order}
            scores = post(running.port, "/prioritize", asked)[1]
            best = next(s["Host"] for s in scores if s["Score"] == 10)
            assert post(running.port, "/filter", asked)[1]["NodeNames"] == [best]
            assert best == order[0]
    finally:
        running.close()
