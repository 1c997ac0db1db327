"""Nodes, pods and an extender on an in-memory API server, for the extender's tests."""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from arkgpu.k8s.cluster.memory import MemoryApi
from arkgpu.k8s.contract import (
    ANNOTATION_INVENTORY,
    SCHEDULER_NAME,
    InventoryGpu,
    NodeInventory,
)
from arkgpu.k8s.extender.config import ExtenderConfig
from arkgpu.k8s.extender.running import Running, start

GOLDEN = Path(__file__).parent / "golden"
MODEL = "NVIDIA A100-SXM4-80GB"
MEMORY = 81920


def inventory(
    node: str, gpus: int, unhealthy: tuple[int, ...] = (), mig: tuple[int, ...] = ()
) -> str:
    """An inventory annotation of ``gpus`` A100-80GB GPUs."""
    return NodeInventory(
        tuple(
            InventoryGpu(
                g, f"GPU-{node}-{g}", MODEL, MEMORY, mig=g in mig, healthy=g not in unhealthy
            )
            for g in range(gpus)
        ),
        updated="2026-12-04T21:00:00Z",
    ).to_json()


def node(name: str, gpus: int | None = 2, **kwargs: Any) -> dict[str, Any]:
    """A node object (no inventory when ``gpus`` is None)."""
    notes = {} if gpus is None else {ANNOTATION_INVENTORY: inventory(name, gpus, **kwargs)}
    resources = {"cpu": "64", "memory": "512Gi", "pods": "110"}
    return {
        "metadata": {"name": name, "annotations": notes, "resourceVersion": "1"},
        "status": {"capacity": resources, "allocatable": resources},
    }


def pod(
    name: str,
    limits: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    namespace: str = "team-a",
) -> dict[str, Any]:
    """A pending pod of our scheduler (default: 30% of one GPU, 8 GiB)."""
    if limits is None:
        limits = {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "30", "nvidia.com/gpumem": "8192"}
    container = {"name": "main", "image": "x", "resources": {"limits": limits}}
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{namespace}-{name}",
            "annotations": dict(annotations or {}),
        },
        "spec": {"containers": [container], "schedulerName": SCHEDULER_NAME},
        "status": {"phase": "Pending"},
    }


def config(**overrides: Any) -> ExtenderConfig:
    """Loopback, any port, no predictor (fast) unless asked."""
    return ExtenderConfig(listen_address="127.0.0.1", port=0, **{"lc_check": False, **overrides})


def started(api: MemoryApi, **overrides: Any) -> Running:
    """An extender watching ``api``, ready (first lists in)."""
    running = start(config(**overrides), api)
    wait(running.ready, "first lists")
    return running


def wait(probe: Callable[[], Any], what: str, timeout_s: float = 20.0) -> Any:
    """Polls ``probe`` until truthy."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout_s} s")
        time.sleep(0.02)


def post(port: int, path: str, body: Any, raw: bytes | None = None) -> tuple[int, Any]:
    """POSTs JSON (or ``raw`` bytes) to the extender; (status, parsed answer)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        data = raw if raw is not None else json.dumps(body).encode()
        conn.request("POST", path, data, {"Content-Type": "application/json"})
        answer = conn.getresponse()
        return answer.status, json.loads(answer.read())
    finally:
        conn.close()


def args(p: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """ExtenderArgs as kube-scheduler sends it with nodeCacheCapable true."""
    return {"Pod": p, "Nodes": None, "NodeNames": names}


def binding(p: dict[str, Any], node_name: str) -> dict[str, str]:
    """ExtenderBindingArgs for ``p``."""
    meta = p["metadata"]
    return {
        "PodName": meta["name"],
        "PodNamespace": meta["namespace"],
        "PodUID": meta["uid"],
        "Node": node_name,
    }
