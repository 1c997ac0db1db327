"""kube-proxy on the real node: Services lead to their endpoints, as in a user's cluster.

The chart's pods reach the API server through the ``kubernetes`` Service (10.96.0.1,
its endpoint the node address the API server advertises), the API server reaches
the webhook's Service from this host, and the chart's kube-scheduler the extender's
Service from its pod: all through the iptables rules of the real kube-proxy
(iptables mode, built by ``scripts/build-node.sh``, Debian's ``iptables``).

What it changes on the host is in the ledger (``node_host``): its rules are removed
with ``kube-proxy --cleanup`` at restore, and ``net.bridge.bridge-nf-call-iptables``
(set to 1 here, as kubeadm's preflight requires: a pod's reply to a pod of the same
bridge must pass the Service's reverse NAT) is reset. The configuration leaves the
host's other settings alone: conntrack limits and timeouts (0: unchanged), no
localhost NodePorts (``route_localnet`` untouched), the OOM score left as it is.
"""

from __future__ import annotations

import json
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from . import processes
from .controlplane import free_port
from .node_host import BRIDGE_NF, write_sysctl
from .node_runtime import POD_SUBNET, NodePaths


def kube_proxy_config(
    name: str, kubeconfig: Path, healthz_port: int, metrics_port: int
) -> dict[str, Any]:
    """The KubeProxyConfiguration (v1alpha1): iptables mode, the node's pod subnet as the
    cluster's (traffic from outside it is masqueraded), endpoints on loopback."""
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "mode": "iptables",
        "clusterCIDR": POD_SUBNET,
        "hostnameOverride": name,
        "healthzBindAddress": f"127.0.0.1:{healthz_port}",
        "metricsBindAddress": f"127.0.0.1:{metrics_port}",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "oomScoreAdj": 0,
        "conntrack": {
            "maxPerCore": 0,
            "min": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s",
        },
        "iptables": {"localhostNodePorts": False, "syncPeriod": "30s", "minSyncPeriod": "0s"},
    }


def start_kube_proxy(
    paths: NodePaths,
    name: str,
    kubeconfig: Path,
    stack: ExitStack,
    timeout_s: float,
    stop_timeout_s: float,
) -> processes.Child:
    """kube-proxy for node ``name``, once its ``/healthz`` answers (rules synced); stopped
    (its rules stay until the ledger's restore) when ``stack`` closes."""
    write_sysctl(BRIDGE_NF, "1")
    healthz, metrics = free_port(), free_port()
    config = paths.state / "kube-proxy.json"
    config.write_text(json.dumps(kube_proxy_config(name, kubeconfig, healthz, metrics), indent=2))
    child = processes.start(
        "kube-proxy", [str(paths.bin_dir / "kube-proxy"), f"--config={config}"], paths.logs
    )
    stack.callback(processes.stop, child, stop_timeout_s)
    url = f"http://127.0.0.1:{healthz}/healthz"
    processes.wait_until(child, lambda: processes.http_ok(url, None), "/healthz", timeout_s)
    return child
