"""AdmissionReview ``admission.k8s.io/v1`` on the wire: the request read strictly, the answer.

The field names are those of ``k8s.io/api/admission/v1/types.go`` (v0.37.2):
``AdmissionReview{apiVersion, kind, request, response}``,
``AdmissionRequest{uid, kind{group,version,kind}, resource, subResource, name,
namespace, operation, userInfo, object, oldObject, dryRun, options}`` and
``AdmissionResponse{uid, allowed, status (a metav1.Status), patch (base64),
patchType ("JSONPatch"), auditAnnotations, warnings}``.

Only v1 is served (the webhook configurations say ``admissionReviewVersions:
[v1]``). A body that is not a v1 AdmissionReview with a request, or whose
request lacks a field the API server always sends, is refused with a 400 and
one line naming the field: the API server then applies the webhook's failure
policy, and a hand-made request learns what was wrong.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from arkgpu.k8s.jsonhttp import RequestError

API_VERSION = "admission.k8s.io/v1"
"""The only AdmissionReview version served."""
KIND = "AdmissionReview"
OPERATIONS = ("CREATE", "UPDATE", "DELETE", "CONNECT")
"""``AdmissionRequest.operation`` values of v1."""
PATCH_TYPE = "JSONPatch"
"""The only ``patchType`` v1 defines (RFC 6902)."""
MAX_UID = 253
"""Longest ``uid`` accepted, characters (the API server's are 36-character UUIDs)."""


@dataclass(frozen=True)
class AdmissionRequest:
    """The parts of an ``AdmissionRequest`` the webhook reads."""

    uid: str
    """Echoed in the response (the API server checks it)."""
    operation: str
    """CREATE, UPDATE, DELETE or CONNECT."""
    group: str
    """``kind.group`` of the object ("" for the core group of Pod)."""
    version: str
    """``kind.version`` ("v1")."""
    kind: str
    """``kind.kind`` ("Pod")."""
    sub_resource: str = ""
    """``subResource`` ("binding", "status"...; "" for the pod itself)."""
    namespace: str = ""
    name: str = ""
    """Empty on CREATE with ``generateName``."""
    obj: Mapping[str, Any] | None = None
    """``object``: the pod after defaulting (CREATE, UPDATE)."""
    old_obj: Mapping[str, Any] | None = None
    """``oldObject``: the pod before (UPDATE, DELETE)."""

    @property
    def is_pod(self) -> bool:
        """Whether the request is about a Pod itself (core v1, no subresource)."""
        return (self.group, self.version, self.kind, self.sub_resource) == ("", "v1", "Pod", "")


@dataclass(frozen=True)
class Verdict:
    """What the webhook answers for one request."""

    allowed: bool
    message: str
    """``status.message``: for a person (the API server quotes it when it refuses)."""
    reason: str
    """Short label for the metrics (``gpucores``, ``patched``, ``no_gpu``...)."""
    patch: tuple[Mapping[str, Any], ...] = ()
    """JSON Patch operations (mutating webhook only); empty: no ``patch`` field."""
    warnings: tuple[str, ...] = ()
    """``warnings``: shown by kubectl, never blocking."""


def _bad(where: str, what: str) -> RequestError:
    return RequestError(HTTPStatus.BAD_REQUEST, f"{where}: {what}")


def _string(raw: Mapping[str, Any], key: str, where: str, required: bool = False) -> str:
    value = raw.get(key, None if required else "")
    if not isinstance(value, str):
        raise _bad(f"{where}.{key}", f"expected a string, got {_short(value)}")
    return value


def _object(raw: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any] | None:
    value = raw.get(key)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _bad(f"{where}.{key}", f"expected an object, got {_short(value)}")
    return value


def _short(value: object) -> str:
    """``value`` as JSON, cut to 60 characters (an error line stays one short line)."""
    return json.dumps(value)[:60]


def parse_review(body: Any) -> AdmissionRequest:
    """The request of an AdmissionReview v1 body; RequestError 400 naming the bad field."""
    if not isinstance(body, dict):
        raise _bad("body", f"expected an AdmissionReview object, got {_short(body)}")
    version, kind = body.get("apiVersion"), body.get("kind")
    if (version, kind) != (API_VERSION, KIND):
        raise _bad(
            "apiVersion/kind",
            f"expected {API_VERSION} {KIND}, got {_short(version)} {_short(kind)} "
            "(set admissionReviewVersions to [v1])",
        )
    request = _object(body, "request", "AdmissionReview")
    if request is None:
        raise _bad("AdmissionReview.request", "missing")
    return _parse_request(request)


def _parse_request(raw: Mapping[str, Any]) -> AdmissionRequest:
    where = "request"
    uid = _string(raw, "uid", where, required=True)
    if not uid or len(uid) > MAX_UID:
        raise _bad(f"{where}.uid", f"expected 1..{MAX_UID} characters")
    operation = _string(raw, "operation", where, required=True)
    if operation not in OPERATIONS:
        raise _bad(f"{where}.operation", f"expected one of {', '.join(OPERATIONS)}")
    gvk = _object(raw, "kind", where)
    if gvk is None:
        raise _bad(f"{where}.kind", "missing")
    return AdmissionRequest(
        uid=uid,
        operation=operation,
        group=_string(gvk, "group", f"{where}.kind"),
        version=_string(gvk, "version", f"{where}.kind", required=True),
        kind=_string(gvk, "kind", f"{where}.kind", required=True),
        sub_resource=_string(raw, "subResource", where),
        namespace=_string(raw, "namespace", where),
        name=_string(raw, "name", where),
        obj=_object(raw, "object", where),
        old_obj=_object(raw, "oldObject", where),
    )


def review_response(uid: str, verdict: Verdict) -> dict[str, Any]:
    """The AdmissionReview v1 answer for ``uid``."""
    status: dict[str, Any] = (
        {"status": "Success", "code": HTTPStatus.OK.value, "message": verdict.message}
        if verdict.allowed
        else {
            "status": "Failure",
            "code": HTTPStatus.FORBIDDEN.value,
            "reason": "Forbidden",
            "message": verdict.message,
        }
    )
    response: dict[str, Any] = {"uid": uid, "allowed": verdict.allowed, "status": status}
    if verdict.patch:
        patch = json.dumps(list(verdict.patch), separators=(",", ":")).encode()
        response["patchType"] = PATCH_TYPE
        response["patch"] = base64.b64encode(patch).decode("ascii")
    if verdict.warnings:
        response["warnings"] = list(verdict.warnings)
    return {"apiVersion": API_VERSION, "kind": KIND, "response": response}
