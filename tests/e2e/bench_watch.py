"""When each pod is bound, seen through a watch; the figures of one measured phase.

The watch starts before the first pod is created and records, for each pod, the
moment (``time.monotonic()``) its first event with ``spec.nodeName`` arrives. The
client's clock at both ends (create sent, bind seen) makes every latency include
the API server's and the watch's delay, the same in both phases. Events are read
as raw JSON lines: decoding a thousand pods into the client's models would cost
more CPU than the scheduler under test on a 2-core machine.
"""

from __future__ import annotations

import contextlib
import json
import math
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from kubernetes import client as k8s

from arkgpu.k8s.contract import ANNOTATION_ASSIGNMENT

from .bench_config import overcommitted_gpus
from .kube_types import loaded

WATCH_WINDOW_S = 60
"""Seconds one watch request lasts before it is renewed from the last resourceVersion."""


class BindWatch:
    """Pods of one namespace: when each was first seen bound, and to which node."""

    def __init__(self, api: k8s.ApiClient, namespace: str) -> None:
        self._core = k8s.CoreV1Api(api)
        self._namespace = namespace
        self._changed = threading.Condition()
        self._stopping = threading.Event()
        self._response: Any = None
        self._error: str | None = None
        self.bound: dict[str, float] = {}
        """Pod name -> monotonic time its binding was first seen."""
        self.nodes: dict[str, str] = {}
        """Pod name -> node it was bound to."""
        self.assignments: dict[str, str] = {}
        """Pod name -> its ArkGPU assignment annotation when it was first seen bound."""

    def run(self, resource_version: str) -> None:
        """The watch loop (a thread's target): renews the watch until ``stop``."""
        try:
            while not self._stopping.is_set():
                resource_version = self._watch_once(resource_version)
        except Exception as exc:  # reported to the waiting thread, never lost
            if not self._stopping.is_set():
                with self._changed:
                    self._error = f"watch of pods in {self._namespace} failed: {exc!r}"
                    self._changed.notify_all()

    def _watch_once(self, resource_version: str) -> str:
        self._response = self._core.list_namespaced_pod(
            self._namespace,
            watch=True,
            resource_version=resource_version,
            timeout_seconds=WATCH_WINDOW_S,
            _preload_content=False,
        )
        for line in _lines(self._response):
            event = json.loads(line)
            if event["type"] == "ERROR":
                raise RuntimeError(event["object"].get("message", "watch error"))
            resource_version = event["object"]["metadata"]["resourceVersion"]
            self.record(event["object"])
        return resource_version

    def record(self, pod: Mapping[str, Any]) -> None:
        """Notes ``pod`` (a Pod as JSON) as bound when it has a node and was not seen bound."""
        node = pod.get("spec", {}).get("nodeName")
        name = pod["metadata"]["name"]
        if node and name not in self.bound:
            assignment = (pod["metadata"].get("annotations") or {}).get(ANNOTATION_ASSIGNMENT)
            with self._changed:
                self.bound[name] = time.monotonic()
                self.nodes[name] = node
                if assignment is not None:
                    self.assignments[name] = assignment
                self._changed.notify_all()

    def wait(self, names: set[str], timeout_s: float) -> None:
        """Returns once every pod of ``names`` is bound; raises after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while not names <= self.bound.keys():
                if self._error is not None:
                    raise AssertionError(self._error)
                left = deadline - time.monotonic()
                if left <= 0:
                    missing = len(names - self.bound.keys())
                    raise AssertionError(
                        f"{missing} of {len(names)} pods not bound in {timeout_s:.0f} s"
                    )
                self._changed.wait(min(left, 1.0))

    def stop(self) -> None:
        """Ends the watch: shuts its socket down, which wakes the thread blocked reading it.

        (Closing the response from this thread would wait for the reader's lock, and the
        reader waits for the server, up to ``WATCH_WINDOW_S``.)
        """
        self._stopping.set()
        connection = getattr(self._response, "connection", None)
        sock = getattr(connection, "sock", None)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


def _lines(response: Any) -> Iterator[bytes]:
    """The newline-separated JSON events of a streamed watch response."""
    pending = b""
    for chunk in response.stream(64 * 1024, decode_content=False):
        pending += chunk
        *complete, pending = pending.split(b"\n")
        yield from (line for line in complete if line.strip())
    if pending.strip():
        yield pending


@contextmanager
def watching_binds(api: k8s.ApiClient, namespace: str) -> Iterator[BindWatch]:
    """A ``BindWatch`` running from the namespace's current state until the block ends."""
    core = k8s.CoreV1Api(api)
    listing = loaded(core.list_namespaced_pod(namespace, _preload_content=False))
    watch = BindWatch(api, namespace)
    for pod in listing["items"]:
        watch.record(pod)  # pods bound before the watch began
    thread = threading.Thread(
        target=watch.run, args=(listing["metadata"]["resourceVersion"],), daemon=True
    )
    thread.start()
    try:
        yield watch
    finally:
        watch.stop()
        thread.join(timeout=10)


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank ``q``-th percentile (0 < q <= 100) of ``values`` (not empty)."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


@dataclass(frozen=True)
class PhaseResult:
    """One phase of one round."""

    phase: str
    mode: str
    round: int
    pods: int
    pods_per_s: float
    """``live``: pods / (last bind seen - first create sent); ``backlog``: as ``binds_per_s``."""
    binds_per_s: float
    """(pods - 1) / (last bind - first bind): the scheduling rate once it has started."""
    creates_per_s: float
    """pods / (last create sent - first create sent): the client's pace."""
    latency_p50_ms: float
    """``live``: create sent to bind seen, per pod, median; ``backlog``: from scheduler ready."""
    latency_p99_ms: float
    nodes_used: int
    """Distinct nodes the pods went to."""
    cpu_ms_per_pod: dict[str, float]
    """``scheduler`` (and ``extender``), ``apiserver``, ``etcd``: CPU time (user + system)
    per pod, milliseconds."""
    assigned: int
    """Pods bound with ArkGPU's assignment annotation (extender phase: every pod)."""
    overcommitted_gpus: int
    """GPUs whose assignments add up to more than the GPU (must be 0)."""


def phase_result(
    key: tuple[str, str, int],
    sent: Mapping[str, float],
    watch: BindWatch,
    scheduler_ready: float,
    cpu_ms_per_pod: dict[str, float],
) -> PhaseResult:
    """The figures of one phase from the send times and the bind times (monotonic s)."""
    phase, mode, round_ = key
    binds = [watch.bound[name] for name in sent]
    first_bind, last_bind = min(binds), max(binds)
    first_sent, last_sent = min(sent.values()), max(sent.values())
    start = {name: max(t, scheduler_ready) for name, t in sent.items()}
    latencies = [1000 * (watch.bound[name] - start[name]) for name in sent]
    binds_per_s = (len(sent) - 1) / max(last_bind - first_bind, 1e-6)
    return PhaseResult(
        phase=phase,
        mode=mode,
        round=round_,
        pods=len(sent),
        pods_per_s=len(sent) / (last_bind - first_sent) if mode != "backlog" else binds_per_s,
        binds_per_s=binds_per_s,
        creates_per_s=len(sent) / max(last_sent - first_sent, 1e-6),
        latency_p50_ms=percentile(latencies, 50),
        latency_p99_ms=percentile(latencies, 99),
        nodes_used=len({watch.nodes[name] for name in sent}),
        cpu_ms_per_pod=cpu_ms_per_pod,
        assigned=sum(name in watch.assignments for name in sent),
        overcommitted_gpus=overcommitted_gpus(
            [watch.assignments[name] for name in sent if name in watch.assignments]
        ),
    )
