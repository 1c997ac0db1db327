"""The two admission endpoints: AdmissionReview in, AdmissionReview out, each verdict counted.

``POST /mutate`` applies :func:`arkgpu.k8s.webhook.mutating.mutate` to pods being
created; ``POST /validate`` applies :func:`arkgpu.k8s.webhook.validating.validate`
to pods being created or updated. Anything else a webhook configuration might send
(another kind, a subresource such as ``pods/binding``, DELETE, CONNECT) is allowed
unchanged: the webhook has no opinion on it. A body that is not an AdmissionReview
v1 is refused with a 400 (:mod:`arkgpu.k8s.webhook.reviews`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

from prometheus_client import CollectorRegistry, Counter

from arkgpu.k8s.jsonhttp import Handler, RequestError
from arkgpu.k8s.webhook.mutating import Mutation, mutate
from arkgpu.k8s.webhook.pods import PodView, pod_view
from arkgpu.k8s.webhook.reviews import AdmissionRequest, Verdict, parse_review, review_response
from arkgpu.k8s.webhook.validating import Rules, validate

LOG = logging.getLogger(__name__)

MUTATE_PATH = "/mutate"
VALIDATE_PATH = "/validate"


class Admission:
    """The handlers of ``/mutate`` and ``/validate`` and their verdict counter."""

    def __init__(
        self,
        mutation: Mutation,
        rules: Rules,
        largest_mib: Callable[[], int | None],
        registry: CollectorRegistry,
    ) -> None:
        self.mutation, self.rules, self.largest_mib = mutation, rules, largest_mib
        self._verdicts = Counter(
            "arkgpu_webhook_admissions",
            "Admission verdicts, by webhook (mutate, validate), verdict (allowed, denied) "
            "and reason (patched, no_gpu, gpucores, unknown_model...).",
            ["webhook", "verdict", "reason"],
            registry=registry,
        )

    def routes(self) -> dict[str, Handler]:
        """The POST routes for :class:`arkgpu.k8s.jsonhttp.JsonServer`."""
        return {MUTATE_PATH: self.mutate, VALIDATE_PATH: self.validate}

    def mutate(self, body: Any) -> dict[str, Any]:
        """Answer one AdmissionReview of the mutating webhook."""
        request = parse_review(body)
        verdict = _other(request, ("CREATE",))
        if verdict is None:
            verdict = mutate(_pod(request), self.mutation)
        return self._answer("mutate", request, verdict)

    def validate(self, body: Any) -> dict[str, Any]:
        """Answer one AdmissionReview of the validating webhook."""
        request = parse_review(body)
        verdict = _other(request, ("CREATE", "UPDATE"))
        if verdict is None:
            old = None
            if request.operation == "UPDATE" and request.old_obj is not None:
                old = pod_view(request.old_obj, "request.oldObject")
            verdict = validate(
                _pod(request), old, request.operation, self.rules, self.largest_mib()
            )
        return self._answer("validate", request, verdict)

    def _answer(self, webhook: str, request: AdmissionRequest, verdict: Verdict) -> dict[str, Any]:
        label = "allowed" if verdict.allowed else "denied"
        self._verdicts.labels(webhook, label, verdict.reason).inc()
        if not verdict.allowed or verdict.patch:
            pod = f"{request.namespace}/{request.name or '(generated name)'}"
            LOG.info("%s %s %s: %s", webhook, label, pod, verdict.message)
        return review_response(request.uid, verdict)


def _other(request: AdmissionRequest, operations: tuple[str, ...]) -> Verdict | None:
    """The verdict on a request the rules do not judge; None for one they do."""
    if not request.is_pod:
        what = "/".join(p for p in (request.kind, request.sub_resource) if p)
        return Verdict(True, f"{what or 'object'}: not judged (pods only)", "not_pod")
    if request.operation not in operations:
        return Verdict(True, f"{request.operation}: not judged", "operation")
    return None


def _pod(request: AdmissionRequest) -> PodView:
    if request.obj is None:
        raise RequestError(HTTPStatus.BAD_REQUEST, f"request.object: missing ({request.operation})")
    return pod_view(request.obj)
