"""The chart with ``dra.enabled``: the DRA driver's DaemonSet, RBAC, DeviceClass and templates.

The API server's strict validation of the same objects and their installation are in
tests/e2e/test_chart.py.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from arkgpu.k8s import contract
from arkgpu.k8s.dra.claims import parse_qos
from arkgpu.k8s.dra.config import DRIVER_NAME, config_from_dict

from .helm import REPO, HelmError, Manifest, config_map_file, container, find, render

NS = "arkgpu-system"
PREFIX = "arkgpu"
ON = {"dra": {"enabled": True}}
EXAMPLES = REPO / "deploy" / "dra"


@pytest.fixture(scope="module")
def docs(helm: Path, tmp_path_factory: pytest.TempPathFactory) -> list[Manifest]:
    return render(helm, tmp_path_factory.mktemp("values"), ON, namespace=NS)


def _names(docs: list[Manifest]) -> set[tuple[str, str]]:
    return {(d["kind"], d["metadata"]["name"]) for d in docs}


def test_off_by_default(helm: Path, tmp_path: Path, docs: list[Manifest]) -> None:
    """Default values render no DRA object; dra.enabled adds exactly the driver's."""
    default = _names(render(helm, tmp_path, namespace=NS))
    added = _names(docs) - default
    assert added == {
        ("ServiceAccount", f"{PREFIX}-dra"),
        ("ClusterRole", f"{PREFIX}-dra"),
        ("ClusterRoleBinding", f"{PREFIX}-dra"),
        ("ConfigMap", f"{PREFIX}-dra"),
        ("DaemonSet", f"{PREFIX}-dra"),
        ("DeviceClass", DRIVER_NAME),
        ("ResourceClaimTemplate", "arkgpu-lc-inference"),
        ("ResourceClaimTemplate", "arkgpu-be-training"),
    }
    assert default <= _names(docs)


def test_never_both_daemonsets_on_one_node(docs: list[Manifest]) -> None:
    """The same label key with two values: a node selects one DaemonSet at most."""
    dra = find(docs, "DaemonSet", f"{PREFIX}-dra")["spec"]["template"]["spec"]
    node = find(docs, "DaemonSet", f"{PREFIX}-node")["spec"]["template"]["spec"]
    assert dra["nodeSelector"] == {contract.LABEL_NODE_ENABLED: "dra"}
    assert node["nodeSelector"] == {contract.LABEL_NODE_ENABLED: "true"}


def test_driver_configuration_matches_the_mounts(docs: list[Manifest]) -> None:
    """dra-driver.toml loads; its sockets, CDI, regions and preload folders are host-mounted."""
    daemonset = find(docs, "DaemonSet", f"{PREFIX}-dra")
    text = config_map_file(docs, f"{PREFIX}-dra", "dra-driver.toml")
    config = config_from_dict(tomllib.loads(text), "dra-driver.toml", {"NODE_NAME": "n1"})
    assert config.driver_name == DRIVER_NAME
    pod = daemonset["spec"]["template"]["spec"]
    host = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v}
    assert host == {
        "plugins-registry": "/var/lib/kubelet/plugins_registry",
        "plugin": "/var/lib/kubelet/plugins/gpu.arkgpu.io",
        "cdi": "/var/run/cdi",
        "regions": "/run/arkgpu/regions",
        "library": "/usr/local/lib/arkgpu",
        "preload": "/run/arkgpu/preload",
        "host-dev": "/dev",
    }
    driver = container(daemonset, "dra-driver")
    assert driver["command"][-1] == "/etc/arkgpu/dra-driver.toml"
    mounts = {m["name"]: m["mountPath"] for m in driver["volumeMounts"]}
    assert Path(mounts["plugins-registry"]) == config.registry_socket.parent
    assert Path(mounts["plugin"]) == config.dra_socket.parent
    assert Path(mounts["cdi"]) == config.cdi_dir
    assert Path(mounts["regions"]) == config.regions_dir
    assert Path(mounts["preload"]) == config.preload_file.parent == Path(host["preload"])
    assert Path(mounts["host-dev"]) == config.dev_dir  # Prepare's device node checks
    assert config.host_dev_dir == Path(host["host-dev"])  # the CDI specs' host paths
    assert next(m for m in driver["volumeMounts"] if m["name"] == "host-dev")["readOnly"]
    assert config.library_path.parent == Path(host["library"])
    runtime = tomllib.loads(config_map_file(docs, f"{PREFIX}-dra", "node.toml"))
    assert runtime["regions_dir"] == str(config.regions_dir)
    assert container(daemonset, "node-runtime")["command"][-1] == "/etc/arkgpu/node.toml"
    assert container(daemonset, "install-library", init=True)["command"][-1] == host["library"]
    for name in ("dra-driver", "node-runtime"):
        security = container(daemonset, name)["securityContext"]
        assert security["privileged"] is False
        assert security["capabilities"] == {"drop": ["ALL"]}


def _rules(docs: list[Manifest]) -> set[tuple[str, str, str]]:
    rules = find(docs, "ClusterRole", f"{PREFIX}-dra")["rules"]
    return {
        (g, r, v) for x in rules for g in x["apiGroups"] for r in x["resources"] for v in x["verbs"]
    }


def test_rbac_is_least_privilege(helm: Path, tmp_path: Path, docs: list[Manifest]) -> None:
    """Its slices, reading claims and the pods they are reserved for (get only); listing
    claims only for device_order = "pack"."""
    group = "resource.k8s.io"
    slices = {(group, "resourceslices", v) for v in ("get", "create", "update", "delete")}
    base = {*slices, ("", "pods", "get")}
    assert _rules(docs) == {*base, (group, "resourceclaims", "get")}
    binding = find(docs, "ClusterRoleBinding", f"{PREFIX}-dra")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": f"{PREFIX}-dra", "namespace": NS}
    ]
    pack = {"dra": {"enabled": True, "settings": {"device_order": "pack"}}}
    claims = {(group, "resourceclaims", v) for v in ("get", "list", "watch")}
    assert _rules(render(helm, tmp_path, pack, namespace=NS)) == base | claims


def _stripped(doc: dict[str, Any]) -> dict[str, Any]:
    meta = {k: v for k, v in doc["metadata"].items() if k not in ("labels", "namespace")}
    return {**doc, "metadata": meta}


@pytest.mark.parametrize(
    ("path", "kind", "name"),
    [
        ("deviceclass.yaml", "DeviceClass", DRIVER_NAME),
        ("claimtemplate-lc.yaml", "ResourceClaimTemplate", "arkgpu-lc-inference"),
        ("claimtemplate-be.yaml", "ResourceClaimTemplate", "arkgpu-be-training"),
    ],
)
def test_deploy_dra_examples_equal_the_charts(
    docs: list[Manifest], path: str, kind: str, name: str
) -> None:
    """deploy/dra/ (for kubectl apply) and the chart's objects do not drift apart."""
    (example,) = yaml.safe_load_all((EXAMPLES / path).read_text())
    assert _stripped(find(docs, kind, name)) == example


def test_templates_share_configs_parse(docs: list[Manifest]) -> None:
    """The templates' GpuShareConfig is what the kubelet plugin's Prepare accepts."""
    templates = [d for d in docs if d["kind"] == "ResourceClaimTemplate"]
    qos = set()
    for doc in templates:
        assert doc["metadata"]["namespace"] == NS
        (entry,) = doc["spec"]["spec"]["devices"]["config"]
        qos.add(parse_qos(entry["opaque"]["parameters"], doc["metadata"]["name"]).kind)
    assert qos == {contract.QOS_LC, contract.QOS_BE}


def test_template_namespace_and_opt_out(helm: Path, tmp_path: Path) -> None:
    values = {"dra": {"enabled": True, "claimTemplates": {"namespace": "ml"}}}
    placed = [d for d in render(helm, tmp_path, values) if d["kind"] == "ResourceClaimTemplate"]
    assert {d["metadata"]["namespace"] for d in placed} == {"ml"}
    values = {"dra": {"enabled": True, "claimTemplates": {"enabled": False}}}
    kinds = {d["kind"] for d in render(helm, tmp_path, values)}
    assert "ResourceClaimTemplate" not in kinds
    assert "DeviceClass" in kinds


def test_custom_directories_and_settings(helm: Path, tmp_path: Path) -> None:
    values = {
        "node": {"regionsDir": "/var/run/arkgpu", "libraryDir": "/opt/arkgpu"},
        "dra": {
            "enabled": True,
            "kubeletPluginsDir": "/data/kubelet/plugins",
            "kubeletRegistryDir": "/data/kubelet/plugins_registry",
            "hostDevDir": "/run/nvidia/driver/dev",
            "extraNodeSelector": {"gpu.vendor": "nvidia"},
            "settings": {"cores_step": 10, "resync_s": 30},
        },
    }
    docs = render(helm, tmp_path, values)
    text = config_map_file(docs, f"{PREFIX}-dra", "dra-driver.toml")
    config = config_from_dict(tomllib.loads(text), "dra-driver.toml", {"NODE_NAME": "n1"})
    assert config.dra_socket == Path("/data/kubelet/plugins/gpu.arkgpu.io/dra.sock")
    assert config.registry_socket.parent == Path("/data/kubelet/plugins_registry")
    assert (config.cores_step, config.resync_s) == (10, 30.0)
    assert config.library_path == Path("/opt/arkgpu/libarkgpu_limiter.so")
    assert config.regions_dir == Path("/var/run/arkgpu")
    assert (config.dev_dir, config.host_dev_dir) == (
        Path("/host/dev"),
        Path("/run/nvidia/driver/dev"),
    )
    pod = find(docs, "DaemonSet", f"{PREFIX}-dra")["spec"]["template"]["spec"]
    [dev] = [v["hostPath"]["path"] for v in pod["volumes"] if v["name"] == "host-dev"]
    assert dev == "/run/nvidia/driver/dev"
    assert pod["nodeSelector"] == {contract.LABEL_NODE_ENABLED: "dra", "gpu.vendor": "nvidia"}


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"dra": {"enabled": "yes"}}, "/dra/enabled"),
        ({"dra": {"cdiDir": "cdi"}}, "/dra/cdiDir"),
        ({"dra": {"hostDevDir": "dev"}}, "/dra/hostDevDir"),
        (
            {"dra": {"enabled": True, "settings": {"host_dev_dir": "/x"}}},
            "dra.settings.host_dev_dir",
        ),
        ({"dra": {"claimTemplates": {"namespace": "Bad_NS"}}}, "/dra/claimTemplates/namespace"),
        ({"dra": {"enabled": True, "settings": {"cdi_dir": "/x"}}}, "dra.settings.cdi_dir"),
        ({"dra": {"daemonset": {}}}, "daemonset"),
    ],
)
def test_bad_values_are_refused_by_name(
    helm: Path, tmp_path: Path, values: dict[str, Any], message: str
) -> None:
    with pytest.raises(HelmError) as refused:
        render(helm, tmp_path, values)
    assert message in str(refused.value)
