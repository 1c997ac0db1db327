"""The validating rules: a pod's GPU resources and ArkGPU annotations, judged before it is stored.

- Resources (:mod:`arkgpu.k8s.webhook.resources`), on CREATE, for every container
  that names an ArkGPU-managed resource.
- ArkGPU annotations of a pod that uses GPU resources: ``arkgpu.io/qos`` is ``lc``
  or ``be``; ``latency-target-ms`` and ``peak-rps`` are positive numbers;
  ``max-batch`` a positive integer; a latency target comes with ``arkgpu.io/model``;
  the model is one the predictor knows. On CREATE, and on UPDATE only when one of
  them changed (an old pod is not held to a rule that changed since).
- GPU containers, on CREATE (docs/k8s/DEVICE-PLUGIN.md, "Init containers and several
  GPU containers"): at most one app container asks for ``nvidia.com/gpu`` (the
  assignment names one container), and an init container asking for it needs an app
  container asking for at least as many (the kubelet hands the init container's devices
  to the app container; the pod's assignment is sized by the app container).
- HAMi's fields that the compatibility contract refuses or warns about
  (:mod:`arkgpu.k8s.webhook.hami`), on CREATE.
- ``arkgpu.io/assignment`` and ``arkgpu.io/allocated`` on CREATE, on any pod: only
  the extender and the device plugin write them, on pods that exist (UPDATE), so a
  new pod carrying them is refused: a forged assignment would make the extender count
  GPU shares the pod never got. UPDATEs are not checked for them (the extender's
  bind patches the assignment; the device plugin no longer writes ``allocated``,
  which stays reserved).

Every problem is reported, one per clause, so one round trip shows them all.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

from arkgpu.k8s import contract, gpu_requests
from arkgpu.k8s.webhook.hami import hami_problems, hami_warnings
from arkgpu.k8s.webhook.pods import ContainerView, PodView, gpu_containers
from arkgpu.k8s.webhook.resources import Problem, container_problems, uses_gpu_resources
from arkgpu.k8s.webhook.reviews import Verdict

WORKLOAD_ANNOTATIONS = (
    contract.ANNOTATION_QOS,
    contract.ANNOTATION_LATENCY_TARGET_MS,
    contract.ANNOTATION_MODEL,
    contract.ANNOTATION_MAX_BATCH,
    contract.ANNOTATION_PEAK_RPS,
)
"""Annotations a pod's owner writes to describe its workload."""
RESERVED_ANNOTATIONS = (contract.ANNOTATION_ASSIGNMENT, contract.ANNOTATION_ALLOCATED)
"""Annotations only ArkGPU's components write."""
MODELS_LISTED = 20
"""Most known model names an unknown-model message lists."""


@dataclass(frozen=True)
class Rules:
    """What the validating webhook checks against."""

    known_models: frozenset[str]
    """Models the predictor can predict (``arkgpu.io/model`` must be one of them)."""
    max_gpu_count: int = 16
    """Largest ``nvidia.com/gpu`` of one container."""


def validate(
    pod: PodView, old: PodView | None, operation: str, rules: Rules, largest_mib: int | None
) -> Verdict:
    """The verdict on ``pod`` (``old``: the stored pod on UPDATE); ``largest_mib``: the largest
    GPU memory in the cluster, None when unknown (the memory bound is then not checked)."""
    gpu = any(uses_gpu_resources(c) for c in pod.containers)
    problems: list[Problem] = []
    warnings: tuple[str, ...] = ()
    if operation == "CREATE":
        problems += _reserved(pod)
        problems += gpu_container_problems(pod)
        problems += hami_problems(pod)
        warnings = hami_warnings(pod)
        for container in pod.containers:
            if uses_gpu_resources(container):
                problems += container_problems(container, rules.max_gpu_count, largest_mib)
    if gpu and (operation == "CREATE" or _workload_changed(pod, old)):
        problems += annotation_problems(pod, rules.known_models)
    if problems:
        return Verdict(False, "; ".join(p.message for p in problems), problems[0].reason)
    warnings += () if gpu else _idle_annotations(pod)
    return Verdict(True, "accepted", "ok" if gpu else "no_gpu", warnings=warnings)


def gpu_container_problems(pod: PodView) -> list[Problem]:
    """Several app containers asking for ``nvidia.com/gpu``, or a GPU init container without an
    app container asking for at least as many (see the module's text)."""
    asking = [c for c in gpu_containers(pod) if _count(c) is not None]
    apps = [c for c in asking if c.field == "containers"]
    problems = []
    if len(apps) > 1:
        names = ", ".join(repr(c.name) for c in apps)
        problems.append(
            Problem(
                "gpu_containers",
                f"containers {names} ask for {contract.RESOURCE_GPU}: ArkGPU gives GPUs to one "
                "container per pod (put the others in their own pods)",
            )
        )
    most = max((_count(c) or 0 for c in apps), default=0)
    for init in (c for c in asking if c.field != "containers"):
        if (_count(init) or 0) > most:
            problems.append(
                Problem(
                    "gpu_init_container",
                    f"{init.label} asks for {_count(init)} {contract.RESOURCE_GPU} but the pod's "
                    f"GPU container asks for {most}: the kubelet gives an init container's "
                    "devices to the app container after it, so that container must ask for at "
                    "least as many",
                )
            )
    return problems


def _count(container: ContainerView) -> int | None:
    try:
        return gpu_requests.whole_count(
            container.limits[contract.RESOURCE_GPU], contract.RESOURCE_GPU
        )
    except (KeyError, contract.ContractError):
        return None  # malformed: container_problems names it


def _workload_changed(pod: PodView, old: PodView | None) -> bool:
    if old is None:
        return True
    return any(pod.annotation(k) != old.annotation(k) for k in WORKLOAD_ANNOTATIONS)


def _reserved(pod: PodView) -> list[Problem]:
    return [
        Problem(
            "reserved_annotation",
            f"annotation {key} is written by ArkGPU (the scheduler extender and the device "
            "plugin) once a pod is placed; a new pod may not set it",
        )
        for key in RESERVED_ANNOTATIONS
        if pod.annotation(key) is not None
    ]


def _idle_annotations(pod: PodView) -> tuple[str, ...]:
    named = [k for k in WORKLOAD_ANNOTATIONS if pod.annotation(k) is not None]
    if not named:
        return ()
    return (f"{', '.join(named)}: no effect on a pod that asks for no {contract.RESOURCE_GPU}",)


def annotation_problems(pod: PodView, known_models: frozenset[str]) -> list[Problem]:
    """What is wrong with the pod's ArkGPU workload annotations."""
    return list(_annotation_problems(pod, known_models))


def _annotation_problems(pod: PodView, known_models: frozenset[str]) -> Iterator[Problem]:
    qos = pod.annotation(contract.ANNOTATION_QOS)
    if qos is not None and qos not in contract.QOS_CLASSES:
        yield Problem(
            "qos",
            f"annotation {contract.ANNOTATION_QOS}: unknown QoS class {qos!r}: use "
            f"{contract.QOS_LC} (latency-critical) or {contract.QOS_BE} (best effort)",
        )
    for key, integral, unit in (
        (contract.ANNOTATION_LATENCY_TARGET_MS, False, "milliseconds"),
        (contract.ANNOTATION_MAX_BATCH, True, "requests per batch"),
        (contract.ANNOTATION_PEAK_RPS, False, "requests per second"),
    ):
        value = pod.annotation(key)
        if value is not None and not _positive(value, integral):
            kind = "a whole number" if integral else "a number"
            yield Problem(
                "annotation",
                f"annotation {key}: expected {kind} above 0 ({unit}), got {value[:60]!r}",
            )
    yield from _model_problems(pod, known_models)


def _model_problems(pod: PodView, known_models: frozenset[str]) -> Iterator[Problem]:
    model = pod.annotation(contract.ANNOTATION_MODEL)
    if model is None:
        if pod.annotation(contract.ANNOTATION_LATENCY_TARGET_MS) is not None:
            yield Problem(
                "latency_without_model",
                f"annotation {contract.ANNOTATION_LATENCY_TARGET_MS} needs "
                f"{contract.ANNOTATION_MODEL}: the predictor sizes the GPU share for a "
                "latency target from the model's profile",
            )
        return
    if model not in known_models:
        names = sorted(known_models)
        listed = ", ".join(names[:MODELS_LISTED]) + (", ..." if len(names) > MODELS_LISTED else "")
        yield Problem(
            "unknown_model",
            f"annotation {contract.ANNOTATION_MODEL}: the predictor knows no model "
            f"{model[:60]!r} (known: {listed or 'none'})",
        )


def _positive(text: str, integral: bool) -> bool:
    value = text.strip()
    if integral:
        return value.isascii() and value.isdigit() and len(value) <= 9 and int(value) > 0
    try:
        number = float(value)
    except ValueError:
        return False
    return math.isfinite(number) and number > 0
