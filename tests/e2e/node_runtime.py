"""containerd, kubelet and kube-controller-manager of the real node, configured and started.

The programs come from ``scripts/build-node.sh``; every folder they are given lies
under :data:`node_host.DATA_ROOT` or :data:`node_host.STATE_ROOT`, the fixed paths
they create anyway are in the host ledger (``node_host``). Configuration facts of
this machine kind (docs/studies/real-node.md):

- cgroups are v1 (hybrid): kubelet runs with ``failCgroupV1: false`` and the
  ``cgroupfs`` driver; runc likewise (``SystemdCgroup = false``);
- the VM grants no CAP_SYS_RESOURCE: containerd's ``restrict_oom_score_adj``;
- kubelet refuses a loopback node IP: the node IP is the VM interface's address;
- no registry: the sandbox image is imported and pinned in containerd's config;
- CDI is always on in containerd 2.x; its spec folders are the fake GPU's;
- a second runtime handler, ``nvidia``: runc behind a stand-in for NVIDIA's container
  runtime in CDI mode (``nvidia_runtime.py``), for pods of RuntimeClass ``nvidia``.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from . import processes
from .controlplane import free_port
from .node_host import BRIDGE, DATA_ROOT, STATE_ROOT

POD_SUBNET = "10.244.77.0/24"
"""Pod addresses on the node's own bridge (reached from this machine only)."""
CLUSTER_DNS = "10.96.0.10"
"""The cluster's DNS Service IP (CoreDNS, ``node_dns``), the pods' nameserver."""
NVIDIA_HANDLER = "nvidia"
"""containerd's runtime handler of NVIDIA's runtime stand-in (a RuntimeClass names it)."""
CTR_NAMESPACE = "k8s.io"
"""containerd namespace of the CRI plugin: where images for pods must be imported."""


@dataclass(frozen=True)
class NodePaths:
    """Where the node's programs keep their state."""

    bin_dir: Path
    """scripts/build-node.sh's output: the programs; ``../cni`` and ``../images`` beside."""
    root: Path = DATA_ROOT
    state: Path = STATE_ROOT

    @property
    def socket(self) -> Path:
        return self.state / "containerd.sock"

    @property
    def cni_bin(self) -> Path:
        return self.bin_dir.parent / "cni"

    @property
    def pause_archive(self) -> Path:
        return self.bin_dir.parent / "images" / "pause.tar"

    @property
    def pause_image(self) -> str:
        return (self.bin_dir.parent / "images" / "pause.name").read_text().strip()

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def nvidia_runtime(self) -> Path:
        """The stand-in for NVIDIA's container runtime (``nvidia_runtime.py``)."""
        return self.state / "nvidia-container-runtime"


def node_ip() -> str:
    """The address of this machine's interface to its default route (kubelet refuses loopback)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("192.0.2.1", 9))  # UDP connect sends nothing; it only picks the route
        address = str(probe.getsockname()[0])
    if address.startswith("127."):
        raise processes.ControlPlaneError("no non-loopback interface for the node's IP")
    return address


def _toml_list(items: list[str]) -> str:
    return "[" + ", ".join(json.dumps(i) for i in items) + "]"


def containerd_config(paths: NodePaths, cdi_dirs: list[Path]) -> str:
    """containerd's config (version 3): the node's folders, runc, CNI, CDI, the sandbox image."""
    cri = "plugins.'io.containerd.cri.v1.runtime'"
    return f"""version = 3
root = {json.dumps(str(paths.root / "containerd"))}
state = {json.dumps(str(paths.state / "containerd"))}
[grpc]
  address = {json.dumps(str(paths.socket))}
[ttrpc]
  address = {json.dumps(str(paths.socket) + ".ttrpc")}
[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
[plugins.'io.containerd.cri.v1.images'.pinned_images]
  sandbox = {json.dumps(paths.pause_image)}
[{cri}]
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_cdi = true
  cdi_spec_dirs = {_toml_list([str(d) for d in cdi_dirs])}
[{cri}.containerd]
  default_runtime_name = "runc"
[{cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[{cri}.containerd.runtimes.runc.options]
  BinaryName = {json.dumps(str(paths.bin_dir / "runc"))}
  SystemdCgroup = false
[{cri}.containerd.runtimes.{NVIDIA_HANDLER}]
  runtime_type = "io.containerd.runc.v2"
[{cri}.containerd.runtimes.{NVIDIA_HANDLER}.options]
  BinaryName = {json.dumps(str(paths.nvidia_runtime))}
  SystemdCgroup = false
[{cri}.cni]
  bin_dirs = {_toml_list([str(paths.cni_bin)])}
  conf_dir = {json.dumps(str(paths.root / "cni" / "net.d"))}
[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"
"""


def cni_config(paths: NodePaths) -> dict[str, object]:
    """One bridge network with host-local addresses (no masquerade: pods talk to this host)."""
    return {
        "cniVersion": "1.0.0",
        "name": "arkgpu-e2e",
        "plugins": [
            {
                "type": "bridge",
                "bridge": BRIDGE,
                "isGateway": True,
                "ipMasq": False,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": POD_SUBNET}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": str(paths.root / "cni" / "ipam"),
                },
            },
            {"type": "loopback"},
        ],
    }


def kubelet_config(
    paths: NodePaths, ca: Path, ip: str, port: int, healthz: int
) -> dict[str, object]:
    """The KubeletConfiguration: cgroup v1, the node's runtime, the cluster's DNS, generous
    disk thresholds."""
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "failCgroupV1": False,
        "cgroupDriver": "cgroupfs",
        "containerRuntimeEndpoint": f"unix://{paths.socket}",
        "address": ip,
        "port": port,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": healthz,
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": False},
            "x509": {"clientCAFile": str(ca)},
        },
        "authorization": {"mode": "AlwaysAllow"},
        "podLogsDir": str(paths.root / "pod-logs"),
        "failSwapOn": False,
        "resolvConf": "/etc/resolv.conf",
        "clusterDNS": [CLUSTER_DNS],
        "clusterDomain": "cluster.local",
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "imagefs.available": "1%",
            "nodefs.inodesFree": "1%",
        },
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "serializeImagePulls": False,
        "nodeStatusUpdateFrequency": "4s",
        "syncFrequency": "10s",
        "maxPods": 110,
        "shutdownGracePeriod": "0s",
        "containerLogMaxSize": "1Mi",
    }


def _write_nvidia_runtime(paths: NodePaths, spec_dir: Path) -> None:
    """The runtime handler's binary: runc behind NVIDIA's runtime stand-in (CDI mode)."""
    script = Path(__file__).with_name("nvidia_runtime.py")
    runc, python = paths.bin_dir / "runc", sys.executable
    paths.nvidia_runtime.write_text(
        f'#!/bin/sh\nexec {python} -I {script} --runc {runc} --spec-dir {spec_dir} "$@"\n',
        encoding="utf-8",
    )
    paths.nvidia_runtime.chmod(0o755)


def write_configs(
    paths: NodePaths, cdi_dirs: list[Path], ca: Path, ip: str
) -> tuple[Path, Path, int]:
    """containerd's and kubelet's configs and the CNI network; kubelet's config, port."""
    for folder in (paths.logs, paths.root / "cni" / "net.d", paths.state):
        folder.mkdir(parents=True, exist_ok=True)
    _write_nvidia_runtime(paths, cdi_dirs[0])
    containerd = paths.state / "containerd.toml"
    containerd.write_text(containerd_config(paths, cdi_dirs), encoding="utf-8")
    (paths.root / "cni" / "net.d" / "10-arkgpu-e2e.conflist").write_text(
        json.dumps(cni_config(paths), indent=2), encoding="utf-8"
    )
    port, healthz = free_port(), free_port()
    kubelet = paths.state / "kubelet.json"
    kubelet.write_text(json.dumps(kubelet_config(paths, ca, ip, port, healthz), indent=2))
    return containerd, kubelet, healthz


def ctr(paths: NodePaths, *args: str, timeout_s: float = 600.0) -> str:
    """Runs ``ctr`` against the node's containerd in the CRI namespace; its output."""
    argv = [str(paths.bin_dir / "ctr"), "--address", str(paths.socket), "-n", CTR_NAMESPACE, *args]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
    if result.returncode != 0:
        raise processes.ControlPlaneError(f"ctr {' '.join(args)}: {result.stderr.strip()}")
    return result.stdout


def import_image(paths: NodePaths, archive: Path) -> None:
    """Loads an OCI archive into the node (``ctr -n k8s.io images import``), no registry."""
    ctr(paths, "images", "import", str(archive))
