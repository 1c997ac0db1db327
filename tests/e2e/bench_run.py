"""The control-plane benchmark's rounds: scheduler (and extender) up, pods at once, all bound.

Each phase (``bench_config``) runs on the same control plane, one after the
other: its own kube-scheduler (and, for ``extender``, ``arkgpu extender run``;
for ``null``, ``bench_null_extender``) is started, the pods are created at once,
the watch (``bench_watch``) sees each bound, the processes stop and the pods
are deleted. The command line is ``bench_scheduling``.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kubernetes import client as k8s

from arkgpu.k8s import contract

from . import bench_config as cfg
from . import nodes as api_nodes
from . import processes
from .bench_watch import PhaseResult, phase_result, watching_binds
from .controlplane import ControlPlane, free_port, running_scheduler

EXTENDER_READY_TIMEOUT_S = 300.0
"""Seconds the extender may take to list 1,000 nodes and answer ``/readyz`` (loaded box)."""
HAMI_SETTLE_S = 10.0
"""Seconds HAMi's extender is given after ``/healthz`` to list the nodes before kube-scheduler
starts (it has no readiness of its own; ArkGPU's ``/readyz`` waits for its first lists)."""
CLEANUP_TIMEOUT_S = 300.0
"""Seconds the deletion of a phase's pods may take."""


@dataclass(frozen=True)
class Bench:
    """Where one benchmark runs."""

    plane: ControlPlane
    bin_dir: Path
    """The control plane's binaries (kube-scheduler)."""
    api: k8s.ApiClient
    settings: cfg.BenchSettings
    run: str
    """This run's id: label of its nodes, name of its namespace."""
    progress: Callable[[str], None]

    @property
    def namespace(self) -> str:
        """The namespace of every pod of this run."""
        return f"bench-{self.run}"


def bench_client(plane: ControlPlane, connections: int) -> k8s.ApiClient:
    """The admin client with a pool of ``connections`` (the default, 5 per CPU, is fewer
    than the worker threads on 2 CPUs: requests would queue for a connection)."""
    conf = k8s.Configuration()
    conf.host = plane.server
    conf.ssl_ca_cert = str(plane.ca)
    conf.cert_file = str(plane.admin.cert)
    conf.key_file = str(plane.admin.key)
    conf.connection_pool_maxsize = connections
    return k8s.ApiClient(conf)


def create_bench_nodes(bench: Bench) -> float:
    """The run's nodes, created concurrently; returns the seconds taken."""
    settings = bench.settings
    resources = cfg.node_resources(settings)
    labels = cfg.node_labels(bench.run)
    reported = time.strftime("%Y-%m-%d %H:%M:%S")
    bodies = [
        api_nodes.node_body(
            name,
            resources,
            labels,
            {
                contract.ANNOTATION_INVENTORY: cfg.inventory(name, settings.gpus_per_node),
                **(cfg.hami_annotations(name, settings, reported) if _hami(settings) else {}),
            },
        )
        for name in (f"bench-{bench.run}-{i:05d}" for i in range(settings.nodes))
    ]
    return api_nodes.create_nodes(bench.api, bodies, settings.workers)


def _hami(settings: cfg.BenchSettings) -> bool:
    return "hami" in settings.phases


def hami_argv(bench: Bench, port: int) -> list[str]:
    """HAMi's scheduler extender as its chart starts it (plain HTTP, no leader election, its
    chart's device configuration), on the admin kubeconfig, its node lock expiring at once
    and its API client's rate limit that of the phases' kube-scheduler (``client_qps``)."""
    qps = bench.settings.client_qps
    devices = bench.plane.workdir / "hami-device-config.yaml"
    devices.write_text(json.dumps(cfg.hami_device_config(bench.settings), indent=2))
    return [
        "env",
        f"KUBECONFIG={bench.plane.admin_kubeconfig}",
        f"HAMI_NODELOCK_EXPIRE={cfg.HAMI_LOCK_EXPIRY}",
        bench.settings.hami_scheduler,
        f"--http_bind=127.0.0.1:{port}",
        f"--scheduler-name={cfg.HAMI_SCHEDULER}",
        f"--device-config-file={devices}",
        f"--metrics-bind-address=127.0.0.1:{free_port()}",
        "--leader-elect=false",
        f"--node-lock-timeout={cfg.HAMI_LOCK_EXPIRY}",
        f"--kube-qps={qps}",
        f"--kube-burst={qps}",
    ]


def extender_argv(bench: Bench, phase: str, port: int) -> list[str]:
    """The command line of ``phase``'s extender: ArkGPU's, the null one or HAMi's."""
    if phase == "hami":
        return hami_argv(bench, port)
    kubeconfig = bench.plane.admin_kubeconfig
    if phase == "null":
        null = ["-m", "tests.e2e.bench_null_extender", f"--kubeconfig={kubeconfig}"]
        return [sys.executable, *null, f"--port={port}"]
    config = bench.plane.workdir / f"extender-{port}.toml"
    config.write_text(cfg.extender_toml(kubeconfig, port, bench.settings.extender_settings))
    return [str(Path(sys.executable).with_name("arkgpu")), "extender", "run", f"--config={config}"]


def start_extender(bench: Bench, phase: str, stack: ExitStack) -> tuple[str, int]:
    """``phase``'s extender on a free loopback port, ready; returns its URL and pid."""
    port = free_port()
    argv = extender_argv(bench, phase, port)
    child = processes.start(f"{phase}-{port}", argv, bench.plane.workdir / "logs")
    stack.callback(processes.stop, child, 15.0)
    url = f"http://127.0.0.1:{port}"
    ready = f"{url}/healthz" if phase == "hami" else f"{url}/readyz"
    processes.wait_until(
        child, lambda: processes.http_ok(ready, None), "/readyz", EXTENDER_READY_TIMEOUT_S
    )
    if phase == "hami":  # its /readyz says nothing of its node cache: give it time to fill
        time.sleep(HAMI_SETTLE_S)
    return url, child.popen.pid


@dataclass(frozen=True)
class Started:
    """A phase's processes, ready."""

    ready: float
    """When the scheduler answered (monotonic s)."""
    pids: dict[str, int]
    """``scheduler`` (and ``extender``), ``apiserver``, ``etcd`` -> process id, for their CPU
    time."""


def start_scheduler(bench: Bench, phase: str, stack: ExitStack) -> Started:
    """The phase's kube-scheduler (and, first, the extender), both ready."""
    pids = {}
    url = None
    if phase in cfg.EXTENDED:
        url, pids["extender"] = start_extender(bench, phase, stack)
    workdir = bench.plane.workdir
    settings = bench.settings
    config = cfg.scheduler_config(
        workdir / "scheduler.kubeconfig",
        phase,
        settings.client_qps,
        url,
        cfg.prioritizes(settings, phase),
    )
    path = workdir / f"scheduler-{phase}.json"
    path.write_text(json.dumps(config, indent=2))
    args = (f"--config={path}",)
    log = f"scheduler-{phase}"
    child = stack.enter_context(running_scheduler(bench.plane, bench.bin_dir, args, log))
    pids["scheduler"] = child.popen.pid
    pids.update(control_plane_pids())
    return Started(time.monotonic(), pids)


def control_plane_pids() -> dict[str, int]:
    """``apiserver`` and ``etcd``: this process's children running them (their CPU per pod
    is the cost of the API writes and watches each phase makes)."""
    found = {}
    for tasks in Path("/proc/self/task").iterdir():
        for pid in (tasks / "children").read_text().split():
            try:
                argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
            except OSError:
                continue
            name = Path(argv0.decode(errors="replace")).name
            if name in ("kube-apiserver", "etcd"):
                found["apiserver" if name == "kube-apiserver" else "etcd"] = int(pid)
    return found


def cpu_seconds(pids: dict[str, int]) -> dict[str, float]:
    """CPU time (user + system) each process has used so far, seconds (Linux /proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    used = {}
    for name, pid in pids.items():
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        used[name] = (int(fields[11]) + int(fields[12])) / tick
    return used


def pod_bodies(bench: Bench, phase: str, prefix: str, count: int) -> list[dict[str, Any]]:
    """``count`` pods of ``phase`` named ``<prefix>-<i>``."""
    scheduler = cfg.scheduler_name(phase)
    return [
        cfg.pod_body(
            f"{prefix}-{i:05d}", scheduler, cfg.pod_limits(bench.settings, phase, i), bench.run
        )
        for i in range(count)
    ]


def warm_up(bench: Bench, phase: str) -> None:
    """One pod through the fresh scheduler (caches synced, connections open), then gone."""
    with watching_binds(bench.api, bench.namespace) as watch:
        sent = api_nodes.create_pods(
            bench.api, bench.namespace, pod_bodies(bench, phase, "warm-up", 1), 1
        )
        watch.wait(set(sent), bench.settings.bind_timeout_s)
    api_nodes.delete_pods(bench.api, bench.namespace, CLEANUP_TIMEOUT_S)


def run_phase(bench: Bench, phase: str, mode: str, round_: int) -> PhaseResult:
    """One measured phase: scheduler up, pods created (at once, or at the steady rate), all
    bound; then cleaned up.

    CPU per pod counts from the scheduler's readiness (live and steady: after the warm-up
    pod; backlog: with the pods already there) until the last bind.
    """
    settings = bench.settings
    bodies = pod_bodies(bench, phase, f"{phase}-r{round_}", settings.pods)
    rate = settings.steady_rate if mode == "steady" else 0.0
    with ExitStack() as stack:
        if mode != "backlog":
            started = start_scheduler(bench, phase, stack)
            warm_up(bench, phase)
            cpu = cpu_seconds(started.pids)
        watch = stack.enter_context(watching_binds(bench.api, bench.namespace))
        sent = api_nodes.create_pods(bench.api, bench.namespace, bodies, settings.workers, rate)
        if mode == "backlog":
            started = start_scheduler(bench, phase, stack)
            cpu = cpu_seconds(started.pids)
        watch.wait(set(sent), settings.bind_timeout_s)
        used = cpu_seconds(started.pids)
        per_pod = {name: 1000 * (used[name] - cpu[name]) / len(sent) for name in used}
        result = phase_result((phase, mode, round_), sent, watch, started.ready, per_pod)
    api_nodes.delete_pods(bench.api, bench.namespace, CLEANUP_TIMEOUT_S)
    return result


def describe(result: PhaseResult) -> str:
    """One progress line."""
    return (
        f"round {result.round} {result.mode:7} {result.phase:8}: {result.pods} pods, "
        f"{result.pods_per_s:7.1f} pods/s, binds {result.binds_per_s:7.1f}/s, "
        f"creates {result.creates_per_s:6.1f}/s, latency p50 {result.latency_p50_ms:7.0f} ms "
        f"p99 {result.latency_p99_ms:7.0f} ms, {result.nodes_used} nodes, "
        f"{result.assigned} assigned, {result.overcommitted_gpus} GPUs over-committed, CPU ms/pod "
        + ", ".join(f"{name} {ms:.1f}" for name, ms in result.cpu_ms_per_pod.items())
    )


def summarise(results: list[PhaseResult]) -> dict[str, Any]:
    """Per mode: medians over rounds of each phase, and the ratios extender/stock.

    For each phase P with an extender: ``P_ratio_<figure>`` divides P's median by stock's;
    ``P_round_ratios_<figure>`` divides within each round (the phases ran a minute apart,
    under about the same load from the rest of the machine) and
    ``P_median_round_ratio_<figure>`` is their median.
    """
    figures = ("pods_per_s", "binds_per_s", "creates_per_s", "latency_p50_ms", "latency_p99_ms")
    summary: dict[str, Any] = {}
    for mode in sorted({r.mode for r in results}):
        chosen = {(r.phase, r.round): asdict(r) for r in results if r.mode == mode}
        by_phase: dict[str, Any] = {}
        for phase in sorted({phase for phase, _ in chosen}):
            rows = [row for (p, _), row in chosen.items() if p == phase]
            by_phase[phase] = {f: statistics.median(row[f] for row in rows) for f in figures}
        compared = [p for p in cfg.EXTENDED if p in by_phase and "stock" in by_phase]
        for phase in compared:
            rounds = sorted({r for p, r in chosen if p == phase and ("stock", r) in chosen})
            for f in ("pods_per_s", "binds_per_s"):
                ratios = [chosen[phase, r][f] / chosen["stock", r][f] for r in rounds]
                by_phase[f"{phase}_ratio_{f}"] = by_phase[phase][f] / by_phase["stock"][f]
                by_phase[f"{phase}_round_ratios_{f}"] = ratios
                by_phase[f"{phase}_median_round_ratio_{f}"] = statistics.median(ratios)
        summary[mode] = by_phase
    return summary


def run_benchmark(
    plane: ControlPlane,
    bin_dir: Path,
    settings: cfg.BenchSettings,
    progress: Callable[[str], None],
) -> dict[str, Any]:
    """Creates the nodes, runs every round's phases, deletes the nodes; returns the report."""
    run = uuid.uuid4().hex[:6]
    with bench_client(plane, settings.workers + 4) as api:
        bench = Bench(plane, bin_dir, api, settings, run, progress)
        api_nodes.create_namespace(api, bench.namespace)
        try:
            nodes_s = create_bench_nodes(bench)
            progress(f"{settings.nodes} nodes created in {nodes_s:.1f} s")
            results = []
            for round_ in range(1, settings.rounds + 1):
                for mode in settings.modes:
                    for phase in settings.phases:
                        results.append(run_phase(bench, phase, mode, round_))
                        progress(describe(results[-1]))
        finally:
            k8s.CoreV1Api(api).delete_collection_node(
                label_selector=f"{cfg.BENCH_LABEL}={run}", _preload_content=False
            )
    summary = summarise(results)
    return {
        "settings": asdict(settings),
        "setup": {"nodes_s": nodes_s, "nodes_per_s": settings.nodes / nodes_s},
        **headline(summary),
        "results": [asdict(r) for r in results],
        "summary": summary,
    }


def headline(summary: dict[str, Any]) -> dict[str, float]:
    """The issue's figures, where measured: ``extender_over_alone_backlog`` (ArkGPU's
    scheduling rate from a backlog over kube-scheduler alone's, the median of the rounds'
    own ratios), the same for ``live``, and ``extender_steady_p99_ms`` (create to bound at
    the steady rate, median of rounds)."""
    out = {}
    for mode in ("backlog", "live"):
        ratio = summary.get(mode, {}).get("extender_median_round_ratio_pods_per_s")
        if ratio is not None:
            out[f"extender_over_alone_{mode}"] = ratio
    steady = summary.get("steady", {}).get("extender")
    if steady is not None:
        out["extender_steady_p99_ms"] = steady["latency_p99_ms"]
    return out
