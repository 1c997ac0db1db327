"""The extender's picture of the cluster: nodes and pods from the API server, in the scheduler.

:class:`ClusterView` keeps one :class:`~arkgpu.placement.scheduling.Scheduler`
in step with what the list and watch report, and answers filter and bind:

- a node with a valid GPU inventory joins the scheduler's state with its
  offered GPUs (healthy, not MIG; slot ``s`` is ``NodeInfo.gpus[s]``) and
  each GPU's own memory; a node whose inventory changes leaves and joins
  again with its pods put back on the same GPUs (by UUID);
- a pod carrying an assignment annotation counts as placed where it says,
  bound yet or not (a crash between the annotation and the Binding leaves it
  so: it stays counted until it is bound, re-assigned or deleted); a pod that
  finished or was deleted gives its shares back;
- a placement being written by a bind (``Placed.writing``) is left alone by
  watch events until the bind ends; one whose last write was cut off
  (``Placed.confirmed`` false) stays, and its pod stays on its node, until a
  bind settles it or the pod goes (a cut-off Binding may still land); and an
  event older than the version the extender last wrote or saw
  (resourceVersion) is ignored, so a late event never undoes a newer decision.

Every method expects the caller to hold :attr:`ClusterView.lock`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from itertools import repeat
from typing import Any

import numpy as np

from arkgpu.k8s.cluster.objects import NodeInfo, PodInfo
from arkgpu.k8s.contract import AssignedGpu, PodAssignment
from arkgpu.k8s.extender.devices import DeviceCounts
from arkgpu.k8s.extender.placements import Placed
from arkgpu.k8s.extender.requests import adopted_pod, lc_attributes, model_pod, qos_of
from arkgpu.k8s.extender.selecting import only_selected
from arkgpu.k8s.extender.verdicts import Verdicts, rank_group
from arkgpu.k8s.inventory import Corrections
from arkgpu.model.arrays import IntArray
from arkgpu.model.cluster import PlacementError
from arkgpu.model.gpus import gpu_model, known_gpu_models
from arkgpu.model.resources import Node, Pod
from arkgpu.placement.lc_placing import ShareSizing
from arkgpu.placement.scheduling import Scheduler

LOG = logging.getLogger(__name__)


def _version(text: str) -> int | None:
    return int(text) if text.isascii() and text.isdigit() else None


class ClusterView:
    """Nodes, pods and placements, kept in one scheduler (see the module doc)."""

    def __init__(
        self,
        scheduler: Scheduler,
        scheduler_name: str,
        default_cores: int,
        correct: Callable[[Corrections], ShareSizing[Any]] | None = None,
    ) -> None:
        self.scheduler, self.scheduler_name, self.default_cores = (
            scheduler,
            scheduler_name,
            default_cores,
        )
        self.correct = correct
        """Builds the LC check's sizer for the nodes' published corrections (None: unused)."""
        self.corrections: Corrections = ()
        """Per model, the largest correction any node published: what LC pods are sized with."""
        self.lock = threading.RLock()
        self.nodes: dict[str, NodeInfo] = {}
        """Nodes in the scheduler's state (with GPUs to offer)."""
        self.refused: dict[str, str] = {}
        """Nodes seen without GPUs to offer, and why."""
        self.pods: dict[str, PodInfo] = {}
        """Pods tracked, by UID."""
        self.placed: dict[str, Placed] = {}
        """Pods counted in the state, by UID."""
        self.index: dict[str, int] = {}
        """Row in the scheduler's state of each node in it (a node that leaves and comes
        back gets its row back)."""
        self._sizes: set[int] = set()
        self.version = 0
        """Bumped at every change of the state (filter answers are cached per version)."""
        self._seen_version: dict[str, int] = {}
        self._arrived: set[str] = set()
        self.devices = DeviceCounts()
        """Containers per GPU against the devices the kubelet advertises for it."""

    # -- nodes -------------------------------------------------------------------------

    def node_seen(self, info: NodeInfo) -> None:
        """A node was added or changed."""
        self._node_seen(info)
        self._corrections_changed()

    def _corrections_changed(self) -> None:
        """Give the LC check a new sizer when the largest correction of some model moved (the
        check itself, which knows the LC pods on every GPU, stays)."""
        check = self.scheduler.lc_check
        if self.correct is None or check is None:
            return
        found: dict[str, float] = {}
        for info in self.nodes.values():
            for model, factor in info.corrections:
                found[model] = max(found.get(model, factor), factor)
        now = tuple(sorted(found.items()))
        if now != self.corrections:
            self.corrections = now
            check.sizer = self.correct(now)
            self.version += 1  # cached filter answers were sized without them

    def _node_seen(self, info: NodeInfo) -> None:
        old = self.nodes.get(info.name)
        if old is not None and (old.gpus, old.cpu_milli, old.memory_mib) == (
            info.gpus,
            info.cpu_milli,
            info.memory_mib,
        ):
            self.nodes[info.name] = info
            if old.devices_per_gpu != info.devices_per_gpu:
                row = self.index[info.name]
                self.devices.rebound(self.scheduler.state, row, info.devices_per_gpu)
                self.version += 1
            return
        if old is not None:
            self._take_out(info.name)
        if not info.gpus:
            self.refused[info.name] = info.error
            return
        self.refused.pop(info.name, None)
        self._put_in(info)

    def node_gone(self, name: str) -> None:
        """A node was deleted: its pods stay tracked, placed again if it comes back."""
        self._node_gone(name)
        self._corrections_changed()

    def _node_gone(self, name: str) -> None:
        self.refused.pop(name, None)
        if name in self.nodes:
            self._take_out(name)

    def _put_in(self, info: NodeInfo) -> None:
        self.nodes[info.name] = info
        node = Node(info.name, info.cpu_milli, info.memory_mib, len(info.gpus), info.gpu_model)
        self.scheduler.join(node)
        state = self.scheduler.state
        i = self.index[info.name] = state.node_index(info.name)
        self.devices.join(i, info.devices_per_gpu)
        self._sizes.add(info.gpus[0].memory_mib)
        for slot, gpu in enumerate(info.gpus):
            state.gpu_memory_left[i, slot] = gpu.memory_mib
        self.version += 1
        for uid, pod in list(self.pods.items()):
            a = pod.assignment
            if a is not None and a.node == info.name and uid not in self.placed:
                self._adopt(pod, a)

    def _take_out(self, name: str) -> None:
        """Releases the node's pods (kept tracked) and takes the node out of the state."""
        for uid, placed in list(self.placed.items()):
            if placed.assignment.node == name:
                self.release(uid)
        state = self.scheduler.state
        i = state.node_index(name)
        model = state.nodes[i].gpu_model
        full = gpu_model(model).memory_mib if model in known_gpu_models() else 0
        state.gpu_memory_left[i] = np.where(state.gpu_exists[i], full, 0)
        self.scheduler.leave(name)
        del self.nodes[name]
        del self.index[name]
        self.version += 1

    def replace_nodes(self, infos: Iterable[NodeInfo]) -> None:
        """A full list: nodes not in it are gone."""
        fresh = {i.name: i for i in infos}
        for name in [*self.nodes, *self.refused]:
            if name not in fresh:
                self._node_gone(name)
        for info in fresh.values():
            self._node_seen(info)
        self._corrections_changed()  # once for the list, not once per node

    # -- pods --------------------------------------------------------------------------

    def tracks(self, info: PodInfo) -> bool:
        """Whether the pod is ArkGPU's: asks for GPUs through our scheduler, or was placed."""
        return info.gpu is not None and (
            info.scheduler_name == self.scheduler_name or info.assignment is not None
        )

    def pod_seen(self, info: PodInfo) -> None:
        """A pod was added or changed (an event older than one already seen is ignored)."""
        if self._stale(info.uid, info.resource_version):
            return
        if not self.tracks(info) and info.uid not in self.pods:
            return
        self.pods[info.uid] = info
        placed = self.placed.get(info.uid)
        if placed is not None and info.node_name:
            placed.pinned = False  # seen bound: nothing of a bind is still in the air
        if info.finished:
            if placed is not None and not placed.writing:
                self.release(info.uid)
            return
        a = info.assignment
        if placed is not None and not placed.writing and not placed.confirmed:
            # An uncertain placement stays (a late Binding may still land) until a bind
            # settles it or the pod goes; seeing its annotation confirms it.
            placed.confirmed = placed.assignment == a
            return
        if a is None or (placed is not None and (placed.writing or placed.assignment == a)):
            return
        if placed is not None:
            self.release(info.uid)
        self._adopt(info, a)

    def pod_gone(self, uid: str) -> None:
        """A pod was deleted."""
        self.pods.pop(uid, None)
        self._arrived.discard(uid)
        if uid in self.placed:
            self.release(uid)

    def replace_pods(self, infos: Iterable[PodInfo]) -> None:
        """A full list: pods not in it are gone."""
        fresh = {i.uid: i for i in infos}
        for uid in list(self.pods):
            if uid not in fresh:
                self.pod_gone(uid)
        self._seen_version.clear()
        for info in fresh.values():
            self.pod_seen(info)

    def _stale(self, uid: str, resource_version: str) -> bool:
        version = _version(resource_version)
        if version is None:
            return False
        last = self._seen_version.get(uid)
        if last is not None and version <= last:
            return True
        self._seen_version[uid] = version
        return False

    # -- placements --------------------------------------------------------------------

    def _adopt(self, info: PodInfo, a: PodAssignment) -> None:
        """Counts the pod where its annotation says (left unplaced if that cannot be)."""
        node = self.nodes.get(a.node)
        if node is None:
            return  # placed when its node joins
        uuids = [g.uuid for g in node.gpus]
        missing = [g.uuid for g in a.gpus if g.uuid not in uuids]
        if missing:
            LOG.warning("pod %s: assigned GPUs %s not offered by %s", info.key, missing, a.node)
            return
        slots = tuple(uuids.index(g.uuid) for g in a.gpus)
        state, row = self.scheduler.state, self.index[a.node]
        try:
            with self.devices.opened(state, row, slots):
                pod = adopted_pod(info, a, node.gpus[0].memory_mib, self.default_cores)
                self.scheduler.adopt(pod, a.node, slots)
        except PlacementError as exc:
            LOG.warning("pod %s: cannot count its assignment: %s", info.key, exc)
            return
        self.devices.take(state, row, slots)
        self.placed[info.uid] = Placed(a)
        self.version += 1

    def release(self, uid: str) -> None:
        """The pod's shares and devices go back to its node."""
        a = self.placed.pop(uid).assignment
        self.scheduler.release(uid)
        uuids = [g.uuid for g in self.nodes[a.node].gpus]
        slots = [uuids.index(g.uuid) for g in a.gpus if g.uuid in uuids]
        self.devices.give_back(self.scheduler.state, self.index[a.node], slots)
        self.version += 1

    def assign(self, info: PodInfo, node: str) -> Placed:
        """A new placement of ``info`` on ``node`` by the policy, marked as being written."""
        if node not in self.nodes:
            raise PlacementError(self.refused.get(node) or f"node {node} is not in the snapshot")
        pod = self.request(info, node)
        state, row = self.scheduler.state, self.index[node]
        with only_selected(state, self.nodes, self.index, info, [node]) as no:
            if no:
                raise PlacementError(no[node])
            binding = self.scheduler.assign(pod, node)
        self.devices.take(state, row, binding.gpus)
        gpus = self.nodes[node].gpus
        assigned = tuple(
            AssignedGpu(gpus[s].index, gpus[s].uuid, binding.gpu_memory_mib, binding.share_bp)
            for s in binding.gpus
        )
        container = info.gpu.name if info.gpu is not None else ""
        placed = Placed(PodAssignment(node, assigned, qos_of(info), container), writing=True)
        self.placed[info.uid] = placed
        self.version += 1
        return placed

    def request(self, info: PodInfo, node: str) -> Pod:
        """The placement layer's pod for ``info`` on GPUs like those of ``node``."""
        memory = self.nodes[node].gpus[0].memory_mib
        return model_pod(info, memory, self.default_cores, self.scheduler.state.model_names)

    # -- filter ------------------------------------------------------------------------

    def verdicts(self, info: PodInfo, names: Sequence[str], reasons: bool = True) -> Verdicts:
        """Per candidate: fits with the policy's score, or why not (ContractError: the pod
        breaks the contract, no node would do); without ``reasons``, the policy's reasons
        for the nodes that do not fit only when none fits (:func:`rank_group`)."""
        out = Verdicts(list(names))
        placed = self.placed.get(info.uid)
        if placed is not None and placed.stays and not placed.writing:
            here = placed.assignment.node  # a cut-off bind may still land there: stay
            reason = f"an earlier bind of this pod has no known outcome yet; it stays on {here}"
            out.failed.update((n, reason) for n in names if n != here)
            names = [n for n in names if n == here]
        groups = self._groups(names, out)
        lc_attributes(info)  # a malformed LC annotation refuses every node
        known = (n for members, _ in groups for n in members)  # read only for a selection
        state = self.scheduler.state
        with (
            self._without(info.uid),
            only_selected(state, self.nodes, self.index, info, known) as no,
        ):
            out.failed.update(no)
            for group, group_rows in groups:
                keep = [k for k, n in enumerate(group) if n not in no] if no else None
                members = group if keep is None else [group[k] for k in keep]
                rows = group_rows if keep is None else group_rows[keep]
                if not members:
                    continue
                pod = self.request(info, members[0])
                if info.uid not in self._arrived:
                    self._arrived.add(info.uid)
                    self.scheduler.arrived(pod)
                rank_group(self.scheduler, pod, members, rows, out, reasons)
        return out

    def _groups(self, names: Sequence[str], out: Verdicts) -> list[tuple[list[str], IntArray]]:
        """The candidates in the snapshot (names and state rows) per GPU memory size; the
        others go to ``out.unknown`` with their reason. One dict look-up per name, in C."""
        rows = np.fromiter(map(self.index.get, names, repeat(-1)), np.int64, len(names))
        known = rows >= 0
        if not known.all():
            keep = known.tolist()
            for name, ok in zip(names, keep, strict=True):
                if not ok:
                    why = self.refused.get(name) or f"node {name} is not in the ArkGPU snapshot"
                    out.unknown[name] = why
            names, rows = [n for n, ok in zip(names, keep, strict=True) if ok], rows[known]
        if len(rows) == 0:
            return []
        if len(self._sizes) <= 1:  # one GPU memory size in the cluster: one group
            return [(list(names), rows)]
        by_size: dict[int, list[int]] = {}
        for k, name in enumerate(names):
            by_size.setdefault(self.nodes[name].gpus[0].memory_mib, []).append(k)
        return [([names[k] for k in ks], rows[ks]) for ks in by_size.values()]

    @contextmanager
    def _without(self, uid: str) -> Iterator[None]:
        """The state without the pod's own unbound placement (after a restart mid-bind the
        pod is annotated but pending: it must not compete with itself)."""
        placed = self.placed.get(uid)
        info = self.pods.get(uid)
        if placed is None or placed.writing or info is None:
            yield
            return
        self.release(uid)
        try:
            yield
        finally:
            self._adopt(info, placed.assignment)
            if uid in self.placed:
                self.placed[uid] = placed  # the same record: its flags stay
