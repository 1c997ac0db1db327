"""A real Kubernetes control plane for the end-to-end tests: etcd, kube-apiserver, kube-scheduler.

The binaries come from ``scripts/build-control-plane.sh`` (built once per
machine from the Go module proxy, cached outside the checkout). Everything
listens on 127.0.0.1 on free ports (the API server also on the node's address for
the real node's pods: ``pod_address``), with certificates generated per session
(``pki``). Tests without the real node create nodes through the API with their
capacity, as Kubernetes' scheduler benchmarks do.

Use ``running_control_plane(config)`` as a context manager: it stops every
process (process groups, SIGTERM then SIGKILL) on exit, on a failed start too.
"""

from __future__ import annotations

import json
import os
import socket
import ssl
import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from kubernetes import client as k8s

from . import pki, processes

REPO = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO / "scripts" / "build-control-plane.sh"


@dataclass(frozen=True)
class ControlPlaneConfig:
    """How the test control plane is started."""

    bin_dir: Path
    """Directory with ``etcd``, ``kube-apiserver`` and ``kube-scheduler`` (the build's output)."""
    workdir: Path
    """Certificates, kubeconfigs, etcd's data and the logs go here (a pytest tmp dir)."""
    ready_timeout_s: float = 180.0
    """Seconds each component may take to become ready: the API server needs 5-30 s on an idle
    2-core machine; the default leaves room for a heavily loaded one."""
    stop_timeout_s: float = 15.0
    """Seconds between SIGTERM and SIGKILL at teardown."""
    service_cluster_ip_range: str = "10.96.0.0/24"
    """Service IPs (no Service is reachable without a proxy; the API server requires a range)."""
    apiserver_args: tuple[str, ...] = ()
    """Extra kube-apiserver flags (feature gates, admission configuration), appended last."""
    scheduler_args: tuple[str, ...] = ()
    """Extra kube-scheduler flags (``--config`` with an extender), appended last."""
    pod_address: str = ""
    """The node address at which pods reach the API server through the ``kubernetes`` Service
    (its first IP, 10.96.0.1, by kube-proxy): the API server binds 0.0.0.0, advertises this
    address (its endpoint reconciler keeps the Service's endpoints), and its certificate also
    names it, the Service IP and ``kubernetes.default.svc[.cluster.local]``. Empty (default):
    loopback only and no endpoints, for the tests without a real node."""
    start_scheduler: bool = True
    """Start a kube-scheduler with the control plane. False for callers that run their own,
    one at a time, with ``running_scheduler`` (the control-plane benchmark's phases)."""


@dataclass
class ControlPlane:
    """A running control plane and how to reach it."""

    server: str
    """The API server's URL, ``https://127.0.0.1:<port>``."""
    ca: Path
    """The CA that signed the API server's certificate and every client certificate."""
    admin: pki.KeyPair
    """Client certificate of a cluster admin (group ``system:masters``)."""
    admin_kubeconfig: Path
    """A kubeconfig for the admin (for tools such as kubectl or helm)."""
    workdir: Path
    startup_s: dict[str, float] = field(default_factory=dict)
    """Seconds each component took from start to ready."""
    apiserver: processes.Child | None = None
    """The kube-apiserver process (an outage is made by pausing its process group)."""

    def api_client(self) -> k8s.ApiClient:
        """A client of the official ``kubernetes`` package, authenticated as the admin."""
        conf = k8s.Configuration()
        conf.host = self.server
        conf.ssl_ca_cert = str(self.ca)
        conf.cert_file = str(self.admin.cert)
        conf.key_file = str(self.admin.key)
        return k8s.ApiClient(conf)


def build_control_plane() -> Path:
    """Runs the (idempotent) build script; returns the directory of the binaries."""
    result = subprocess.run(
        ["bash", str(BUILD_SCRIPT)], check=False, stdout=subprocess.PIPE, text=True
    )
    if result.returncode != 0:
        raise processes.ControlPlaneError(
            f"{BUILD_SCRIPT} failed with exit status {result.returncode} (its reason is above)"
        )
    return Path(result.stdout.strip().splitlines()[-1])


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_kubeconfig(path: Path, server: str, ca: Path, user: pki.KeyPair) -> Path:
    """A kubeconfig (JSON, which every kubeconfig reader accepts) for one client certificate."""
    cluster = {"server": server, "certificate-authority": str(ca)}
    credentials = {"client-certificate": str(user.cert), "client-key": str(user.key)}
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "e2e", "cluster": cluster}],
        "users": [{"name": "user", "user": credentials}],
        "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": "user"}}],
        "current-context": "e2e",
    }
    path.write_text(json.dumps(config, indent=2))
    return path


@dataclass(frozen=True)
class _Pki:
    ca: Path
    serving: pki.KeyPair
    admin: pki.KeyPair
    scheduler: pki.KeyPair
    service_account: pki.KeyPair


def _make_pki(directory: Path, config: ControlPlaneConfig) -> _Pki:
    directory.mkdir(parents=True, exist_ok=True)
    ca = pki.make_ca()
    ca_path = pki.write(ca, directory, "ca").cert
    hosts, ips = pki.apiserver_names(config.pod_address, config.service_cluster_ip_range)
    serving = pki.issue(ca, "kube-apiserver", dns=hosts, ips=ips)
    admin = pki.issue(ca, "arkgpu-e2e-admin", orgs=("system:masters",))
    return _Pki(
        ca=ca_path,
        serving=pki.write(serving, directory, "apiserver"),
        admin=pki.write(admin, directory, "admin"),
        scheduler=pki.write(pki.issue(ca, "system:kube-scheduler"), directory, "scheduler"),
        service_account=pki.write_service_account_keys(directory),
    )


def _start_etcd(config: ControlPlaneConfig, stack: ExitStack, logs: Path) -> tuple[str, float]:
    client, peer = f"http://127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}"
    child = processes.start(
        "etcd",
        [
            str(config.bin_dir / "etcd"),
            "--name=e2e",
            f"--data-dir={config.workdir / 'etcd-data'}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=e2e={peer}",
            "--unsafe-no-fsync=true",  # test data: no durability needed, speed on a busy disk is
            "--log-level=warn",
        ],
        logs,
    )
    stack.callback(processes.stop, child, config.stop_timeout_s)
    health = f"{client}/health"
    waited = processes.wait_until(
        child, lambda: processes.http_ok(health, None), "/health", config.ready_timeout_s
    )
    return client, waited


def _apiserver_argv(config: ControlPlaneConfig, certs: _Pki, etcd: str, port: int) -> list[str]:
    return [
        str(config.bin_dir / "kube-apiserver"),
        f"--etcd-servers={etcd}",
        *_address_args(config),
        f"--secure-port={port}",
        f"--cert-dir={config.workdir / 'apiserver-certs'}",
        f"--tls-cert-file={certs.serving.cert}",
        f"--tls-private-key-file={certs.serving.key}",
        f"--client-ca-file={certs.ca}",
        "--service-account-issuer=https://kubernetes.default.svc",
        f"--service-account-key-file={certs.service_account.cert}",
        f"--service-account-signing-key-file={certs.service_account.key}",
        f"--service-cluster-ip-range={config.service_cluster_ip_range}",
        "--authorization-mode=Node,RBAC",
        *config.apiserver_args,
    ]


def _address_args(config: ControlPlaneConfig) -> list[str]:
    if config.pod_address:
        return ["--bind-address=0.0.0.0", f"--advertise-address={config.pod_address}"]
    # No pod reaches the API server through the `kubernetes` Service (no kubelet, no proxy),
    # and a loopback address is not a valid endpoint: leave its Endpoints alone.
    loopback = ["--bind-address=127.0.0.1", "--advertise-address=127.0.0.1"]
    return [*loopback, "--endpoint-reconciler-type=none"]


def _mtls_context(certs: _Pki) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(certs.ca))
    context.load_cert_chain(str(certs.admin.cert), str(certs.admin.key))
    return context


def _start_apiserver(
    config: ControlPlaneConfig, certs: _Pki, etcd: str, stack: ExitStack, logs: Path
) -> tuple[str, float, processes.Child]:
    port = free_port()
    server = f"https://127.0.0.1:{port}"
    child = processes.start("kube-apiserver", _apiserver_argv(config, certs, etcd, port), logs)
    stack.callback(processes.stop, child, config.stop_timeout_s)
    context = _mtls_context(certs)
    readyz = f"{server}/readyz"
    waited = processes.wait_until(
        child, lambda: processes.http_ok(readyz, context), "/readyz", config.ready_timeout_s
    )
    return server, waited, child


def _start_scheduler(
    config: ControlPlaneConfig,
    kubeconfig: Path,
    stack: ExitStack,
    logs: Path,
    log_name: str = "kube-scheduler",
    started: list[processes.Child] | None = None,
) -> float:
    port = free_port()
    child = processes.start(
        log_name,
        [
            str(config.bin_dir / "kube-scheduler"),
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            f"--cert-dir={config.workdir / 'scheduler-certs'}",
            "--leader-elect=false",
            *config.scheduler_args,
        ],
        logs,
    )
    stack.callback(processes.stop, child, config.stop_timeout_s)
    if started is not None:
        started.append(child)
    # The scheduler serves a self-signed certificate; /healthz on loopback needs no trust.
    insecure = ssl.create_default_context()
    insecure.check_hostname = False
    insecure.verify_mode = ssl.CERT_NONE
    url = f"https://127.0.0.1:{port}/healthz"
    return processes.wait_until(
        child, lambda: processes.http_ok(url, insecure), "/healthz", config.ready_timeout_s
    )


@contextmanager
def running_control_plane(config: ControlPlaneConfig) -> Iterator[ControlPlane]:
    """Starts etcd, kube-apiserver and kube-scheduler; stops all three on exit."""
    logs = config.workdir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    certs = _make_pki(config.workdir / "pki", config)
    with ExitStack() as stack:
        t0 = time.monotonic()
        etcd, etcd_s = _start_etcd(config, stack, logs)
        server, apiserver_s, apiserver = _start_apiserver(config, certs, etcd, stack, logs)
        scheduler_kubeconfig = write_kubeconfig(
            config.workdir / "scheduler.kubeconfig", server, certs.ca, certs.scheduler
        )
        scheduler_s = (
            _start_scheduler(config, scheduler_kubeconfig, stack, logs)
            if config.start_scheduler
            else 0.0
        )
        plane = ControlPlane(
            server=server,
            ca=certs.ca,
            admin=certs.admin,
            admin_kubeconfig=write_kubeconfig(
                config.workdir / "admin.kubeconfig", server, certs.ca, certs.admin
            ),
            workdir=config.workdir,
            startup_s={
                "etcd": etcd_s,
                "kube-apiserver": apiserver_s,
                "kube-scheduler": scheduler_s,
                "total": time.monotonic() - t0,
            },
            apiserver=apiserver,
        )
        yield plane


@contextmanager
def running_scheduler(
    plane: ControlPlane,
    bin_dir: Path,
    args: tuple[str, ...],
    log_name: str,
    ready_timeout_s: float = 180.0,
) -> Iterator[processes.Child]:
    """One more kube-scheduler on ``plane`` with ``args`` (``--config``); stopped on exit.

    Runs as the control plane's scheduler identity (``scheduler.kubeconfig``); its log
    is ``<workdir>/logs/<log_name>.log``. Yields the process once it answers ``/healthz``.
    """
    config = ControlPlaneConfig(
        bin_dir=bin_dir,
        workdir=plane.workdir,
        ready_timeout_s=ready_timeout_s,
        scheduler_args=args,
    )
    kubeconfig = plane.workdir / "scheduler.kubeconfig"
    with ExitStack() as stack:
        children: list[processes.Child] = []
        _start_scheduler(config, kubeconfig, stack, plane.workdir / "logs", log_name, children)
        yield children[0]


def enabled() -> bool:
    """Whether the end-to-end tests are collected (``ARKGPU_E2E=1``)."""
    return os.environ.get("ARKGPU_E2E") == "1"


# --- A kube-scheduler that calls the ArkGPU extender (added for tests/e2e/test_extender*.py) --

EXTENDER_PROFILE = "arkgpu-scheduler"
"""The profile's schedulerName (``arkgpu.k8s.contract.SCHEDULER_NAME``)."""


@dataclass
class ExtenderPlane:
    """A control plane whose kube-scheduler calls an extender at ``http://127.0.0.1:<port>``."""

    plane: ControlPlane
    port: int
    """Where kube-scheduler expects the extender (free when the plane started)."""
    workdir: Path


def write_extender_scheduler_config(workdir: Path, port: int) -> Path:
    """A KubeSchedulerConfiguration v1 (JSON, valid YAML): one profile ``arkgpu-scheduler``
    whose score plugins are off (the extender's score alone picks among fitting nodes), and
    the extender with filter and bind (its filter keeps one node: nothing to prioritize),
    nodeCacheCapable, ArkGPU's managed
    resources ignored by the scheduler's own fit check.

    The kubeconfig path is the one ``running_control_plane`` writes before it starts the
    scheduler."""
    from arkgpu.k8s.contract import MANAGED_RESOURCES  # noqa: PLC0415

    config = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(workdir / "scheduler.kubeconfig")},
        "leaderElection": {"leaderElect": False},
        # Retry refused pods after 1-2 s, not up to 10 s: the crash tests wait on retries.
        "podInitialBackoffSeconds": 1,
        "podMaxBackoffSeconds": 2,
        "profiles": [
            {
                "schedulerName": EXTENDER_PROFILE,
                "plugins": {"score": {"disabled": [{"name": "*"}]}},
            }
        ],
        "extenders": [
            {
                "urlPrefix": f"http://127.0.0.1:{port}",
                "filterVerb": "filter",
                "bindVerb": "bind",
                "weight": 1,
                "enableHTTPS": False,
                "nodeCacheCapable": True,
                "httpTimeout": "30s",
                "ignorable": False,
                "managedResources": [
                    {"name": r, "ignoredByScheduler": True} for r in MANAGED_RESOURCES
                ],
            }
        ],
    }
    path = workdir / "scheduler-config.yaml"
    path.write_text(json.dumps(config, indent=2))
    return path
