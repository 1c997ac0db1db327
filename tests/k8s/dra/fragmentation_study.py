"""Study: unallocated GPU share at 100% arrived, DRA through the real kube-scheduler vs FGD.

Run from ``tests/`` (it uses the end-to-end control plane)::

    cd tests && ARKGPU_E2E=1 ../.venv/bin/python -m k8s.dra.fragmentation_study --json out.json

The protocol of ``arkgpu placement run`` (arkgpu.sim.placing, seed 42): the openb default
trace's pods shuffled and tuned to 1.3x the capacity of a scaled-down cluster (every
12th node of the default node list: 100 nodes), node order of the seed. The prefix of
the arrivals whose GPU requests stay within 100% of capacity is submitted to a fresh
etcd/kube-apiserver/kube-scheduler 1.37.2 as ResourceClaims (``cores`` = gpu_milli / 10,
``count`` = num_gpu, ``memory`` 256Mi, never binding on 32 GiB devices) and pods (CPU and
memory requests from the trace), in arrival order; slices are published for every node
with the driver's own code. Once every pod is bound or unschedulable, the allocated
``cores`` over the capacity give the unallocated share; the simulator gives FGD's (and
others') at its 100% checkpoint on the same nodes and arrivals.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from kubernetes import client as k8s

from arkgpu.k8s.dra.publishing import KubernetesSlices, Publisher
from arkgpu.k8s.dra.slices import devices
from arkgpu.k8s.gpus import AssumedGpus
from arkgpu.model.resources import Node, Pod
from arkgpu.sim.placing import ExperimentConfig, arrivals_for, nodes_for, run_placement
from arkgpu.traces.catalog import default_node_list, resolve_pod_trace
from arkgpu.traces.openb import load_nodes, load_pods
from e2e.controlplane import ControlPlaneConfig, build_control_plane, running_control_plane
from e2e.nodes import create_gpu_node

DRIVER = "gpu.arkgpu.io"
STRIDE = 12
"""Every 12th node of the default list (1213 nodes): 100 nodes, the same model mix."""


def cluster(seed: int) -> tuple[list[Node], list[Pod], ExperimentConfig]:
    """The scaled-down nodes (in the seed's order), the trace's pods, the protocol."""
    nodes = load_nodes(default_node_list())[::STRIDE][:100]
    config = ExperimentConfig(seed=seed)
    return nodes_for(nodes, config), load_pods(resolve_pod_trace("default").path), config


def within_capacity(arrivals: list[Pod], capacity_milli: int) -> list[Pod]:
    """The arrivals the simulator has placed or refused at its 100% checkpoint."""
    out, total = [], 0
    for pod in arrivals:
        total += pod.total_gpu_milli
        if total > capacity_milli:
            break
        out.append(pod)
    return out


def _node(api: k8s.ApiClient, node: Node) -> None:
    create_gpu_node(api, node.name, 0)
    resources = {"cpu": f"{node.cpu_milli}m", "memory": f"{node.memory_mib}Mi", "pods": "250"}
    status = {"capacity": resources, "allocatable": resources}
    k8s.CoreV1Api(api).patch_node_status(node.name, {"status": status})
    if node.num_gpu:
        found = AssumedGpus(node.num_gpu, 32_768).scan()
        Publisher(KubernetesSlices(api), node.name, DRIVER).reconcile(devices(found, 256, 1))


def _submit(api: k8s.ApiClient, namespace: str, index: int, pod: Pod) -> None:
    name = f"p{index:05d}"
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "main",
                "image": "registry.invalid/never-pulled",
                "resources": {
                    "requests": {"cpu": f"{pod.cpu_milli}m", "memory": f"{pod.memory_mib}Mi"}
                },
            }
        ]
    }
    if pod.num_gpu:
        request = {
            "name": "gpu",
            "exactly": {
                "deviceClassName": DRIVER,
                "count": pod.num_gpu,
                "capacity": {"requests": {"memory": "256Mi", "cores": str(pod.gpu_milli // 10)}},
            },
        }
        claim = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": name},
            "spec": {"devices": {"requests": [request]}},
        }
        k8s.ResourceV1Api(api).create_namespaced_resource_claim(namespace, claim)
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": name}]
        spec["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}
    k8s.CoreV1Api(api).create_namespaced_pod(namespace, body)


def _settled(api: k8s.ApiClient, namespace: str, count: int) -> tuple[int, int] | None:
    """(bound, unschedulable) once every pod is one or the other."""
    pods = k8s.CoreV1Api(api).list_namespaced_pod(namespace).items
    bound = sum(1 for p in pods if p.spec.node_name)
    refused = sum(
        1
        for p in pods
        if not p.spec.node_name
        and any(c.reason == "Unschedulable" for c in (p.status.conditions or []))
    )
    return (bound, refused) if len(pods) == count and bound + refused == count else None


def _allocated_cores(api: k8s.ApiClient, namespace: str) -> int:
    raw = k8s.ResourceV1Api(api).list_namespaced_resource_claim(namespace, _preload_content=False)
    total = 0
    for claim in json.loads(raw.data)["items"]:
        allocation = (claim.get("status") or {}).get("allocation") or {}
        for result in allocation.get("devices", {}).get("results", []):
            total += int(result["consumedCapacity"]["cores"])
    return total


def run_dra(nodes: list[Node], submitted: list[Pod], timeout_s: float) -> dict[str, Any]:
    """Submit the pods to a fresh control plane; the allocation once the scheduler settles."""
    work = Path(tempfile.mkdtemp(prefix="arkgpu-dra-study-"))
    plane_config = ControlPlaneConfig(bin_dir=build_control_plane(), workdir=work)
    try:
        return _run_dra(plane_config, nodes, submitted, timeout_s)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _run_dra(
    plane_config: ControlPlaneConfig, nodes: list[Node], submitted: list[Pod], timeout_s: float
) -> dict[str, Any]:
    with running_control_plane(plane_config) as plane, plane.api_client() as api:
        deviceclass = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": DRIVER},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
        }
        k8s.ResourceV1Api(api).create_device_class(deviceclass)
        namespace = f"study-{uuid.uuid4().hex[:6]}"
        core = k8s.CoreV1Api(api)
        core.create_namespace({"metadata": {"name": namespace}})
        core.create_namespaced_service_account(namespace, {"metadata": {"name": "default"}})
        t0 = time.monotonic()
        for node in nodes:
            _node(api, node)
        t_nodes = time.monotonic() - t0
        for i, pod in enumerate(submitted):
            _submit(api, namespace, i, pod)
        t_submit = time.monotonic() - t0 - t_nodes
        deadline = time.monotonic() + timeout_s
        while (settled := _settled(api, namespace, len(submitted))) is None:
            if time.monotonic() > deadline:
                raise SystemExit("the scheduler did not settle in time")
            time.sleep(2.0)
        cores = _allocated_cores(api, namespace)
    capacity = 100 * sum(n.num_gpu for n in nodes)
    return {
        "unallocated_pct": 100.0 - 100.0 * cores / capacity,
        "pods_bound": settled[0],
        "pods_unschedulable": settled[1],
        "nodes_and_slices_s": round(t_nodes, 1),
        "submit_s": round(t_submit, 1),
        "settle_s": round(time.monotonic() - t0 - t_nodes - t_submit, 1),
    }


def main() -> int:
    """Run the study; print a table, write JSON when asked."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--timeout-s", type=float, default=900.0)
    parser.add_argument("--policies", default="fgd,bestfit,packing,random")
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()
    nodes, pods, config = cluster(args.seed)
    capacity_milli = 1000 * sum(n.num_gpu for n in nodes)
    submitted = within_capacity(arrivals_for(pods, capacity_milli, config), capacity_milli)
    report: dict[str, Any] = {
        "nodes": len(nodes),
        "gpus": sum(n.num_gpu for n in nodes),
        "pods_submitted": len(submitted),
        "gpu_pods_submitted": sum(1 for p in submitted if p.num_gpu),
        "seed": config.seed,
    }
    for policy in args.policies.split(","):
        result = run_placement(nodes, pods, policy, config)
        report[f"sim_{policy}_unallocated_pct"] = result.at(100)
    report["dra_kube_scheduler"] = run_dra(nodes, submitted, args.timeout_s)
    text = json.dumps(report, indent=2)
    print(text)
    if args.json is not None:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
