"""filter, prioritize and bind: kube-scheduler's three calls, answered from the cluster view.

- filter: per candidate node, the policy's verdict (and, for an LC pod, the
  predictor's check). By default (``chosen_only``) the answer keeps only the
  node the policy chose: kube-scheduler, left with one feasible node, skips
  scoring and never calls prioritize (one round trip less a pod), and the pod
  goes where the policy put it. When no node fits, every candidate comes back
  with its reason: nodes the snapshot has no GPUs for as
  ``FailedAndUnresolvableNodes``, nodes without room as ``FailedNodes``. A pod
  that breaks the contract (a bad annotation, two containers asking for GPUs)
  fails on every node with that reason. With ``chosen_only`` off, every
  fitting node is kept and the verdicts wait for the prioritize call.
- prioritize: the policy's best node scores 10, the other fitting nodes 0..9
  in the order of the policy's scores, so kube-scheduler's choice among
  equal totals cannot move a pod off the policy's node.
- bind: under the view's lock the pod's GPUs are taken in the state (a
  concurrent bind sees them taken, so no GPU is ever promised twice); then,
  outside the lock, one write: the Binding subresource, carrying the
  assignment annotation in its ``metadata.annotations``, which the API server
  sets on the pod as it binds it (with the pod's UID as precondition). The pod
  is bound with its assignment or not at all. A refusal undoes the placement
  and answers the error; a write whose outcome is unknown keeps the pod on its
  node. A pod already annotated for the node asked (written by an older
  extender that annotated first) is bound with the same annotation; annotated
  for another node, it is placed again.
"""

from __future__ import annotations

import logging
import os
import signal
from collections import OrderedDict
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

from arkgpu.k8s.cluster.api import ApiError, ClusterApi
from arkgpu.k8s.cluster.objects import PodInfo, read_pod
from arkgpu.k8s.contract import ANNOTATION_ASSIGNMENT, ContractError
from arkgpu.k8s.extender import wire
from arkgpu.k8s.extender.metrics import ExtenderMetrics
from arkgpu.k8s.extender.placements import Placed
from arkgpu.k8s.extender.state import ClusterView
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

    def __init__(
        self,
        view: ClusterView,
        api: ClusterApi,
        metrics: ExtenderMetrics,
        chosen_only: bool = True,
    ) -> None:
        self.view, self.api, self.metrics = view, api, metrics
        self.chosen_only = chosen_only
        """filter keeps only the policy's node when one fits (see the module doc)."""
        self._asked: OrderedDict[str, PodInfo] = OrderedDict()
        self._cache: dict[str, tuple[int, Verdicts]] = {}
        self.ready: Callable[[], bool] = lambda: True
        """Whether the snapshot's first lists are in: until then every call is refused (a
        half-listed snapshot would show GPUs free that pods hold)."""
        self.kill_at = ""
        """Test hook (environment ``ARKGPU_EXTENDER_KILL_AT``): the process SIGKILLs itself
        right after this step of a bind (``decision`` or ``binding``)."""

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
        if self.chosen_only:
            best = verdicts.best(args.node_names)
            if best is not None:
                return wire.filter_result(args, [best], {}, {})
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
                verdicts = self.view.verdicts(
                    args.pod, args.node_names, reasons=not self.chosen_only
                )
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
            placed, fresh = self._decide(info, args.node)
        self._step("decision")
        note = {ANNOTATION_ASSIGNMENT: placed.assignment.to_json()}
        try:
            self._call(
                "binding",
                self.api.bind_pod,
                args.pod_namespace,
                args.pod_name,
                args.pod_uid,
                args.node,
                note,
            )
        except _WriteError as exc:
            if not self._undo(args, placed, fresh, exc.status):
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
        """The placement to write, and whether it is new (not known to be on the pod)."""
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

    def _undo(self, args: wire.BindingArgs, placed: Placed, fresh: bool, status: int) -> bool:
        """After a failed Binding; True when the pod is bound to the node asked after all (its
        answer was lost earlier). Outcome unknown (the connection was cut: status 0): the
        placement stays, uncertain, on its node. Refused by the API server: nothing was
        written, so a new placement goes; one the pod already carried stays."""
        if status == 0:
            with self.view.lock:
                placed.writing, placed.pinned = False, True
                placed.confirmed = placed.confirmed and not fresh
            return False
        if self._bound_anyway(args):
            with self.view.lock:
                placed.writing, placed.confirmed, placed.pinned = False, True, False
            return True
        with self.view.lock:
            placed.writing = False
            if fresh and self.view.placed.get(args.pod_uid) is placed:
                self.view.release(args.pod_uid)
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
