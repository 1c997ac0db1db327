"""kube-scheduler's extender v1 JSON (k8s.io/kube-scheduler/extender/v1), read and written.

The Go structs have no JSON tags, so their fields travel under their Go names
(``Pod``, ``Nodes``, ``NodeNames``, ``FailedNodes``, ``Host``, ``Score``...),
while the Kubernetes objects inside (``Pod``: a v1.Pod, ``Nodes``: a
v1.NodeList) carry their usual lower-case JSON names. kube-scheduler sends
``NodeNames`` (and ``Nodes`` null) to an extender configured with
``nodeCacheCapable: true``, the full ``Nodes`` list (and ``NodeNames`` null)
otherwise; both are read here and answered in kind.

Reading is strict: a body that is not an object, a missing or unknown key, a
value of the wrong type or a list over :data:`MAX_NODES` raises
:class:`WireError` (answered 400 with its one-line reason).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from arkgpu.k8s.cluster.objects import PodInfo, read_pod

MAX_EXTENDER_PRIORITY = 10
"""Highest score an extender gives (MaxExtenderPriority); the lowest is 0."""
MAX_NODES = 100_000
"""Most candidate nodes one request may carry."""
MAX_NAME = 253
"""Longest node, pod or namespace name (a DNS subdomain)."""


_STR = frozenset((str,))


class WireError(ValueError):
    """A request body that is not the extender JSON (one line, names the key)."""


@dataclass(frozen=True)
class ExtenderArgs:
    """A filter or prioritize request."""

    pod: PodInfo
    """The pod being scheduled."""
    node_names: tuple[str, ...]
    """Candidate node names, in the order sent."""
    nodes: tuple[Mapping[str, Any], ...] | None
    """The candidate v1.Node objects when sent in full (nodeCacheCapable false); None when
    only ``NodeNames`` came."""


@dataclass(frozen=True)
class BindingArgs:
    """A bind request."""

    pod_name: str
    pod_namespace: str
    pod_uid: str
    node: str


def _object(body: Any, what: str, keys: Sequence[str]) -> Mapping[str, Any]:
    if not isinstance(body, dict):
        raise WireError(f"{what}: expected a JSON object, got {type(body).__name__}")
    unknown = sorted(set(body) - set(keys))
    if unknown:
        raise WireError(f"{what}: unknown key {unknown[0][:60]!r} (expected {', '.join(keys)})")
    return body


def _name(value: Any, what: str) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= MAX_NAME:
        raise WireError(f"{what}: expected a name of 1..{MAX_NAME} characters")
    return value


def _names(names: list[Any]) -> tuple[str, ...]:
    """The node names, checked in bulk (a 1,000-name list is checked in microseconds)."""
    if not _STR.issuperset(map(type, names)):  # exactly str (JSON gives no subclasses)
        raise WireError("ExtenderArgs: NodeNames: expected a list of strings")
    if names and not 0 < min(map(len, names)) <= max(map(len, names)) <= MAX_NAME:
        raise WireError(f"ExtenderArgs: NodeNames[]: expected names of 1..{MAX_NAME} characters")
    return tuple(names)


def read_args(body: Any) -> ExtenderArgs:
    """An ``ExtenderArgs`` body; WireError naming what is wrong."""
    raw = _object(body, "ExtenderArgs", ("Pod", "Nodes", "NodeNames"))
    pod = raw.get("Pod")
    if not isinstance(pod, dict):
        raise WireError("ExtenderArgs: Pod: expected a v1.Pod object")
    try:
        info = read_pod(pod)
    except ValueError as exc:
        raise WireError(f"ExtenderArgs: Pod: {exc}") from None
    names, nodes = raw.get("NodeNames"), raw.get("Nodes")
    if names is not None:
        if not isinstance(names, list) or len(names) > MAX_NODES:
            raise WireError(f"ExtenderArgs: NodeNames: expected a list of at most {MAX_NODES}")
        return ExtenderArgs(info, _names(names), None)
    if nodes is None:
        raise WireError("ExtenderArgs: neither NodeNames nor Nodes given")
    items = _object(nodes, "ExtenderArgs: Nodes", ("kind", "apiVersion", "metadata", "items"))
    listed = items.get("items") or []
    if not isinstance(listed, list) or len(listed) > MAX_NODES:
        raise WireError(f"ExtenderArgs: Nodes: items: expected a list of at most {MAX_NODES}")
    objects = tuple(_node(n) for n in listed)
    return ExtenderArgs(info, tuple(o["metadata"]["name"] for o in objects), objects)


def _node(raw: Any) -> Mapping[str, Any]:
    if not isinstance(raw, dict) or not isinstance(raw.get("metadata"), dict):
        raise WireError("ExtenderArgs: Nodes: items[]: expected a v1.Node with metadata")
    _name(raw["metadata"].get("name"), "ExtenderArgs: Nodes: items[]: metadata.name")
    return raw


def read_binding(body: Any) -> BindingArgs:
    """An ``ExtenderBindingArgs`` body; WireError naming what is wrong."""
    keys = ("PodName", "PodNamespace", "PodUID", "Node")
    raw = _object(body, "ExtenderBindingArgs", keys)
    missing = [k for k in keys if k not in raw]
    if missing:
        raise WireError(f"ExtenderBindingArgs: {missing[0]}: required")
    values = [_name(raw[k], f"ExtenderBindingArgs: {k}") for k in keys]
    return BindingArgs(*values)


PERCENT_SIGN = "\uff05"
"""What a ``%`` in a reason becomes on the wire (FULLWIDTH PERCENT SIGN).

kube-scheduler records a filter's failure as an event through ``Eventf`` with the message
as the format string (``schedule_one.go`` v1.37.2, ``handleSchedulingFailure``), so a
``%`` there turns into ``%!o(MISSING)``; the pod's condition keeps the raw text, so ``%%``
would show doubled there. ArkGPU's own reasons spell "percent"; a ``%`` quoted from a
pod's annotation is shown as this sign in both places."""


def event_safe(text: str) -> str:
    """``text`` with no format verb for kube-scheduler's event recorder."""
    return text.replace("%", PERCENT_SIGN) if "%" in text else text


def _safe(reasons: Mapping[str, str]) -> dict[str, str]:
    return {node: event_safe(reason) for node, reason in reasons.items()}


def filter_result(
    args: ExtenderArgs,
    fits: Sequence[str],
    failed: Mapping[str, str],
    unresolvable: Mapping[str, str],
    error: str = "",
) -> dict[str, Any]:
    """An ``ExtenderFilterResult``: the fitting nodes in kind (names, or the objects sent)."""
    if args.nodes is None:
        nodes, names = None, list(fits)
    else:
        keep = set(fits)
        items = [n for n in args.nodes if n["metadata"]["name"] in keep]
        nodes, names = {"metadata": {}, "items": items}, None
    return {
        "Nodes": nodes,
        "NodeNames": names,
        "FailedNodes": _safe(failed),
        "FailedAndUnresolvableNodes": _safe(unresolvable),
        "Error": event_safe(error),
    }


def priorities(scores: Mapping[str, int]) -> list[dict[str, Any]]:
    """A ``HostPriorityList`` (the scores are Python ints already: no conversion per host)."""
    return [{"Host": host, "Score": score} for host, score in scores.items()]


def binding_result(error: str = "") -> dict[str, str]:
    """An ``ExtenderBindingResult`` ("" : bound)."""
    return {"Error": event_safe(error)}
