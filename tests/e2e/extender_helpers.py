"""The extender as a real process beside the extender's control plane, and its nodes and pods."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client as k8s

from arkgpu.k8s.contract import (
    ANNOTATION_ASSIGNMENT,
    ANNOTATION_INVENTORY,
    SCHEDULER_NAME,
    InventoryGpu,
    NodeInventory,
)

from . import processes
from .controlplane import ExtenderPlane
from .kube_types import loaded
from .nodes import create_gpu_node, wait_for

GROUP_LABEL = "e2e.arkgpu.io/extender-group"
"""Label on a test's nodes; its pods select it, so tests never share nodes."""
MODEL = "NVIDIA A100-SXM4-80GB"
MEMORY_MIB = 81920
READY_TIMEOUT_S = 120.0
"""Start-up of the extender process (imports, first lists) on a loaded 2-core machine."""


@dataclass
class ExtenderProcess:
    """``arkgpu extender run`` against the plane, started and killed by the tests."""

    plane: ExtenderPlane
    kubeconfig: Path | None = None
    """The API server's kubeconfig (default: the plane's admin one)."""
    child: processes.Child | None = None
    starts: int = 0
    logs: list[Path] = field(default_factory=list)

    @property
    def config_file(self) -> Path:
        path = self.plane.workdir / "extender.toml"
        path.write_text(
            f'kubeconfig = "{self.kubeconfig or self.plane.plane.admin_kubeconfig}"\n'
            f'listen_address = "127.0.0.1"\nport = {self.plane.port}\n'
            "lc_check = false\nbackoff_max_s = 2.0\nrelearn_in_background = false\n"
        )
        return path

    def start(self, kill_at: str = "") -> None:
        """Starts it (with the crash hook ``kill_at``); returns once /readyz answers 200."""
        self.starts += 1
        env = {**os.environ, "ARKGPU_EXTENDER_KILL_AT": kill_at}
        argv = [
            sys.executable,
            "-m",
            "arkgpu",
            "extender",
            "run",
            "--config",
            str(self.config_file),
        ]
        log_dir = self.plane.workdir / f"extender-{uuid.uuid4().hex[:8]}-{self.starts}"
        log_dir.mkdir()
        with (log_dir / "extender.log").open("wb") as out:
            popen = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=env,
            )
        self.child = processes.Child("extender", popen, log_dir / "extender.log")
        url = f"http://127.0.0.1:{self.plane.port}/readyz"
        child = self.child

        def ready() -> bool:
            # With the crash hook the process may bind and die before /readyz is polled.
            return processes.http_ok(url, None) or bool(kill_at and child.popen.poll() == -9)

        if kill_at:
            deadline = time.monotonic() + READY_TIMEOUT_S
            while not ready():
                assert time.monotonic() < deadline, f"extender not ready: {child.tail()}"
                time.sleep(0.1)
            return
        processes.wait_until(child, ready, "/readyz", READY_TIMEOUT_S)

    def kill(self) -> None:
        """SIGKILL, as a crash."""
        if self.child is not None and self.child.popen.poll() is None:
            os.killpg(self.child.popen.pid, signal.SIGKILL)
            self.child.popen.wait()

    def wait_dead(self, timeout_s: float) -> int:
        """Waits for the process to end by itself (the crash hook); its exit status."""
        assert self.child is not None
        return self.child.popen.wait(timeout=timeout_s)


DEVICES_PER_GPU = 10
"""``nvidia.com/gpu`` allocatable per inventory GPU, as the device plugin advertises by default
(``split_count``); the extender lets no more containers than that share one GPU."""


def create_nodes(api: k8s.ApiClient, count: int, gpus: int) -> tuple[str, list[str]]:
    """``count`` Ready nodes with ``gpus`` inventory GPUs each (and ``DEVICES_PER_GPU``
    devices per GPU in allocatable), in a fresh group."""
    group = uuid.uuid4().hex[:8]
    core = k8s.CoreV1Api(api)
    names = []
    for i in range(count):
        name = f"ext-{group}-{i}"
        create_gpu_node(api, name, gpus * DEVICES_PER_GPU)
        gpu_list = tuple(InventoryGpu(g, f"GPU-{name}-{g}", MODEL, MEMORY_MIB) for g in range(gpus))
        notes = {ANNOTATION_INVENTORY: NodeInventory(gpu_list).to_json()}
        core.patch_node(name, {"metadata": {"labels": {GROUP_LABEL: group}, "annotations": notes}})
        names.append(name)
    return group, names


def gpu_pod(name: str, group: str, limits: dict[str, str]) -> dict[str, Any]:
    """A pod of the ArkGPU scheduler with HAMi's resources, kept on the group's nodes."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "schedulerName": SCHEDULER_NAME,
            "nodeSelector": {GROUP_LABEL: group},
            "containers": [
                {
                    "name": "main",
                    "image": "registry.invalid/arkgpu-e2e:never-pulled",
                    "resources": {"limits": limits},
                }
            ],
        },
    }


def pods_json(api: k8s.ApiClient, namespace: str) -> list[dict[str, Any]]:
    """The namespace's pods as the API's JSON."""
    core = k8s.CoreV1Api(api)
    response = core.list_namespaced_pod(namespace, _preload_content=False)
    items: list[dict[str, Any]] = loaded(response)["items"]
    return items


def assignment(pod: dict[str, Any]) -> dict[str, Any] | None:
    """The pod's assignment annotation, parsed; None without."""
    note = (pod["metadata"].get("annotations") or {}).get(ANNOTATION_ASSIGNMENT)
    return None if note is None else dict(json.loads(note))


def check_consistent(pods: list[dict[str, Any]]) -> int:
    """Every bound pod carries an assignment for its node; no GPU over 100% or its memory.
    Returns the number of bound pods."""
    share: dict[str, int] = defaultdict(int)
    memory: dict[str, int] = defaultdict(int)
    bound = 0
    for p in pods:
        note = assignment(p)
        node = p["spec"].get("nodeName")
        if node:
            bound += 1
            assert note is not None, f"pod {p['metadata']['name']} bound without an assignment"
            assert note["node"] == node, f"pod {p['metadata']['name']}: {note} but bound to {node}"
        for g in (note or {}).get("gpus", []):
            share[g["uuid"]] += g["share_bp"]
            memory[g["uuid"]] += g["memory_mib"] or MEMORY_MIB
    assert all(v <= 10_000 for v in share.values()), f"over-committed compute: {dict(share)}"
    assert all(v <= MEMORY_MIB for v in memory.values()), f"over-committed memory: {dict(memory)}"
    return bound


def wait_bound(api: k8s.ApiClient, namespace: str, count: int, timeout_s: float) -> list[Any]:
    """Waits until ``count`` pods of the namespace are bound; returns the pods."""

    def probe() -> list[dict[str, Any]] | None:
        pods = pods_json(api, namespace)
        return pods if sum(bool(p["spec"].get("nodeName")) for p in pods) >= count else None

    return wait_for(probe, timeout_s, f"{count} pods bound in {namespace}", poll_s=0.5)


class TcpProxy:
    """Forwards 127.0.0.1:``port`` to the API server's port, bytes as they come (TLS passes
    through); :meth:`cut` closes the listener and every connection, as a network cut."""

    def __init__(self, target_port: int, port: int) -> None:
        self.target_port, self.port = target_port, port
        self._listener: socket.socket | None = None
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()

    def start(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        with self._lock:
            doomed, self._sockets = self._sockets, []
            listener, self._listener = self._listener, None
        for sock in [*doomed, *([listener] if listener else [])]:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pump, args=(a, b), daemon=True).start()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
