"""Study: unallocated GPU share at 100% arrived, through the real kube-scheduler, three ways.

Run from ``tests/`` (it uses the end-to-end control plane)::

    cd tests && ARKGPU_E2E=1 nice -n 5 ../.venv/bin/python -m k8s.dra.fragmentation_study \\
        --seed 42 --json out.json

The protocol of ``arkgpu placement run`` (arkgpu.sim.placing): the openb default trace's
pods shuffled and tuned to 1.3x the capacity of a scaled-down cluster (every 12th node of
the default node list: 100 nodes), node order of the seed. The prefix of the arrivals
whose GPU requests stay within 100% of capacity is submitted, in arrival order, to one
fresh etcd/kube-apiserver/kube-scheduler 1.37.2, once per path
(:mod:`k8s.dra.fragmentation_paths`: ``dra``, ``dra_pack``, ``extender``), each on its own
copy of the nodes, one path after the other. Once every pod of a path is bound or
unschedulable, the allocated GPU compute over the capacity gives its unallocated share;
the simulator gives FGD's (and others') at its 100% checkpoint on the same nodes and
arrivals ("simulated").
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from kubernetes import client as k8s

from arkgpu.model.resources import Node, Pod
from arkgpu.sim.placing import ExperimentConfig, arrivals_for, nodes_for, run_placement
from arkgpu.traces.catalog import default_node_list, resolve_pod_trace
from arkgpu.traces.openb import load_nodes, load_pods
from e2e.controlplane import (
    ControlPlane,
    ControlPlaneConfig,
    build_control_plane,
    running_control_plane,
)
from e2e.kube_types import body, filled

from .fragmentation_paths import (
    DRIVER,
    allocated_milli,
    create_node,
    extender_scheduler,
    reordering,
    submit,
)

STRIDE = 12
"""Every 12th node of the default list (1213 nodes): 100 nodes, the same model mix."""
PATHS = ("dra", "dra_pack", "extender", "extender_all")


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


QUIET_S = 10.0
"""Seconds the (bound, unschedulable) counts must hold before a path counts as settled:
a pod refused once may still be retried (backoff) and bound."""


def _counts(api: k8s.ApiClient, namespace: str) -> tuple[int, int, int, Counter[str]]:
    """(pods, bound, unschedulable, the unschedulable pods' reasons)."""
    pods = k8s.CoreV1Api(api).list_namespaced_pod(namespace).items
    bound = sum(1 for p in pods if filled(p.spec).node_name)
    reasons: Counter[str] = Counter()
    for p in pods:
        for c in filled(p.status).conditions or []:
            if not filled(p.spec).node_name and c.reason == "Unschedulable":
                reasons[str(c.message)[:160]] += 1
    return len(pods), bound, sum(reasons.values()), reasons


def _settle(
    api: k8s.ApiClient, namespace: str, count: int, timeout_s: float
) -> tuple[int, int, Counter[str]]:
    """Waits until every pod is bound or unschedulable and that holds for QUIET_S."""
    deadline = time.monotonic() + timeout_s
    last, since = None, time.monotonic()
    while True:
        pods, bound, refused, reasons = _counts(api, namespace)
        now = time.monotonic()
        if (pods, bound, refused) != last:
            last, since = (pods, bound, refused), now
        if pods == count and bound + refused == count and now - since >= QUIET_S:
            return bound, refused, reasons
        if now > deadline:
            raise SystemExit(f"{namespace}: the scheduler did not settle in time")
        time.sleep(2.0)


def _namespace(api: k8s.ApiClient, path: str) -> str:
    name = f"study-{path.replace('_', '-')}"
    core = k8s.CoreV1Api(api)
    core.create_namespace(body({"metadata": {"name": name}}))
    core.create_namespaced_service_account(name, body({"metadata": {"name": "default"}}))
    return name


def run_path(
    plane: ControlPlane,
    bin_dir: Path,
    path: str,
    nodes: list[Node],
    submitted: list[Pod],
    timeout_s: float,
) -> dict[str, Any]:
    """One path on its own copy of the nodes: the allocation once the scheduler settles."""
    with plane.api_client() as api, ExitStack() as stack:
        namespace = _namespace(api, path)
        t0 = time.monotonic()
        names = {create_node(api, path, node): node for node in nodes}
        if path.startswith("extender"):
            stack.enter_context(extender_scheduler(plane, bin_dir))
        if path == "dra_pack":
            stack.enter_context(reordering(api, names))
        t_nodes = time.monotonic() - t0
        for i, pod in enumerate(submitted):
            submit(api, path, namespace, i, pod)
        t_submit = time.monotonic() - t0 - t_nodes
        settled = _settle(api, namespace, len(submitted), timeout_s)
        milli = allocated_milli(api, path, namespace)
    capacity_milli = 1000 * sum(n.num_gpu for n in nodes)
    return {
        "unallocated_pct": 100.0 - 100.0 * milli / capacity_milli,
        "pods_bound": settled[0],
        "pods_unschedulable": settled[1],
        "unschedulable_reasons": dict(settled[2].most_common(3)),
        "nodes_s": round(t_nodes, 1),
        "submit_s": round(t_submit, 1),
        "settle_s": round(time.monotonic() - t0 - t_nodes - t_submit - QUIET_S, 1),
    }


def run_all(
    paths: list[str], nodes: list[Node], submitted: list[Pod], timeout_s: float
) -> dict[str, Any]:
    """Every path, one after the other, on one fresh control plane."""
    work = Path(tempfile.mkdtemp(prefix="arkgpu-dra-study-"))
    bin_dir = build_control_plane()
    plane_config = ControlPlaneConfig(bin_dir=bin_dir, workdir=work)
    try:
        with running_control_plane(plane_config) as plane, plane.api_client() as api:
            deviceclass = {
                "metadata": {"name": DRIVER},
                "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
            }
            k8s.ResourceV1Api(api).create_device_class(body(deviceclass))
            return {p: run_path(plane, bin_dir, p, nodes, submitted, timeout_s) for p in paths}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    """Run the study; print the report, write JSON when asked."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--timeout-s", type=float, default=900.0)
    parser.add_argument("--policies", default="fgd,arkgpu,bestfit,packing,random")
    parser.add_argument("--paths", default=",".join(PATHS))
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()
    paths = [p for p in args.paths.split(",") if p]
    if unknown := set(paths) - set(PATHS):
        parser.error(f"--paths: unknown {sorted(unknown)} (known: {', '.join(PATHS)})")
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
    report.update(run_all(paths, nodes, submitted, args.timeout_s))
    text = json.dumps(report, indent=2)
    print(text)
    if args.json is not None:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
