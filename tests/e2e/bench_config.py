"""What the control-plane benchmark creates: its settings, nodes, pods and scheduler configs.

Pure data, no I/O: ``bench_scheduling`` sends these bodies to the API server
and writes these configurations to files. Two phases are compared:

- ``stock``: kube-scheduler alone. A profile with the default plugins (named
  ``STOCK_SCHEDULER`` so that it never competes with another scheduler's
  ``default-scheduler`` on a shared control plane); pods ask for
  ``nvidia.com/gpu`` only, the one GPU resource a node advertises.
- ``extender``: the same kube-scheduler with ArkGPU's extender (filter,
  prioritize, bind; ``nodeCacheCapable``; every ArkGPU resource managed and
  ignored by the scheduler), profile ``contract.SCHEDULER_NAME``; pods ask for
  HAMi's resources: fractional GPUs (``gpucores`` + ``gpumem``) and whole ones.
- ``null`` (on request): as ``extender``, with ``bench_null_extender``, which
  decides nothing, in its place: the cost of the extender protocol alone.
- ``hami`` (on request, with ``--hami-scheduler BIN``): HAMi's scheduler extender
  (built from its public source, never part of the project), with its chart's
  extender configuration (filter and bind, ``nodeCacheCapable``, HAMi's resources
  managed and ignored), the same pods as ``extender``, its node annotations as its
  device plugin writes them, and its node lock set to expire at once
  (docs/studies/scheduling-path.md says why and what else is made equal).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from arkgpu.k8s import contract

PHASES = ("stock", "null", "extender", "hami")
"""The ways a pod is scheduled, in the order each round runs them."""
EXTENDED = ("null", "extender", "hami")
"""Phases whose kube-scheduler calls an extender."""
MODES = ("live", "backlog", "steady")
"""``live``: the scheduler runs while the pods are created as fast as the client goes (first
create to last bind). ``backlog``: every pod is created first, then the scheduler starts
(first to last bind). ``steady``: the scheduler runs while the pods are created at
``steady_rate`` pods/s; its figure is the create-to-bound latency."""
STOCK_SCHEDULER = "arkgpu-bench-stock"
"""Profile name of kube-scheduler alone (the default plugins under another name)."""
NULL_SCHEDULER = "arkgpu-bench-null"
"""Profile name of the ``null`` phase (its own, so that no ArkGPU scheduler takes its pods)."""
HAMI_SCHEDULER = "hami-scheduler"
"""Profile name of the ``hami`` phase (HAMi's chart default ``schedulerName``)."""
HAMI_REGISTER = "hami.io/node-nvidia-register"
"""HAMi's device plugin publishes a node's GPUs here (a JSON list of its DeviceInfo)."""
HAMI_HANDSHAKE = "hami.io/node-handshake"
"""HAMi's device plugin answers the scheduler's health handshake here."""
HAMI_MANAGED = (
    "nvidia.com/gpu",
    "nvidia.com/gpumem",
    "nvidia.com/gpucores",
    "nvidia.com/gpumem-percentage",
    "nvidia.com/priority",
)
"""HAMi's chart's NVIDIA ``managedResources`` (all ``ignoredByScheduler``)."""
HAMI_LOCK_EXPIRY = "1ms"
"""HAMi's node lock (taken by its bind, released by its device plugin, absent here)
expires at once, else every node takes one pod per 5 minutes."""
BENCH_LABEL = "bench.arkgpu.io/run"
"""Label on the benchmark's nodes; its pods select it, so they land on no other node."""
GPU_MODEL = "NVIDIA H100 80GB HBM3"
GPU_MEMORY_MIB = 81_559


@dataclass(frozen=True)
class BenchSettings:
    """One benchmark run (the command line's options)."""

    nodes: int = 1000
    """Nodes created through the API (the issue's must-show: 1,000)."""
    pods: int = 1000
    """Pods created at once in each phase of each round."""
    rounds: int = 3
    """Rounds; each runs every phase once, alternating, so drift in the machine's load
    falls on both. Medians over rounds are reported."""
    gpus_per_node: int = 8
    """Physical GPUs per node (in the inventory annotation)."""
    split_count: int = 10
    """Virtual devices the device plugin advertises per GPU (K8S-INTERFACES.md: default
    10), so a node's ``nvidia.com/gpu`` capacity is ``gpus_per_node * split_count``."""
    whole_every: int = 4
    """Every n-th pod asks for a whole GPU; the others for a fraction (``gpucores``,
    ``gpumem``). 4: a quarter whole, as a training/inference mix."""
    gpucores: int = 25
    """``nvidia.com/gpucores`` of a fractional pod, percent."""
    gpumem_mib: int = 8192
    """``nvidia.com/gpumem`` of a fractional pod, MiB."""
    workers: int = 16
    """Client threads creating nodes and pods (requests in flight at once)."""
    modes: tuple[str, ...] = MODES
    """Which of ``MODES`` to measure."""
    steady_rate: float = 50.0
    """Pods created per second in the ``steady`` mode (default 50: under what every phase
    sustains on the 2-core machine, so the latency is the path's, not a queue's)."""
    phases: tuple[str, ...] = ("stock", "extender")
    """Which of ``PHASES`` to measure (``stock`` alone when the extender is not there)."""
    client_qps: int = 5000
    """kube-scheduler's API client QPS and burst (``clientConnection``), both phases. The
    default, 50 QPS, would cap kube-scheduler alone at 50 binds/s while the extender binds
    with its own client; scheduler benchmarks raise it the same way."""
    bind_timeout_s: float = 600.0
    """Seconds a phase may take to see every pod bound before it fails."""
    extender_settings: tuple[str, ...] = ()
    """Extra ``key = value`` TOML lines for the extender's config file."""
    hami_scheduler: str = ""
    """HAMi's scheduler binary for the ``hami`` phase ("" : no such phase)."""


def prioritizes(settings: BenchSettings, phase: str) -> bool:
    """Whether ``phase``'s kube-scheduler calls prioritize: the null extender (it keeps every
    node), and ArkGPU's when its filter keeps every fitting node (``filter_chosen_only``
    false among the extender settings)."""
    if phase == "null":
        return True
    lines = [s.replace(" ", "").lower() for s in settings.extender_settings]
    return "filter_chosen_only=false" in lines


def inventory(node: str, gpus: int) -> str:
    """The node inventory annotation of ``node``: ``gpus`` healthy H100s with unique UUIDs."""
    items = tuple(
        contract.InventoryGpu(
            index=i,
            uuid=f"GPU-{node}-{i:02d}",
            model=GPU_MODEL,
            memory_mib=GPU_MEMORY_MIB,
        )
        for i in range(gpus)
    )
    return contract.NodeInventory(gpus=items, updated="2026-12-04T00:00:00Z").to_json()


def hami_annotations(node: str, settings: BenchSettings, reported: str) -> dict[str, str]:
    """HAMi's register and handshake annotations of ``node`` as its device plugin writes them
    (the same GPUs as :func:`inventory`; ``reported``: the handshake's time)."""
    devices = [
        {
            "id": f"GPU-{node}-{i:02d}",
            "index": i,
            "count": settings.split_count,
            "devmem": GPU_MEMORY_MIB,
            "devcore": 100,
            "type": GPU_MODEL,
            "mode": "hami-core",
            "health": True,
        }
        for i in range(settings.gpus_per_node)
    ]
    return {HAMI_REGISTER: json.dumps(devices), HAMI_HANDSHAKE: f"Reported_{reported}"}


def node_resources(settings: BenchSettings) -> dict[str, str]:
    """Capacity (= allocatable) of every benchmark node."""
    gpu = settings.gpus_per_node * settings.split_count
    return {"cpu": "64", "memory": "512Gi", "pods": "110", contract.RESOURCE_GPU: str(gpu)}


def node_labels(run: str) -> dict[str, str]:
    """Labels of every benchmark node of run ``run``."""
    return {BENCH_LABEL: run, contract.LABEL_NODE_ENABLED: "true"}


def pod_limits(settings: BenchSettings, phase: str, index: int) -> dict[str, str]:
    """GPU limits of pod ``index``: one GPU, whole or (extender phase) a fraction."""
    limits = {contract.RESOURCE_GPU: "1"}
    if phase in EXTENDED and index % settings.whole_every != 0:
        limits[contract.RESOURCE_GPUCORES] = str(settings.gpucores)
        limits[contract.RESOURCE_GPUMEM] = str(settings.gpumem_mib)
    return limits


def pod_body(name: str, scheduler: str, limits: dict[str, str], run: str) -> dict[str, Any]:
    """A pod for ``scheduler`` asking for ``limits`` on run ``run``'s nodes (never pulled)."""
    container = {
        "name": "main",
        "image": "registry.invalid/arkgpu-bench:never-pulled",
        "resources": {"limits": limits, "requests": {"cpu": "100m", "memory": "128Mi"}},
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "schedulerName": scheduler,
            "containers": [container],
            "nodeSelector": {BENCH_LABEL: run},
            "terminationGracePeriodSeconds": 0,
        },
    }


def scheduler_name(phase: str) -> str:
    """The profile (and pods' ``schedulerName``) of ``phase``."""
    names = {"stock": STOCK_SCHEDULER, "null": NULL_SCHEDULER, "hami": HAMI_SCHEDULER}
    return names.get(phase, contract.SCHEDULER_NAME)


def hami_device_config(settings: BenchSettings) -> dict[str, Any]:
    """HAMi's device configuration as its chart renders it with its default values (the
    ``nvidia`` section; JSON, which every YAML reader takes)."""
    return {
        "nvidia": {
            "resourceCountName": "nvidia.com/gpu",
            "resourceMemoryName": "nvidia.com/gpumem",
            "resourceMemoryPercentageName": "nvidia.com/gpumem-percentage",
            "resourceCoreName": "nvidia.com/gpucores",
            "resourcePriorityName": "nvidia.com/priority",
            "overwriteEnv": False,
            "defaultMemory": 0,
            "defaultCores": 0,
            "defaultGPUNum": 1,
            "preConfiguredDeviceMemory": 0,
            "memoryFactor": 1,
            "deviceSplitCount": settings.split_count,
            "deviceMemoryScaling": 1,
            "deviceCoreScaling": 1,
            "enableNumaTopology": False,
            "gpuCorePolicy": "default",
            "libCudaLogLevel": 1,
            "runtimeClassName": "",
        }
    }


def hami_entry(url: str) -> dict[str, Any]:
    """HAMi's chart's ``extenders`` item (its ``admissionWebhook.enabled: false`` form: plain
    HTTP, as ArkGPU's phase runs)."""
    return {
        "urlPrefix": url,
        "filterVerb": "filter",
        "bindVerb": "bind",
        "enableHTTPS": False,
        "nodeCacheCapable": True,
        "weight": 1,
        "httpTimeout": "30s",
        "managedResources": [{"name": n, "ignoredByScheduler": True} for n in HAMI_MANAGED],
    }


def extender_entry(url: str, prioritize: bool = False) -> dict[str, Any]:
    """The ``extenders`` item of KubeSchedulerConfiguration v1 for ArkGPU's extender: no
    ``prioritizeVerb`` unless ``prioritize`` (the extender's filter keeps one node, so
    kube-scheduler would never call it; the null extender keeps them all and scores them)."""
    return {
        "urlPrefix": url,
        "filterVerb": "filter",
        "prioritizeVerb": "prioritize" if prioritize else "",
        "bindVerb": "bind",
        "weight": 1,
        "enableHTTPS": url.startswith("https:"),
        "nodeCacheCapable": True,
        "httpTimeout": "30s",
        "ignorable": False,
        "managedResources": [
            {"name": name, "ignoredByScheduler": True} for name in contract.MANAGED_RESOURCES
        ],
    }


def scheduler_config(
    kubeconfig: Path,
    phase: str,
    client_qps: int,
    extender_url: str | None,
    prioritize: bool = False,
) -> dict[str, Any]:
    """KubeSchedulerConfiguration v1 of ``phase`` (JSON, which every YAML reader takes);
    ``prioritize``: the extender's prioritize verb is configured.

    Extenders apply to every profile of a scheduler, so each phase runs its own
    kube-scheduler with one profile.
    """
    config: dict[str, Any] = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {
            "kubeconfig": str(kubeconfig),
            "qps": client_qps,
            "burst": client_qps,
        },
        "leaderElection": {"leaderElect": False},
        "profiles": [{"schedulerName": scheduler_name(phase)}],
    }
    if phase in EXTENDED:
        if extender_url is None:
            raise ValueError("the extender phase needs the extender's URL")
        entry = hami_entry if phase == "hami" else partial(extender_entry, prioritize=prioritize)
        config["extenders"] = [entry(extender_url)]
    return config


def extender_toml(kubeconfig: Path, port: int, extra: tuple[str, ...]) -> str:
    """The extender's config file (K8S-INTERFACES.md's common fields), plain HTTP on loopback."""
    lines = [
        f"kubeconfig = {json.dumps(str(kubeconfig))}",
        'listen_address = "127.0.0.1"',
        f"port = {port}",
        *extra,
    ]
    return "\n".join(lines) + "\n"


def overcommitted_gpus(assignments: list[str]) -> int:
    """GPUs given more than their compute or memory by ``assignments`` (annotation JSON).

    Compute: the shares (basis points) on a GPU add up to at most 10000. Memory: the
    caps (MiB; 0 = the whole GPU) add up to at most the GPU's memory.
    """
    share: Counter[tuple[str, int]] = Counter()
    memory: Counter[tuple[str, int]] = Counter()
    for text in assignments:
        assignment = contract.PodAssignment.from_json(text)
        for gpu in assignment.gpus:
            key = (assignment.node, gpu.index)
            share[key] += gpu.share_bp
            memory[key] += gpu.memory_mib or GPU_MEMORY_MIB
    over = {k for k, v in share.items() if v > 10_000}
    over |= {k for k, v in memory.items() if v > GPU_MEMORY_MIB}
    return len(over)
