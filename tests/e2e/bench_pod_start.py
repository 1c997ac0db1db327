"""Pod create to container running on the real node, for many GPU pods created at once.

``python -m tests.e2e.bench_pod_start --pods 50 [--json OUT]`` (as root, from the
repository root, after ``make node control-plane``) starts a control plane and the
real node (``realnode``), registers the stand-in CDI device plugin with enough
replicas of fake GPU 0, creates ``--pods`` pods in one burst (each runs the fake
driver's memory query, then sleeps), and measures for each pod the time from its
create call returning to the first watch event that shows its container running
(client clock, millisecond resolution). Prints p50, p99 and max, the load average.

What the figure covers: the kubelet's admission, the device plugin's Allocate, the
sandbox (pause, CNI), CDI injection by containerd and runc's start. It does not
include an image pull (images are imported) nor ArkGPU's own plugin and limiter
while those are not installed as the chart's pods here (see docs/studies/real-node.md).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from kubernetes import client as k8s
from kubernetes import watch

from .controlplane import ControlPlaneConfig, build_control_plane, running_control_plane
from .node_cdi_plugin import serving_cdi_plugin
from .node_images import WORKLOAD_IMAGE, build_workload_image
from .realnode import RealNodeConfig, build_node, running_node

NAMESPACE = "bench"
TIMEOUT_S = 600.0
"""Bound for all pods to run (a broken node ends the run with what it measured)."""


def _pod(name: str, resource: str) -> k8s.V1Pod:
    container = k8s.V1Container(
        name="main",
        image=WORKLOAD_IMAGE,
        image_pull_policy="Never",
        command=["/bin/sh", "-c", "echo info | arkgpu-cubench script && exec sleep 3600"],
        resources=k8s.V1ResourceRequirements(limits={resource: "1"}),
    )
    spec = k8s.V1PodSpec(containers=[container], termination_grace_period_seconds=0)
    return k8s.V1Pod(metadata=k8s.V1ObjectMeta(name=name), spec=spec)


def _running(pod: k8s.V1Pod) -> bool:
    statuses = pod.status.container_statuses or []
    return bool(statuses) and statuses[0].state.running is not None


def measure(core: k8s.CoreV1Api, resource: str, pods: int) -> list[float]:
    """Seconds from create to running for each pod (all created in one burst)."""
    created: dict[str, float] = {}
    for i in range(pods):
        name = f"gpu-{i:03d}"
        core.create_namespaced_pod(NAMESPACE, _pod(name, resource))
        created[name] = time.monotonic()
    started: dict[str, float] = {}
    stream = watch.Watch()
    deadline = time.monotonic() + TIMEOUT_S
    for event in stream.stream(core.list_namespaced_pod, NAMESPACE, timeout_seconds=int(TIMEOUT_S)):
        pod = event["object"]
        name = pod.metadata.name
        if name in created and name not in started and _running(pod):
            started[name] = time.monotonic()
        if len(started) == pods or time.monotonic() > deadline:
            stream.stop()
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
    parser.add_argument("--json", type=Path, help="also write the summary here")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bench-pod-start-"))
    plane_cfg = ControlPlaneConfig(bin_dir=build_control_plane(), workdir=work / "plane")
    with (
        running_control_plane(plane_cfg) as plane,
        running_node(plane, build_node(), RealNodeConfig()) as node,
        serving_cdi_plugin(node.gpu, gpu_index=0, replicas=args.pods) as resource,
        plane.api_client() as api,
    ):
        node.import_image(build_workload_image(work))
        core = k8s.CoreV1Api(api)
        core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=NAMESPACE)))
        while not core.list_namespaced_service_account(NAMESPACE).items:
            time.sleep(0.5)
        while (
            int((core.read_node(node.name).status.allocatable or {}).get(resource, "0")) < args.pods
        ):
            time.sleep(0.5)
        result = summary(measure(core, resource, args.pods), args.pods)
    print(json.dumps(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0 if result["running"] == args.pods else 1


if __name__ == "__main__":
    raise SystemExit(main())
