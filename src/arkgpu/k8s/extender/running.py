"""``arkgpu extender run``: the extender built from its configuration, served until SIGTERM.

Start-up: the policy and (for LC pods) the predictor's check are built, the
HTTP(S) endpoint listens at once (``/healthz`` answers, ``/readyz`` says 503),
and two reflectors list and watch nodes and pods; ``/readyz`` turns 200 once
both first lists are in. kube-scheduler's calls before that are answered from
what is known (an empty snapshot refuses every node with its reason).
"""

from __future__ import annotations

import gc
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType
from typing import Any

import numpy as np
from prometheus_client import CollectorRegistry

from arkgpu.colocation.sizing import CorrectedPredictor, LcDemand, ShareSizer
from arkgpu.k8s.cluster.api import ClusterApi, Json
from arkgpu.k8s.cluster.objects import NodeInfo, PodInfo, read_node, read_pod
from arkgpu.k8s.cluster.watching import Reflector, WatchConfig
from arkgpu.k8s.extender.config import ExtenderConfig
from arkgpu.k8s.extender.metrics import PREFIX, ExtenderMetrics
from arkgpu.k8s.extender.service import Extender
from arkgpu.k8s.extender.state import ClusterView
from arkgpu.k8s.inventory import Corrections
from arkgpu.k8s.jsonhttp import JsonServer
from arkgpu.model.cluster import ClusterState
from arkgpu.model.resources import LcAttributes
from arkgpu.placement.arkgpu import ArkgpuPolicy
from arkgpu.placement.lc_checking import LcCheck
from arkgpu.placement.relearning import BackgroundSolver
from arkgpu.placement.relearning_process import ProcessSolver
from arkgpu.placement.scheduling import Scheduler, build_policy
from arkgpu.predictor import Predictor, default_predictor

LOG = logging.getLogger(__name__)

KILL_AT_VARIABLE = "ARKGPU_EXTENDER_KILL_AT"
"""Test hook: the bind step after which the process SIGKILLs itself (the crash tests)."""


def lc_demand(lc: LcAttributes) -> LcDemand:
    """The sizer's demand for an LC service at its peak rate."""
    return LcDemand(lc.model, lc.target_ms, lc.peak_rps, lc.max_batch, lc.max_queue_delay_ms)


LcSizers = Callable[[Corrections], ShareSizer]
"""The level-2 sizer for the corrections the nodes published (online calibration)."""


def lc_sizers(config: ExtenderConfig) -> LcSizers | None:
    """With the LC check on: the configured predictor, loaded once, and the sizer over it
    with each model's latencies multiplied by its correction; None when the check is off."""
    if not config.lc_check:
        return None
    predictor = Predictor.load(config.predictor) if config.predictor else default_predictor()

    def sizer(corrections: Corrections) -> ShareSizer:
        model = CorrectedPredictor(predictor, corrections) if corrections else predictor
        return ShareSizer(model, config.gpu_model)

    return sizer


def build_scheduler(
    config: ExtenderConfig,
    on_lost: Callable[[], None] = lambda: None,
    sizers: LcSizers | None = None,
) -> Scheduler:
    """An empty cluster state, the configured policy and, when on, the predictor's LC check
    (its sizer from ``sizers``, else built here). ``on_lost`` is called each time a
    re-learning worker process dies."""
    state = ClusterState.from_nodes([])
    sizers = sizers or lc_sizers(config)
    check = LcCheck(sizers(()), lc_demand) if sizers is not None else None
    policy = build_policy(config.policy, state)
    if isinstance(policy, ArkgpuPolicy) and config.relearn_in_background:
        policy.solver = (
            ProcessSolver(on_lost=on_lost)
            if config.relearn_worker == "process"
            else BackgroundSolver()
        )
    return Scheduler(state, policy, np.random.default_rng(config.seed), check)


def close_scheduler(scheduler: Scheduler) -> None:
    """Stop the policy's re-learning worker, thread or process, if it has one."""
    policy = scheduler.policy
    if isinstance(policy, ArkgpuPolicy) and isinstance(
        policy.solver, BackgroundSolver | ProcessSolver
    ):
        policy.solver.close()


class ViewSink:
    """Puts the reflectors' objects into the view (under its lock) and counts them."""

    def __init__(self, view: ClusterView, metrics: ExtenderMetrics) -> None:
        self.view, self.metrics = view, metrics

    def replace(self, resource: str, items: list[Json]) -> None:
        with self.view.lock:
            if resource == "nodes":
                self.view.replace_nodes(_read_all(read_node, items))
            else:
                self.view.replace_pods(_read_all(read_pod, items))
            self._count()

    def event(self, resource: str, kind: str, obj: Json) -> None:
        try:
            if resource == "nodes":
                node = read_node(obj)
                with self.view.lock:
                    self._node(kind, node)
            else:
                pod = read_pod(obj)
                with self.view.lock:
                    self._pod(kind, pod)
        except ValueError as exc:
            LOG.warning("%s event ignored: %s", resource, exc)

    def _node(self, kind: str, node: NodeInfo) -> None:
        if kind == "DELETED":
            self.view.node_gone(node.name)
        else:
            self.view.node_seen(node)
        self._count()

    def _pod(self, kind: str, pod: PodInfo) -> None:
        if kind == "DELETED":
            self.view.pod_gone(pod.uid)
        else:
            self.view.pod_seen(pod)
        self._count()

    def _count(self) -> None:
        self.metrics.nodes.set(len(self.view.nodes))
        self.metrics.pods.set(len(self.view.pods))
        self.metrics.placed.set(len(self.view.placed))


def _read_all(reader: Any, items: list[Json]) -> list[Any]:
    out = []
    for obj in items:
        try:
            out.append(reader(obj))
        except ValueError as exc:
            LOG.warning("listed object ignored: %s", exc)
    return out


@dataclass
class Running:
    """A started extender: its endpoint, reflectors and parts (tests reach in)."""

    server: JsonServer
    port: int
    extender: Extender
    reflectors: list[Reflector]

    def ready(self) -> bool:
        """Both first lists are in."""
        return all(r.listed.is_set() for r in self.reflectors)

    def close(self) -> None:
        """Stops the reflectors, the endpoint and the re-learning worker."""
        for r in self.reflectors:
            r.stopping.set()
        self.server.close()
        with self.extender.view.lock:
            close_scheduler(self.extender.view.scheduler)


def start(config: ExtenderConfig, api: ClusterApi, watching: bool = True) -> Running:
    """Builds and starts the extender on ``api`` (without reflectors when ``watching`` is
    False: the caller feeds the view, as the benchmark does)."""
    registry = CollectorRegistry()
    metrics = ExtenderMetrics.create(registry)
    sizers = lc_sizers(config)
    scheduler = build_scheduler(config, metrics.relearn_workers_lost.inc, sizers)
    view = ClusterView(scheduler, config.scheduler_name, config.default_gpucores_percent, sizers)
    extender = Extender(view, api, metrics, config.filter_chosen_only)
    sink = ViewSink(view, metrics)
    timing = WatchConfig(config.resync_s, backoff_max_s=config.backoff_max_s)
    reflectors = [
        Reflector(r, api, sink, timing, metrics.watch_restarts.labels(r).inc)
        for r in (("nodes", "pods") if watching else ())
    ]
    holder: list[Running] = []
    server = JsonServer(
        config.server,
        extender.routes(),
        registry,
        PREFIX,
        ready=lambda: bool(holder) and holder[0].ready(),
    )
    port = server.start()
    running = Running(server, port, extender, reflectors)
    holder.append(running)
    extender.ready = running.ready
    for r in reflectors:
        r.start()
    return running


def settle_gc(config: ExtenderConfig) -> None:
    """Once the first snapshot is in: the snapshot, long-lived, is kept out of the
    collector's scans (``gc.freeze``), and full collections, which stall the filter call they
    fall on, come every ``gc_full_every`` collections of the middle generation."""
    gc.freeze()
    first, second, _ = gc.get_threshold()
    gc.set_threshold(first, second, config.gc_full_every)


def serve(config: ExtenderConfig) -> int:
    """Runs the extender until SIGTERM or SIGINT; returns the exit status."""
    from arkgpu.k8s.cluster.kube import KubeApi, load_client  # noqa: PLC0415 (kubernetes)

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    running = start(config, KubeApi(load_client(config.kubeconfig)))
    running.extender.kill_at = os.environ.get(KILL_AT_VARIABLE, "")
    scheme = "https" if config.server.tls else "http"
    print(
        f"arkgpu extender: {scheme}://{config.listen_address}:{running.port}, policy "
        f"{config.policy}, scheduler {config.scheduler_name}",
        file=sys.stderr,
        flush=True,
    )
    while not stop.wait(0.1):
        if running.ready():
            settle_gc(config)
            break
    stop.wait()
    running.close()
    return 0
