"""The real node's harness parts that need no node: run without root or kubelet.

The iptables cleanup's plan read from what kubelet 1.37 and kube-proxy wrote on this
machine, NVIDIA's runtime stand-in applying CDI edits to an OCI spec, and the API
server certificate's names for pods.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from . import node_chart, node_dra, node_iptables, nvidia_runtime, pki
from .controlplane import REPO

KUBELET_SAVE = """\
*mangle
:PREROUTING ACCEPT [0:0]
:KUBE-IPTABLES-HINT - [0:0]
:KUBE-KUBELET-CANARY - [0:0]
COMMIT
*filter
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:KEEP-ME - [0:0]
:KUBE-FIREWALL - [0:0]
-A INPUT -j KUBE-FIREWALL
-A INPUT -s 10.0.0.1/32 -j KEEP-ME
-A OUTPUT -j KUBE-FIREWALL
-A KUBE-FIREWALL ! -s 127.0.0.0/8 -d 127.0.0.0/8 -m comment --comment "block incoming localnet connections" -j DROP
COMMIT
"""  # noqa: E501
"""``iptables-save`` after a run of kubelet 1.37 (its chains and jumps), plus a chain and a
rule of another owner that must stay."""


def test_the_iptables_plan_deletes_the_jumps_and_kube_chains_only() -> None:
    rules, chains = node_iptables._plan(KUBELET_SAVE)
    assert rules == [
        ("filter", ["-D", "INPUT", "-j", "KUBE-FIREWALL"]),
        ("filter", ["-D", "OUTPUT", "-j", "KUBE-FIREWALL"]),
    ]
    assert chains == [
        ("mangle", "KUBE-IPTABLES-HINT"),
        ("mangle", "KUBE-KUBELET-CANARY"),
        ("filter", "KUBE-FIREWALL"),
    ]


def _node(path: str, host: str) -> dict[str, str]:
    return {"path": path, "hostPath": host}


def _cdi_spec(folder: Path) -> Path:
    gpu0, gpu1 = _node("/dev/gpu0", "/dev/null"), _node("/dev/gpu1", "/dev/zero")
    lib = {"hostPath": "/opt/lib.so", "containerPath": "/usr/lib/lib.so", "options": ["ro"]}
    spec = {
        "cdiVersion": "0.6.0",
        "kind": "nvidia.com/gpu",
        "devices": [
            {"name": "0", "containerEdits": {"deviceNodes": [gpu0]}},
            {"name": "all", "containerEdits": {"deviceNodes": [gpu0, gpu1]}},
        ],
        "containerEdits": {"env": ["FAKEGPU_DEVICES=2"], "mounts": [lib]},
    }
    path = folder / "nvidia.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    return folder


def test_the_runtime_stand_in_applies_the_devices_named_by_the_variable(tmp_path: Path) -> None:
    """``NVIDIA_VISIBLE_DEVICES=all``: the common edits and the ``all`` device's nodes, with
    the host nodes' numbers, allowed in the device cgroup."""
    spec: dict[str, Any] = {
        "process": {"env": ["PATH=/bin", "NVIDIA_VISIBLE_DEVICES=all"]},
        "linux": {},
    }
    names = nvidia_runtime._requested(spec)
    nvidia_runtime.apply(spec, nvidia_runtime._edits(_cdi_spec(tmp_path), names))
    null, zero = os.stat("/dev/null").st_rdev, os.stat("/dev/zero").st_rdev
    devices = [(d["path"], d["type"], d["major"], d["minor"]) for d in spec["linux"]["devices"]]
    assert devices == [
        ("/dev/gpu0", "c", os.major(null), os.minor(null)),
        ("/dev/gpu1", "c", os.major(zero), os.minor(zero)),
    ]
    assert [r["allow"] for r in spec["linux"]["resources"]["devices"]] == [True, True]
    assert spec["process"]["env"][-1] == "FAKEGPU_DEVICES=2"
    mount = {"destination": "/usr/lib/lib.so", "source": "/opt/lib.so", "type": "bind"}
    assert spec["mounts"] == [{**mount, "options": ["ro"]}]


@pytest.mark.parametrize("value", ["", "void", "none"])
def test_the_runtime_stand_in_adds_nothing_without_devices(value: str) -> None:
    assert (
        nvidia_runtime._requested({"process": {"env": [f"NVIDIA_VISIBLE_DEVICES={value}"]}}) == []
    )
    assert nvidia_runtime._requested({"process": {"env": ["PATH=/bin"]}}) == []


def test_the_runtime_stand_in_refuses_an_unknown_device(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match=r"no CDI device nvidia.com/gpu=7"):
        nvidia_runtime._edits(_cdi_spec(tmp_path), ["7"])


def test_the_runtime_stand_in_finds_the_bundle_of_create_only() -> None:
    args = ["--root", "/run/r", "create", "--bundle", "/b/x", "--pid-file", "p", "id"]
    assert nvidia_runtime._bundle(args) == Path("/b/x")
    assert nvidia_runtime._bundle(["--root", "/run/r", "start", "id"]) is None


def test_the_api_server_certificate_names_the_node_and_the_service_for_pods() -> None:
    assert pki.apiserver_names("", "10.96.0.0/24")[1] == ("127.0.0.1",)
    hosts, ips = pki.apiserver_names("192.0.2.2", "10.96.0.0/24")
    assert ips == ("127.0.0.1", "192.0.2.2", "10.96.0.1")
    assert {"kubernetes.default.svc", "kubernetes.default.svc.cluster.local"} <= set(hosts)


def test_install_md_shows_the_values_and_manifests_the_chart_test_uses() -> None:
    """docs/INSTALL.md's commands for the real-node install name the files the test uses."""
    text = (REPO / "docs" / "INSTALL.md").read_text(encoding="utf-8")
    values = node_chart.VALUES.relative_to(REPO)
    assert f"-f {values}" in text
    for manifest in ("nvidia-runtimeclass.yaml", "hami-pod.yaml"):
        path = (node_chart.MANIFESTS / manifest).relative_to(REPO)
        assert f"kubectl apply {'-n <namespace> ' if 'hami' in manifest else ''}-f {path}" in text
    assert f"helm install {node_chart.RELEASE} deploy/helm/arkgpu" in text
    assert f"--namespace {node_chart.NAMESPACE} --create-namespace" in text


def test_dra_md_shows_the_values_and_label_the_dra_chart_test_uses() -> None:
    """docs/k8s/DRA.md's commands for the real-node DRA install name the values file, node
    label and manifest the DRA test uses (``node_dra``)."""
    text = (REPO / "docs" / "k8s" / "DRA.md").read_text(encoding="utf-8")
    assert f"-f {node_dra.VALUES.relative_to(REPO)}" in text
    assert f"kubectl label node <gpu-node> arkgpu.io/gpu={node_dra.LABEL} --overwrite" in text
    runtimeclass = (node_chart.MANIFESTS / "nvidia-runtimeclass.yaml").relative_to(REPO)
    assert f"kubectl apply -f {runtimeclass}" in text
    assert f"helm install {node_chart.RELEASE} deploy/helm/arkgpu" in text
    assert f"--namespace {node_chart.NAMESPACE} --create-namespace" in text
