"""Pods and AdmissionReview bodies as the API server sends them, and a JSON Patch applier."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

from prometheus_client import CollectorRegistry

from arkgpu.k8s.webhook.admitting import Admission
from arkgpu.k8s.webhook.config import AdmissionDefaults
from arkgpu.k8s.webhook.mutating import Mutation
from arkgpu.k8s.webhook.validating import Rules

MODELS = frozenset({"resnet50", "bert", "vgg16"})
"""Known models of the unit tests' rules."""
LARGEST_MIB = 81_920
"""Largest GPU memory of the unit tests' cluster (an 80 GB GPU)."""


def container(name: str = "main", **limits: str) -> dict[str, Any]:
    """A container with ``limits`` (keyword names: gpu, gpumem, gpucores, gpumem_percentage)."""
    names = {
        "gpu": "nvidia.com/gpu",
        "gpumem": "nvidia.com/gpumem",
        "gpucores": "nvidia.com/gpucores",
        "gpumem_percentage": "nvidia.com/gpumem-percentage",
        "cpu": "cpu",
    }
    values = {names[k]: v for k, v in limits.items()}
    resources = {"limits": values, "requests": dict(values)} if values else {}
    return {"name": name, "image": "registry.example/app:1", "resources": resources}


def pod(
    *containers: dict[str, Any],
    annotations: dict[str, str] | None = None,
    init: tuple[dict[str, Any], ...] = (),
    scheduler: str = "default-scheduler",
) -> dict[str, Any]:
    """A Pod as the API server sends it after defaulting (schedulerName filled in)."""
    metadata: dict[str, Any] = {"name": "app", "namespace": "team"}
    if annotations is not None:
        metadata["annotations"] = annotations
    spec: dict[str, Any] = {"containers": list(containers), "schedulerName": scheduler}
    if init:
        spec["initContainers"] = list(init)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def review(
    obj: dict[str, Any] | None,
    operation: str = "CREATE",
    old: dict[str, Any] | None = None,
    uid: str = "705ab4f5-6393-11e8-b7cc-42010a800002",
) -> dict[str, Any]:
    """An AdmissionReview v1 request for a pod."""
    request: dict[str, Any] = {
        "uid": uid,
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
        "requestResource": {"group": "", "version": "v1", "resource": "pods"},
        "name": "app",
        "namespace": "team",
        "operation": operation,
        "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
        "dryRun": False,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
    }
    if obj is not None:
        request["object"] = obj
    if old is not None:
        request["oldObject"] = old
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def admission(
    defaults: AdmissionDefaults | None = None,
    largest: int | None = LARGEST_MIB,
    registry: CollectorRegistry | None = None,
) -> Admission:
    """The handlers with the unit tests' rules."""
    return Admission(
        Mutation(defaults=defaults or AdmissionDefaults()),
        Rules(MODELS, max_gpu_count=8),
        lambda: largest,
        registry or CollectorRegistry(),
    )


def decoded_patch(answer: dict[str, Any]) -> list[dict[str, Any]]:
    """The JSON Patch of a response (empty when it has none)."""
    response = answer["response"]
    if "patch" not in response:
        return []
    assert response["patchType"] == "JSONPatch"
    patch: list[dict[str, Any]] = json.loads(base64.b64decode(response["patch"]))
    return patch


def _unescape(part: str) -> str:
    return part.replace("~1", "/").replace("~0", "~")


def apply_patch(obj: dict[str, Any], patch: list[dict[str, Any]]) -> dict[str, Any]:
    """``obj`` with RFC 6902 ``add`` and ``replace`` operations on object members applied."""
    out = copy.deepcopy(obj)
    for op in patch:
        assert op["op"] in ("add", "replace"), op
        *parents, last = [_unescape(p) for p in op["path"].split("/")[1:]]
        target: Any = out
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        assert isinstance(target, dict), op
        if op["op"] == "replace":
            assert last in target, op
        target[last] = copy.deepcopy(op["value"])
    return out
