"""AdmissionReview v1 on the wire: golden bodies, a 400 naming the field for bad ones, fuzzed."""

from __future__ import annotations

import copy
import json
from http import HTTPStatus
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from arkgpu.k8s.jsonhttp import RequestError
from arkgpu.k8s.webhook.admitting import Admission

from .builders import admission, container, pod, review

GOLDEN = Path(__file__).parent / "golden"
CASES = sorted(p.name.removesuffix(".request.json") for p in GOLDEN.glob("*.request.json"))


def _handler(handlers: Admission, name: str) -> Any:
    return handlers.mutate if name.startswith("mutate") else handlers.validate


@pytest.mark.parametrize("name", CASES)
def test_golden_response(name: str) -> None:
    """Each golden request (a review as kube-apiserver 1.37 sends it) gets exactly the golden
    response: apiVersion/kind, uid echoed, allowed, status, patchType and base64 patch."""
    assert len(CASES) >= 4
    request = json.loads((GOLDEN / f"{name}.request.json").read_text())
    expected = json.loads((GOLDEN / f"{name}.response.json").read_text())
    assert _handler(admission(), name)(request) == expected


def _without(body: dict[str, Any], *path: str) -> dict[str, Any]:
    out = copy.deepcopy(body)
    target = out
    for key in path[:-1]:
        target = target[key]
    del target[path[-1]]
    return out


def _with(body: dict[str, Any], value: Any, *path: str | int) -> dict[str, Any]:
    out = copy.deepcopy(body)
    target: Any = out
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return out


GOOD = review(pod(container(gpu="1")))
BAD_BODIES = [
    ([1, 2], "body: expected an AdmissionReview object"),
    (
        _with(GOOD, "admission.k8s.io/v1beta1", "apiVersion"),
        "expected admission.k8s.io/v1 AdmissionReview",
    ),
    (_with(GOOD, "Pod", "kind"), "apiVersion/kind"),
    (_without(GOOD, "request"), "AdmissionReview.request: missing"),
    (_with(GOOD, "x", "request"), "AdmissionReview.request: expected an object"),
    (_without(GOOD, "request", "uid"), "request.uid: expected a string"),
    (_with(GOOD, "", "request", "uid"), "request.uid: expected 1..253 characters"),
    (_with(GOOD, "PATCH", "request", "operation"), "request.operation: expected one of CREATE"),
    (_without(GOOD, "request", "kind"), "request.kind: missing"),
    (_with(GOOD, 7, "request", "kind", "kind"), "request.kind.kind: expected a string"),
    (_without(GOOD, "request", "object"), "request.object: missing (CREATE)"),
    (_with(GOOD, [], "request", "object"), "request.object: expected an object"),
    (
        _with(GOOD, "x", "request", "object", "spec", "containers"),
        "request.object.spec.containers: expected a list",
    ),
    (
        _with(
            GOOD,
            {"nvidia.com/gpu": 1},
            "request",
            "object",
            "spec",
            "containers",
            0,
            "resources",
            "limits",
        ),
        "request.object.spec.containers[0].resources.limits: expected a map of strings",
    ),
    (
        _with(GOOD, {"a": None}, "request", "object", "metadata", "annotations"),
        "request.object.metadata.annotations: expected a map of strings",
    ),
    (
        _with(GOOD, 3, "request", "object", "spec", "schedulerName"),
        "request.object.spec.schedulerName: expected a string",
    ),
]


@pytest.mark.parametrize(("body", "reason"), BAD_BODIES, ids=[r for _, r in BAD_BODIES])
def test_malformed_review_is_a_400_naming_the_field(body: Any, reason: str) -> None:
    """Both endpoints refuse it with 400 and a one-line reason that names the field."""
    handlers = admission()
    for handle in (handlers.mutate, handlers.validate):
        with pytest.raises(RequestError) as caught:
            handle(body)
        assert caught.value.status == HTTPStatus.BAD_REQUEST
        assert reason in str(caught.value)
        assert "\n" not in str(caught.value)


def _check_answer(answer: Any, uid: Any) -> None:
    assert answer["apiVersion"] == "admission.k8s.io/v1"
    assert answer["kind"] == "AdmissionReview"
    response = answer["response"]
    assert response["uid"] == uid
    assert isinstance(response["allowed"], bool)
    assert isinstance(response["status"]["message"], str)
    assert response["status"]["message"]
    json.dumps(answer)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
PATHS = [
    ("request",),
    ("request", "uid"),
    ("request", "operation"),
    ("request", "kind"),
    ("request", "kind", "group"),
    ("request", "subResource"),
    ("request", "object"),
    ("request", "oldObject"),
    ("request", "object", "metadata"),
    ("request", "object", "metadata", "annotations"),
    ("request", "object", "spec"),
    ("request", "object", "spec", "containers"),
    ("request", "object", "spec", "initContainers"),
    ("request", "object", "spec", "containers", 0),
    ("request", "object", "spec", "containers", 0, "name"),
    ("request", "object", "spec", "containers", 0, "resources"),
    ("request", "object", "spec", "containers", 0, "resources", "limits"),
    ("request", "object", "spec", "containers", 0, "resources", "limits", "nvidia.com/gpucores"),
    ("request", "object", "spec", "containers", 0, "resources", "requests"),
]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(PATHS), JSON, st.sampled_from(["CREATE", "UPDATE"]), st.booleans())
def test_fuzzed_review_is_answered_or_refused_with_4xx(
    path: tuple[Any, ...], junk: Any, operation: str, mutate: bool
) -> None:
    """A valid review with any one field replaced by any JSON value: a well-formed answer
    echoing the uid, or a RequestError 4xx; never another exception."""
    body = review(
        pod(container(gpu="1", gpucores="50"), annotations={"arkgpu.io/qos": "lc"}), operation
    )
    body["request"]["oldObject"] = copy.deepcopy(body["request"]["object"])
    target: Any = body
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = junk
    handlers = admission()
    refused: RequestError | None
    try:
        answer = (handlers.mutate if mutate else handlers.validate)(body)
    except RequestError as exc:
        refused = exc
    else:
        refused = None
    if refused is not None:
        assert 400 <= refused.status < 500
        assert str(refused)
        return
    _check_answer(answer, body["request"]["uid"] if isinstance(body["request"], dict) else None)


@settings(max_examples=200, deadline=None)
@given(JSON)
def test_any_json_body_is_refused_cleanly(body: Any) -> None:
    """Arbitrary JSON is never an AdmissionReview v1: a 400 every time."""
    with pytest.raises(RequestError) as caught:
        admission().validate(body)
    assert caught.value.status == HTTPStatus.BAD_REQUEST


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(st.text(max_size=30), st.text(max_size=12), max_size=5),
    st.dictionaries(
        st.sampled_from(
            [
                "arkgpu.io/qos",
                "arkgpu.io/model",
                "arkgpu.io/latency-target-ms",
                "arkgpu.io/max-batch",
                "arkgpu.io/peak-rps",
                "arkgpu.io/assignment",
                "nvidia.com/vgpu-mode",
                "nvidia.com/numa-bind",
                "nvidia.com/use-gpuuuid",
                "hami.io/gpu-scheduler-policy",
            ]
        ),
        st.text(max_size=12),
        max_size=4,
    ),
)
@example({}, {"arkgpu.io/max-batch": "\u00b2"})  # superscript two: isdigit but not int()
@example({"nvidia.com/priority": "\u00b2", "nvidia.com/mig-1g.5gb": "1"}, {})
@example({"nvidia.com/gpu": "\u0663"}, {"arkgpu.io/peak-rps": "\u0661\u0662"})
def test_fuzzed_pod_gets_a_verdict(limits: dict[str, str], notes: dict[str, str]) -> None:
    """Any limits and annotations of string values: both webhooks answer (no 4xx, no crash);
    a refusal's message is one line."""
    obj = pod(container(gpu="1"), annotations=notes)
    obj["spec"]["containers"][0]["resources"]["limits"].update(limits)
    handlers = admission()
    for handle in (handlers.mutate, handlers.validate):
        answer = handle(review(obj))
        _check_answer(answer, GOOD["request"]["uid"])
        assert "\n" not in answer["response"]["status"]["message"]
