"""HAMi's fields the validating webhook refuses or warns about, from the compatibility contract.

:mod:`arkgpu.k8s.hami_compat` says, for every resource, annotation and environment
variable HAMi documents, what ArkGPU does with it; this module applies its ``refused``
rows (a :class:`~arkgpu.k8s.webhook.resources.Problem` carrying the row's sentence) and
its ``warned`` rows (an AdmissionReview warning) to a pod being created. The mutating
webhook's side of the contract (``nvidia.com/priority: 1`` removed) is
:func:`priority_ops`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from arkgpu.k8s import hami_compat as hc
from arkgpu.k8s.webhook.pods import ContainerView, PodView
from arkgpu.k8s.webhook.resources import Problem

LOW_PRIORITY = "1"
"""HAMi's default (low) ``nvidia.com/priority``, mapped onto ArkGPU's best effort."""


def hami_problems(pod: PodView) -> list[Problem]:
    """The refused rows the pod hits, one problem each."""
    return [*_annotation_problems(pod), *_container_problems(pod)]


def hami_warnings(pod: PodView) -> tuple[str, ...]:
    """The warned rows the pod hits (AdmissionReview ``warnings``)."""
    notes = pod.annotations or {}
    out = [hc.row(key).arkgpu for key in (hc.ANNOTATION_NODE_POLICY, hc.ANNOTATION_GPU_POLICY)]
    out = [text for key, text in zip(_POLICIES, out, strict=True) if key in notes]
    others = sorted(k for k in notes if k.startswith(hc.HAMI_PREFIX) and k not in _POLICIES)
    if others:
        out.append(f"{', '.join(others)}: {hc.row(f'{hc.HAMI_PREFIX}* (others)').arkgpu}")
    for c in pod.containers:
        named = [k for k in c.env if k.startswith(hc.ENV_HAMI_CORE_LIMITS)]
        if named:
            text = hc.row(", ".join(hc.ENV_HAMI_CORE_LIMITS)).arkgpu
            out.append(f"{c.label}: environment {', '.join(sorted(named))}: {text}")
    return tuple(out)


_POLICIES = (hc.ANNOTATION_NODE_POLICY, hc.ANNOTATION_GPU_POLICY)


def _annotation_problems(pod: PodView) -> Iterator[Problem]:
    mode = pod.annotation(hc.ANNOTATION_VGPU_MODE)
    if mode is not None and mode.strip() != "hami-core":
        if mode.strip() == "mig":
            yield Problem("hami_mig", hc.row(hc.ANNOTATION_VGPU_MODE, "mig").arkgpu)
        else:
            yield Problem(
                "hami_vgpu_mode",
                f"annotation {hc.ANNOTATION_VGPU_MODE}: expected hami-core, got {mode[:40]!r}",
            )
    numa = pod.annotation(hc.ANNOTATION_NUMA_BIND)
    if numa is not None and numa.strip().lower() == "true":
        yield Problem("hami_numa", hc.row(hc.ANNOTATION_NUMA_BIND, "true").arkgpu)


def _container_problems(pod: PodView) -> Iterator[Problem]:
    for c in pod.containers:
        where = c.label
        names = set(c.limits) | set(c.requests or {})
        for name in sorted(n for n in names if n.startswith(hc.RESOURCE_MIG_PREFIX)):
            text = hc.row(f"{hc.RESOURCE_MIG_PREFIX}*").arkgpu
            yield Problem("hami_mig", f"{where}: {name}: {text}")
        if hc.RESOURCE_PRIORITY in names:
            yield _priority(c)
        yield from _env_problems(c)


def _priority(c: ContainerView) -> Problem:
    value = c.limits.get(hc.RESOURCE_PRIORITY) or (c.requests or {}).get(hc.RESOURCE_PRIORITY)
    value = (value or "").strip()
    name = hc.RESOURCE_PRIORITY
    if value == "0":
        return Problem("hami_priority", f"{c.label}: {hc.row(name, '0').arkgpu}")
    if value == LOW_PRIORITY:
        return Problem(
            "hami_priority",
            f"{c.label}: {name} 1 (low) is ArkGPU's default class: remove it (the mutating "
            "webhook removes it when it runs)",
        )
    return Problem(
        "hami_priority", f"{c.label}: {name}: expected 0 or 1 as in HAMi, got {value[:40]!r}"
    )


def _env_problems(c: ContainerView) -> Iterator[Problem]:
    policy = c.env.get(hc.ENV_CORE_POLICY)
    if policy is not None and policy.strip().lower() == "disable":
        yield Problem("hami_env", f"{c.label}: {hc.row(hc.ENV_CORE_POLICY, 'disable').arkgpu}")
    control = c.env.get(hc.ENV_DISABLE_CONTROL)
    if control is not None and control.strip().lower() == "true":
        yield Problem("hami_env", f"{c.label}: {hc.row(hc.ENV_DISABLE_CONTROL, 'true').arkgpu}")


def priority_ops(
    pod: PodView, pointer: Callable[..., str]
) -> tuple[list[Mapping[str, Any]], list[str]]:
    """JSON Patch operations removing ``nvidia.com/priority: 1`` from every container (limits
    and requests), and what they did; ``pointer`` builds the paths."""
    ops: list[Mapping[str, Any]] = []
    done: list[str] = []
    for c in pod.containers:
        for where, values in (("limits", c.limits), ("requests", c.requests or {})):
            if (values.get(hc.RESOURCE_PRIORITY) or "").strip() == LOW_PRIORITY:
                path = pointer("spec", c.field, c.index, "resources", where, hc.RESOURCE_PRIORITY)
                ops.append({"op": "remove", "path": path})
                done.append(f"{c.label} {where} {hc.RESOURCE_PRIORITY} 1 removed (best effort)")
    return ops, done
