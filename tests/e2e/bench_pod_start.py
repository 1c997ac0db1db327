"""Pod create to container running on the real node, for many GPU pods created at once.

``PYTHONPATH=tests python -m tests.e2e.bench_pod_start --pods 50 [--plugin P] [--json OUT]``
(``P``: ``chart``, ``arkgpu`` or ``cdi``; as root, from the repository root, after ``make
node control-plane helm``; ``tests`` on the path for the chart tests' helpers) starts a
control plane and the real node (``realnode``) and a device plugin: ``chart`` is
ArkGPU installed by its chart as the chart tests install it (``node_chart``; split
count raised to ``--pods``), and the pods are written for HAMi (``nvidia.com/gpu: 1``,
``gpumem`` 100, ``gpucores`` 1): the webhook, kube-scheduler with the extender, the
device plugin and the node runtime all run as the chart's pods; ``arkgpu`` is ArkGPU's
device plugin as a host process (``node_arkgpu``: each pod gets its region and the
limiter through ``/etc/ld.so.preload``; the pods carry an assignment as the extender
writes it, 100 MiB and 1% of GPU ``i % 2``, and are bound to the node), ``cdi`` the
stand-in for NVIDIA's CDI-mode plugin (no limiter). It creates ``--pods`` pods in
one burst (each runs the CUDA memory query, then sleeps) and measures for each pod
the time from its create call returning to the first watch event that shows its
container running (client clock, millisecond resolution). Prints p50, p99, max
and the load average, and the GPU memory pod ``gpu-000`` saw (100 MiB: the limiter
was loaded; the GPU's whole memory: it was not).

What the figure covers: the kubelet's admission, the device plugin's Allocate and
PreStartContainer, the sandbox (pause, CNI), CDI injection by containerd and
runc's start; with ``chart`` also the webhook's admission and the scheduling (the
stock kube-scheduler calling the extender, and the binding). It does not include an
image pull (images are imported); with ``arkgpu`` and ``cdi``, not the webhook or
the scheduler either (pods are bound by the benchmark).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from contextlib import AbstractContextManager, ExitStack
from pathlib import Path

import yaml
from kubernetes import client as k8s
from kubernetes import watch

from arkgpu.k8s.contract import ANNOTATION_ASSIGNMENT, RESOURCE_GPU, AssignedGpu, PodAssignment

from .controlplane import running_control_plane
from .kube_types import filled
from .node_arkgpu import serving_arkgpu_plugin
from .node_cdi_plugin import serving_cdi_plugin
from .node_chart import VALUES, Chart, build_arkgpu_image, build_scheduler_image, installed_chart
from .node_images import WORKLOAD_IMAGE, build_workload_image
from .realnode import RealNode, RealNodeConfig, build_node, node_plane_config, running_node

NAMESPACE = "bench"
HAMI = "hami"
"""The resource name ``measure`` is given for the HAMi pods of ``--plugin chart``."""
TIMEOUT_S = 600.0
"""Bound for all pods to run (a broken node ends the run with what it measured)."""


HAMI_LIMITS = {RESOURCE_GPU: "1", "nvidia.com/gpumem": "100", "nvidia.com/gpucores": "1"}
"""A pod written for HAMi (``--plugin chart``): one share, 100 MiB, 1% of a GPU."""


def _pod(name: str, resource: str, node: RealNode | None, gpu: int) -> k8s.V1Pod:
    limits = HAMI_LIMITS if resource == HAMI else {resource: "1"}
    container = k8s.V1Container(
        name="main",
        image=WORKLOAD_IMAGE,
        image_pull_policy="Never",
        command=["/bin/sh", "-c", "echo info | arkgpu-cubench script && exec sleep 3600"],
        resources=k8s.V1ResourceRequirements(limits=limits),
    )
    spec = k8s.V1PodSpec(containers=[container], termination_grace_period_seconds=0)
    meta = k8s.V1ObjectMeta(name=name)
    if node is not None:  # ArkGPU's plugin: placed as the extender places it
        assigned = AssignedGpu(gpu, node.gpu.uuid(gpu), 100, 100)
        meta.annotations = {ANNOTATION_ASSIGNMENT: PodAssignment(node.name, (assigned,)).to_json()}
        spec.node_name = node.name
    return k8s.V1Pod(metadata=meta, spec=spec)


def _chart(node: RealNode, work: Path, pods: int) -> AbstractContextManager[Chart]:
    """The chart installed with the chart tests' values, its split count raised to ``pods``
    across the node's two GPUs, and its images imported."""
    node.import_image(build_arkgpu_image(work / "arkgpu.tar"))
    node.import_image(build_scheduler_image(work / "scheduler.tar", node))
    values = yaml.safe_load(VALUES.read_text(encoding="utf-8"))
    split = max(10, -(-pods // node.gpu.config.gpus))
    values["node"]["devicePlugin"]["splitCount"] = split
    path = work / "values.yaml"
    path.write_text(yaml.safe_dump(values), encoding="utf-8")
    return installed_chart(node, path)


def _running(pod: k8s.V1Pod) -> bool:
    statuses = filled(pod.status).container_statuses or []
    return bool(statuses) and filled(statuses[0].state).running is not None


def measure(core: k8s.CoreV1Api, resource: str, pods: int, node: RealNode | None) -> list[float]:
    """Seconds from create to running for each pod (all created in one burst)."""
    created: dict[str, float] = {}
    for i in range(pods):
        name = f"gpu-{i:03d}"
        core.create_namespaced_pod(NAMESPACE, _pod(name, resource, node, i % 2))
        created[name] = time.monotonic()
    started: dict[str, float] = {}
    # kubernetes.watch has no annotations.
    stream = watch.Watch()  # type: ignore[no-untyped-call]
    deadline = time.monotonic() + TIMEOUT_S
    events = stream.stream(  # type: ignore[no-untyped-call]
        core.list_namespaced_pod, NAMESPACE, timeout_seconds=int(TIMEOUT_S)
    )
    for event in events:
        pod = event["object"]
        name = pod.metadata.name
        if name in created and name not in started and _running(pod):
            started[name] = time.monotonic()
        if len(started) == pods or time.monotonic() > deadline:
            stream.stop()  # type: ignore[no-untyped-call]
    return sorted(started[n] - created[n] for n in started)


def summary(seconds: list[float], pods: int) -> dict[str, object]:
    """p50, p99 and max in seconds, how many pods ran, and the load average."""
    p99 = (
        statistics.quantiles(seconds, n=100, method="inclusive")[98]
        if len(seconds) > 1
        else seconds[0]
    )
    return {
        "pods": pods,
        "running": len(seconds),
        "p50_s": round(statistics.median(seconds), 3),
        "p99_s": round(p99, 3),
        "max_s": round(max(seconds), 3),
        "loadavg": os.getloadavg(),
    }


def main(argv: list[str] | None = None) -> int:
    """Runs the benchmark (see the module's text)."""
    parser = argparse.ArgumentParser(prog="python -m tests.e2e.bench_pod_start")
    parser.add_argument("--pods", type=int, default=50, help="GPU pods created at once")
    parser.add_argument("--plugin", choices=("chart", "arkgpu", "cdi"), default="chart")
    parser.add_argument("--json", type=Path, help="also write the summary here")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bench-pod-start-"))
    plane_cfg = node_plane_config(work / "plane")
    with (
        running_control_plane(plane_cfg) as plane,
        running_node(plane, build_node(), RealNodeConfig()) as node,
        plane.api_client() as api,
        ExitStack() as plugin,
    ):
        node.import_image(build_workload_image(work))
        if args.plugin == "chart":
            plugin.enter_context(_chart(node, work, args.pods))
            resource, placed = HAMI, None
        elif args.plugin == "arkgpu":
            plugin.enter_context(serving_arkgpu_plugin(node, split_count=args.pods))
            resource, placed = RESOURCE_GPU, node
        else:
            resource = plugin.enter_context(serving_cdi_plugin(node.gpu, 0, args.pods))
            placed = None
        core = k8s.CoreV1Api(api)
        core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=NAMESPACE)))
        while not core.list_namespaced_service_account(NAMESPACE).items:
            time.sleep(0.5)
        counted = RESOURCE_GPU if resource == HAMI else resource
        while (
            int((filled(core.read_node(node.name).status).allocatable or {}).get(counted, "0"))
            < args.pods
        ):
            time.sleep(0.5)
        result = summary(measure(core, resource, args.pods, placed), args.pods)
        result["plugin"] = args.plugin
        first = core.read_namespaced_pod_log("gpu-000", NAMESPACE).split()
        result["gpu_000_memory_mib"] = int(first[1]) >> 20 if len(first) > 1 else None
    print(json.dumps(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0 if result["running"] == args.pods else 1


if __name__ == "__main__":
    raise SystemExit(main())
