"""filter, prioritize and bind: kube-scheduler's three calls, answered from the cluster view.

- filter: per candidate node, the policy's verdict (and, for an LC pod, the
  predictor's check); nodes the snapshot has no GPUs for are
  ``FailedAndUnresolvableNodes``, nodes without room ``FailedNodes``, each
  with a reason a person can read. A pod that breaks the contract (a bad
  annotation, two containers asking for GPUs) fails on every node with that
  reason. The verdicts are kept for the prioritize call that follows.
- prioritize: the policy's best node scores 10, the other fitting nodes 0..9
  in the order of the policy's scores, so kube-scheduler's choice among
  equal totals cannot move a pod off the policy's node.
- bind: under the view's lock the pod's GPUs are taken in the state (a
  concurrent bind sees them taken, so no GPU is ever promised twice); then,
  outside the lock, the assignment annotation is written (PATCH, with the
  pod's UID as precondition) and the Binding subresource POSTed. A failure
  undoes the placement (and removes the annotation) and answers the error.
  A pod already annotated for the node asked (a bind cut short by a crash)
  is only bound; annotated for another node, it is placed again.
"""

from __future__ import annotations

import logging
import os
import signal
from collections import OrderedDict
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

from arkgpu.k8s.cluster.api import NOT_FOUND, ApiError, ClusterApi
from arkgpu.k8s.cluster.objects import PodInfo, read_pod
from arkgpu.k8s.contract import ANNOTATION_ASSIGNMENT, ContractError
from arkgpu.k8s.extender import wire
from arkgpu.k8s.extender.metrics import ExtenderMetrics
from arkgpu.k8s.extender.state import ClusterView, Placed
from arkgpu.k8s.extender.verdicts import Verdicts
from arkgpu.k8s.jsonhttp import RequestError
from arkgpu.model.cluster import PlacementError

LOG = logging.getLogger(__name__)

PINNED = "an earlier bind of this pod has no known outcome yet; it stays on node"
"""Why a pod whose last write was cut off is kept on its node."""
NOT_READY = "the ArkGPU extender has not listed the cluster yet; try again"
"""The answer to every call before the snapshot's first lists are in."""
REMEMBERED_PODS = 10_000
"""Pods of recent filter calls kept for their bind (a bind names the pod only)."""


class Extender:
    """The three verbs over one :class:`ClusterView` and one API adapter."""

    def __init__(self, view: ClusterView, api: ClusterApi, metrics: ExtenderMetrics) -> None:
        self.view, self.api, self.metrics = view, api, metrics
        self._asked: OrderedDict[str, PodInfo] = OrderedDict()
        self._cache: dict[str, tuple[int, Verdicts]] = {}
        self.ready: Callable[[], bool] = lambda: True
        """Whether the snapshot's first lists are in: until then every call is refused (a
        half-listed snapshot would show GPUs free that pods hold)."""
        self.kill_at = ""
        """Test hook (environment ``ARKGPU_EXTENDER_KILL_AT``): the process SIGKILLs itself
        right after this step of a bind (``decision``, ``annotation`` or ``binding``)."""

    def routes(self) -> dict[str, Any]:
        """The POST paths kube-scheduler calls (its filterVerb, prioritizeVerb, bindVerb)."""
        return {"/filter": self.filter, "/prioritize": self.prioritize, "/bind": self.bind}

    # -- filter and prioritize ---------------------------------------------------------

    def filter(self, body: Any) -> dict[str, Any]:
        """An ExtenderArgs body -> an ExtenderFilterResult."""
        args = _read(wire.read_args, body)
        self.metrics.decisions.labels("filter").inc()
        if not self.ready():
            return wire.filter_result(args, [], {}, {}, error=NOT_READY)
        verdicts, problem = self._verdicts(args)
        if problem:
            return wire.filter_result(args, [], {}, dict.fromkeys(args.node_names, problem))
        fits = [n for n in args.node_names if n in verdicts.fits]
        names = set(args.node_names)
        failed = {n: r for n, r in verdicts.failed.items() if n in names}
        unknown = {n: r for n, r in verdicts.unknown.items() if n in names}
        return wire.filter_result(args, fits, failed, unknown)

    def prioritize(self, body: Any) -> list[dict[str, Any]]:
        """An ExtenderArgs body -> a HostPriorityList."""
        args = _read(wire.read_args, body)
        self.metrics.decisions.labels("prioritize").inc()
        verdicts, _ = self._verdicts(args)
        scores = verdicts.scores() if verdicts.order == list(args.node_names) else None
        if scores is None:  # the filter's verdicts cover other candidates: score these alone
            scores = Verdicts(list(args.node_names), verdicts.fits).scores()
        return wire.priorities(scores)  # keyed by the names asked, in their order

    def _verdicts(self, args: wire.ExtenderArgs) -> tuple[Verdicts, str]:
        """Verdicts per candidate (from the filter call's cache when the state has not moved),
        or the pod's contract problem."""
        uid = args.pod.uid
        with self.view.lock:
            self._remember(args.pod)
            cached = self._cache.get(uid)
            if cached and cached[0] == self.view.version and cached[1].covers(args.node_names):
                return cached[1], ""
            try:
                verdicts = self.view.verdicts(args.pod, args.node_names)
            except (ContractError, PlacementError, ValueError) as exc:
                return Verdicts(), str(exc)
            self._cache[uid] = (self.view.version, verdicts)
            if len(self._cache) > REMEMBERED_PODS:
                self._cache.pop(next(iter(self._cache)))
            return verdicts, ""

    def _remember(self, info: PodInfo) -> None:
        self._asked[info.uid] = info
        self._asked.move_to_end(info.uid)
        if len(self._asked) > REMEMBERED_PODS:
            self._asked.popitem(last=False)

    # -- bind --------------------------------------------------------------------------

    def bind(self, body: Any) -> dict[str, str]:
        """An ExtenderBindingArgs body -> an ExtenderBindingResult."""
        args = _read(wire.read_binding, body)
        self.metrics.decisions.labels("bind").inc()
        if not self.ready():
            self.metrics.binds_failed.labels("decision").inc()
            return wire.binding_result(NOT_READY)
        try:
            self._bind(args)
        except ValueError as exc:  # ContractError, PlacementError, a model the predictor lacks
            self.metrics.binds_failed.labels("decision").inc()
            return wire.binding_result(f"pod {args.pod_namespace}/{args.pod_name}: {exc}")
        except _WriteError as exc:
            self.metrics.binds_failed.labels(exc.stage).inc()
            return wire.binding_result(f"pod {args.pod_namespace}/{args.pod_name}: {exc}")
        return wire.binding_result()

    def _bind(self, args: wire.BindingArgs) -> None:
        info = self._pod(args)
        if self._settled(args):
            return
        with self.view.lock:
            placed, write = self._decide(info, args.node)
        self._step("decision")
        try:
            if write:
                written = self._write(args, placed)
                with self.view.lock:
                    self.view.saw_version(args.pod_uid, written)
            self._step("annotation")
            self._call(
                "binding",
                self.api.bind_pod,
                args.pod_namespace,
                args.pod_name,
                args.pod_uid,
                args.node,
            )
        except _WriteError as exc:
            if not self._undo(args, placed, write, exc.status):
                raise
        self._step("binding")
        with self.view.lock:
            placed.writing, placed.confirmed, placed.pinned = False, True, False
        self._cache.pop(args.pod_uid, None)

    def _step(self, name: str) -> None:
        if self.kill_at == name:
            LOG.warning("killed after the %s step (ARKGPU_EXTENDER_KILL_AT)", name)
            os.kill(os.getpid(), signal.SIGKILL)

    def _settled(self, args: wire.BindingArgs) -> bool:
        """True when the pod turns out bound already to the node asked (a Binding whose
        answer was lost). A pod whose last write has no known outcome stays on its node (a
        late Binding may still land there); before a placement is moved or written again,
        the pod is read: one already bound keeps its assignment and the bind is refused."""
        with self.view.lock:
            prior = self.view.placed.get(args.pod_uid)
        if prior is None or prior.writing:
            return False
        here = prior.assignment.node
        if prior.confirmed and here == args.node:
            return False
        if prior.stays and here != args.node:
            raise PlacementError(f"{PINNED} {here}: the pod stays there")
        raw = self._call("decision", self.api.get_pod, args.pod_namespace, args.pod_name)
        bound = str(raw.get("spec", {}).get("nodeName") or "")
        if not bound:
            return False
        if bound == args.node and here == bound:
            with self.view.lock:
                prior.confirmed, prior.pinned = True, False
            return True
        raise PlacementError(f"already bound to node {bound}")

    def _pod(self, args: wire.BindingArgs) -> PodInfo:
        with self.view.lock:
            info = self.view.pods.get(args.pod_uid) or self._asked.get(args.pod_uid)
        if info is None:
            raw = self._call("decision", self.api.get_pod, args.pod_namespace, args.pod_name)
            info = read_pod(raw)
        if info.uid != args.pod_uid:
            raise PlacementError(f"the pod was recreated (UID {info.uid}, asked {args.pod_uid})")
        return info

    def _decide(self, info: PodInfo, node: str) -> tuple[Placed, bool]:
        """The placement to write, and whether its annotation must be written."""
        view = self.view
        placed = view.placed.get(info.uid)
        if placed is not None and placed.writing:
            raise PlacementError("another bind of this pod is in progress")
        if placed is not None and placed.assignment.node == node:
            placed.writing = True
            return placed, not placed.confirmed
        if placed is not None:
            view.release(info.uid)
        return view.assign(info, node), True

    def _write(self, args: wire.BindingArgs, placed: Placed) -> str:
        note = {ANNOTATION_ASSIGNMENT: placed.assignment.to_json()}
        written = self._call(
            "annotation",
            self.api.annotate_pod,
            args.pod_namespace,
            args.pod_name,
            args.pod_uid,
            note,
        )
        return str(written.get("metadata", {}).get("resourceVersion", ""))

    def _undo(self, args: wire.BindingArgs, placed: Placed, wrote: bool, status: int) -> bool:
        """After a failed write; True when the pod is bound to the node asked after all (its
        Binding's answer was lost earlier). Outcome unknown (the connection was cut: status
        0): the placement stays, uncertain, on its node. Refused by the API server: the
        placement goes with its annotation; if that cannot be removed it stays, uncertain."""
        if status == 0:
            with self.view.lock:
                placed.writing, placed.pinned = False, True
                placed.confirmed = placed.confirmed and not wrote
            return False
        if self._bound_anyway(args):
            with self.view.lock:
                placed.writing, placed.confirmed, placed.pinned = False, True, False
            return True
        removed = not wrote
        if wrote:
            try:
                self.api.annotate_pod(
                    args.pod_namespace, args.pod_name, args.pod_uid, {ANNOTATION_ASSIGNMENT: None}
                )
                removed = True
            except ApiError as exc:
                removed = exc.status == NOT_FOUND
                LOG.warning(
                    "pod %s/%s: annotation not removed: %s", args.pod_namespace, args.pod_name, exc
                )
        with self.view.lock:
            placed.writing = False
            if wrote and removed and self.view.placed.get(args.pod_uid) is placed:
                self.view.release(args.pod_uid)
            elif wrote:
                placed.confirmed = False
        return False

    def _bound_anyway(self, args: wire.BindingArgs) -> bool:
        """Whether the Binding went through although its answer was lost."""
        try:
            pod = self.api.get_pod(args.pod_namespace, args.pod_name)
        except ApiError:
            return False
        meta, spec = pod.get("metadata", {}), pod.get("spec", {})
        return bool(meta.get("uid") == args.pod_uid and spec.get("nodeName") == args.node)

    def _call(self, stage: str, method: Any, *args: Any) -> Any:
        try:
            return method(*args)
        except ApiError as exc:
            raise _WriteError(stage, f"{stage} failed: {exc}", exc.status) from None


class _WriteError(Exception):
    def __init__(self, stage: str, message: str, status: int) -> None:
        super().__init__(message)
        self.stage, self.status = stage, status


def _read(reader: Any, body: Any) -> Any:
    try:
        return reader(body)
    except wire.WireError as exc:
        raise RequestError(HTTPStatus.BAD_REQUEST, str(exc)) from None
