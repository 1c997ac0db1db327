"""A real Kubernetes node on this machine, joined to a test control plane, always torn down.

``running_node`` claims the machine (``node_host``: one real node at a time, a
ledger of what it changes), installs the fake GPU driver (``node_fakegpu``),
starts containerd, imports and pins the pause image, starts kube-controller-manager
beside the control plane (service accounts, the not-ready taint, Deployments and
DaemonSets into pods) and kubelet as root, waits until the Node is Ready and
untainted, then starts kube-proxy (``node_proxy``: Services, the API server's
10.96.0.1 among them) and the cluster's DNS (``node_dns``: CoreDNS). On exit, also
after a failed test or a failed start: kube-proxy, kubelet, kube-controller-manager
and containerd are stopped, then the ledger is undone (containers and shims killed,
kube-proxy's and kubelet's iptables chains removed, mounts and created paths removed,
sysctls reset, the bridge deleted).
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from kubernetes import client as k8s

from . import node_host, processes
from .controlplane import (
    REPO,
    ControlPlane,
    ControlPlaneConfig,
    build_control_plane,
    free_port,
)
from .kube_types import filled
from .node_dns import start_dns
from .node_fakegpu import FakeGpuConfig, FakeGpuNode, install
from .node_proxy import start_kube_proxy
from .node_runtime import NodePaths, ctr, import_image, node_ip, write_configs

BUILD_SCRIPT = REPO / "scripts" / "build-node.sh"
T = TypeVar("T")


@dataclass(frozen=True)
class RealNodeConfig:
    """How the real node is started."""

    name: str = "arkgpu-e2e-node"
    """The Node's name (kubelet's ``--hostname-override``)."""
    gpus: int = 2
    """Fake GPUs on the node."""
    gpu_memory_mib: int = 16384
    """Memory of each fake GPU."""
    ready_timeout_s: float = 240.0
    """Seconds for each program to be up and for the Node to be Ready: a few seconds on an
    idle machine; the bound leaves room for a load average of 8 on two cores."""
    stop_timeout_s: float = 20.0
    """Seconds between SIGTERM and SIGKILL for each program at teardown."""


@dataclass
class Daemon:
    """One of the node's daemons (kubelet, containerd), replaced by :meth:`restart` or
    :meth:`kill_and_restart`."""

    child: processes.Child
    start: Callable[[str], processes.Child]
    """Starts the daemon with the node's arguments, its output in ``<logs>/<name>.log``."""
    stop_timeout_s: float
    restarts: int = 0

    def stop(self) -> None:
        """SIGTERM (SIGKILL after the timeout); returns once reaped."""
        processes.stop(self.child, self.stop_timeout_s)

    def restart(self, while_stopped: Callable[[], None]) -> None:
        """Stops the daemon, calls ``while_stopped``, starts it again (log ``<name>-<n>.log``);
        the containers keep running, as on a kubelet restart."""
        self.stop()
        while_stopped()
        self._start_again()

    def kill_and_restart(self) -> None:
        """SIGKILL to the daemon's own process (what systemd's ``KillMode=process`` hits: the
        shims and containers live on), reaped, then started again as systemd restarts it."""
        self.child.popen.kill()
        self.child.popen.wait()
        self._start_again()

    def _start_again(self) -> None:
        self.restarts += 1
        self.child = self.start(f"{self.child.name.split('-')[0]}-{self.restarts}")


@dataclass(frozen=True)
class RealNode:
    """A Ready node: its name, address, programs and fake GPUs."""

    name: str
    ip: str
    paths: NodePaths
    gpu: FakeGpuNode
    plane: ControlPlane
    kubelet: Daemon
    containerd: Daemon

    def kubectl(self, *args: str, stdin: str | None = None, timeout_s: float = 120.0) -> str:
        """Runs kubectl as the admin against the control plane; its output (raises on failure)."""
        argv = [str(self.paths.bin_dir / "kubectl"), f"--kubeconfig={self.plane.admin_kubeconfig}"]
        result = subprocess.run(
            [*argv, *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
        if result.returncode != 0:
            raise processes.ControlPlaneError(f"kubectl {' '.join(args)}: {result.stderr.strip()}")
        return result.stdout

    def import_image(self, archive: Path) -> None:
        """Loads an OCI archive into the node's containerd, as pods' images are found."""
        import_image(self.paths, archive)


def node_plane_config(workdir: Path) -> ControlPlaneConfig:
    """A control plane for the real node: its API server calls kubelet (``kubectl logs``,
    ``exec``) as the admin, at the node's InternalIP (its name is in no DNS), and serves
    the node's pods at the node's address through the ``kubernetes`` Service."""
    pki_dir = workdir / "pki"  # running_control_plane writes the admin's certificate there
    return ControlPlaneConfig(
        bin_dir=build_control_plane(),
        workdir=workdir,
        pod_address=node_ip(),
        apiserver_args=(
            f"--kubelet-client-certificate={pki_dir / 'admin.crt'}",
            f"--kubelet-client-key={pki_dir / 'admin.key'}",
            "--kubelet-preferred-address-types=InternalIP",
        ),
    )


def build_node() -> Path:
    """Runs the (idempotent) build script; returns the directory of the programs."""
    result = subprocess.run(
        ["bash", str(BUILD_SCRIPT)], check=False, stdout=subprocess.PIPE, text=True
    )
    if result.returncode != 0:
        raise processes.ControlPlaneError(
            f"{BUILD_SCRIPT} failed with exit status {result.returncode} (its reason is above)"
        )
    return Path(result.stdout.strip().splitlines()[-1])


def _poll(check: Callable[[], T | None], timeout_s: float, what: str, child: processes.Child) -> T:
    deadline = time.monotonic() + timeout_s
    while True:
        child.check_alive()
        value = check()
        if value is not None:
            return value
        if time.monotonic() > deadline:
            raise processes.ControlPlaneError(
                f"{what} after {timeout_s:.0f} s; log {child.log}:\n{child.tail()}"
            )
        time.sleep(0.5)


def _start_containerd(
    paths: NodePaths, config: Path, cfg: RealNodeConfig, stack: ExitStack
) -> Daemon:
    env_path = (
        f"{paths.bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}"  # the shim is found on PATH
    )
    argv = ["env", f"PATH={env_path}", str(paths.bin_dir / "containerd"), f"--config={config}"]

    def start(name: str) -> processes.Child:
        return processes.start(name, argv, paths.logs)

    daemon = Daemon(start("containerd"), start, cfg.stop_timeout_s)
    stack.callback(daemon.stop)
    wait_containerd(paths, daemon, cfg.ready_timeout_s)
    return daemon


def wait_containerd(paths: NodePaths, daemon: Daemon, timeout_s: float) -> None:
    """Waits until containerd answers ``ctr version``."""

    def answers() -> bool | None:
        if not paths.socket.exists():
            return None
        try:
            ctr(paths, "version", timeout_s=10)
        except (processes.ControlPlaneError, subprocess.TimeoutExpired):
            return None
        return True

    _poll(answers, timeout_s, "containerd does not answer", daemon.child)


def _start_controller_manager(
    paths: NodePaths, plane: ControlPlane, cfg: RealNodeConfig, stack: ExitStack
) -> None:
    kubeconfig = plane.admin_kubeconfig
    child = processes.start(
        "kube-controller-manager",
        [
            str(paths.bin_dir / "kube-controller-manager"),
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={free_port()}",
            f"--cert-dir={paths.state / 'kcm-certs'}",
            "--leader-elect=false",
            f"--root-ca-file={plane.ca}",
            f"--service-account-private-key-file={plane.workdir / 'pki' / 'sa.key'}",
            "--use-service-account-credentials=false",
        ],
        paths.logs,
    )
    stack.callback(processes.stop, child, cfg.stop_timeout_s)


def _start_kubelet(
    paths: NodePaths,
    plane: ControlPlane,
    cfg: RealNodeConfig,
    ip: str,
    config: Path,
    stack: ExitStack,
) -> Daemon:
    def start(name: str) -> processes.Child:
        return processes.start(name, argv, paths.logs)

    argv = [
        str(paths.bin_dir / "kubelet"),
        f"--config={config}",
        f"--kubeconfig={plane.admin_kubeconfig}",
        f"--root-dir={paths.root / 'kubelet'}",
        f"--cert-dir={paths.state / 'kubelet-certs'}",
        f"--hostname-override={cfg.name}",
        f"--node-ip={ip}",
        "--v=1",
    ]
    kubelet = Daemon(start("kubelet"), start, cfg.stop_timeout_s)
    stack.callback(kubelet.stop)
    return kubelet


def _ready_and_untainted(core: k8s.CoreV1Api, name: str) -> bool | None:
    try:
        node = core.read_node(name)
    except k8s.ApiException:
        return None
    conditions = filled(node.status).conditions or []
    ready = any(c.type == "Ready" and c.status == "True" for c in conditions)
    tainted = any(t.key.startswith("node.kubernetes.io/") for t in filled(node.spec).taints or [])
    return True if ready and not tainted else None


def _start_services(node: RealNode, cfg: RealNodeConfig, stack: ExitStack) -> None:
    """kube-proxy and the cluster's DNS: pods reach Services, by IP and by name."""
    kubeconfig = node.plane.admin_kubeconfig
    timeout_s, stop_s = cfg.ready_timeout_s, cfg.stop_timeout_s
    start_kube_proxy(node.paths, cfg.name, kubeconfig, stack, timeout_s, stop_s)
    start_dns(node.paths, node.kubectl, timeout_s)


@contextmanager
def running_node(plane: ControlPlane, bin_dir: Path, cfg: RealNodeConfig) -> Iterator[RealNode]:
    """The real node, Ready; everything it changed on the host is undone on exit."""
    paths = NodePaths(bin_dir=bin_dir)
    with ExitStack() as stack:
        kube_proxy = paths.bin_dir / "kube-proxy"
        stack.enter_context(
            node_host.claimed(paths.bin_dir / "containerd-shim-runc-v2", kube_proxy)
        )
        gpu = install(FakeGpuConfig(paths.root / "fakegpu", cfg.gpus, cfg.gpu_memory_mib))
        ip = node_ip()
        containerd_cfg, kubelet_cfg, _ = write_configs(paths, [gpu.cdi_dir], plane.ca, ip)
        containerd = _start_containerd(paths, containerd_cfg, cfg, stack)
        import_image(paths, paths.pause_archive)
        _start_controller_manager(paths, plane, cfg, stack)
        kubelet = _start_kubelet(paths, plane, cfg, ip, kubelet_cfg, stack)
        with plane.api_client() as api:
            core = k8s.CoreV1Api(api)
            _poll(
                lambda: _ready_and_untainted(core, cfg.name),
                cfg.ready_timeout_s,
                f"node {cfg.name} not Ready and untainted",
                kubelet.child,
            )
        node = RealNode(cfg.name, ip, paths, gpu, plane, kubelet, containerd)
        _start_services(node, cfg, stack)
        yield node
