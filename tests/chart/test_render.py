"""The chart with its default values, rendered by the real helm: objects, wiring, contract, RBAC.

The API server's own validation of these manifests (server-side dry-run, strict
field validation) and the real kube-scheduler loading the configuration are in
tests/e2e/test_chart.py.
"""

from __future__ import annotations

import base64
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509

from arkgpu.k8s import contract

from .helm import CHART, Manifest, config_map_file, container, find, render, run_helm

NS = "arkgpu-system"
PREFIX = "arkgpu"
"""Object name prefix for release "arkgpu" (the release name already holds the chart's)."""


@pytest.fixture(scope="module")
def docs(helm: Path, tmp_path_factory: pytest.TempPathFactory) -> list[Manifest]:
    return render(helm, tmp_path_factory.mktemp("values"), namespace=NS)


def scheduler_config(docs: list[Manifest]) -> dict[str, Any]:
    loaded = yaml.safe_load(config_map_file(docs, f"{PREFIX}-scheduler", "config.yaml"))
    assert isinstance(loaded, dict)
    return loaded


def secret_pem(docs: list[Manifest], name: str, key: str) -> bytes:
    return base64.b64decode(find(docs, "Secret", name)["data"][key])


def test_lint_is_clean(helm: Path) -> None:
    """helm lint --strict: warnings fail too."""
    result = run_helm(helm, "lint", "--strict", str(CHART))
    assert "1 chart(s) linted, 0 chart(s) failed" in result.stdout


def test_default_objects(docs: list[Manifest]) -> None:
    """Exactly the chart's objects, each namespaced one in the release namespace."""
    names = sorted((d["kind"], d["metadata"]["name"]) for d in docs)
    parts = ("extender", "node", "webhook")
    expected = [
        *[("ClusterRole", f"{PREFIX}-{p}") for p in parts],
        *[("ClusterRoleBinding", f"{PREFIX}-{p}") for p in parts],
        ("ClusterRoleBinding", f"{PREFIX}-scheduler-kube-scheduler"),
        ("ClusterRoleBinding", f"{PREFIX}-scheduler-volume-scheduler"),
        *[("ConfigMap", f"{PREFIX}-{p}") for p in (*parts, "scheduler")],
        ("DaemonSet", f"{PREFIX}-node"),
        *[("Deployment", f"{PREFIX}-{p}") for p in ("extender", "scheduler", "webhook")],
        ("MutatingWebhookConfiguration", f"{PREFIX}-webhook"),
        ("Role", f"{PREFIX}-scheduler-leader-election"),
        ("RoleBinding", f"{PREFIX}-scheduler-authentication-reader"),
        ("RoleBinding", f"{PREFIX}-scheduler-leader-election"),
        ("Secret", f"{PREFIX}-extender-tls"),
        ("Secret", f"{PREFIX}-webhook-tls"),
        *[("Service", f"{PREFIX}-{p}") for p in ("extender", "webhook")],
        *[("ServiceAccount", f"{PREFIX}-{p}") for p in (*parts, "scheduler")],
        ("ValidatingWebhookConfiguration", f"{PREFIX}-webhook"),
    ]
    assert names == sorted(expected)
    cluster_scoped = {"ClusterRole", "ClusterRoleBinding"} | {
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    }
    for doc in docs:
        where = doc["metadata"].get("namespace")
        if doc["kind"] in cluster_scoped:
            assert where is None, doc["metadata"]
        elif doc["metadata"]["name"].endswith("-authentication-reader"):
            assert where == "kube-system"
        else:
            assert where == NS, doc["metadata"]


def test_scheduler_profile_and_extender_follow_the_contract(docs: list[Manifest]) -> None:
    """KubeSchedulerConfiguration v1: the contract's profile, the extender with filter and
    bind (filter answers the node the policy chose, so there is nothing to prioritize)."""
    config = scheduler_config(docs)
    assert config["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert config["kind"] == "KubeSchedulerConfiguration"
    assert config["profiles"] == [{"schedulerName": contract.SCHEDULER_NAME}]
    assert config["leaderElection"] == {
        "leaderElect": True,
        "resourceLock": "leases",
        "resourceName": contract.SCHEDULER_NAME,
        "resourceNamespace": NS,
    }
    (extender,) = config["extenders"]
    host = f"{PREFIX}-extender.{NS}.svc"
    assert extender.pop("tlsConfig")["serverName"] == host
    assert extender == {
        "urlPrefix": f"https://{host}:8888",
        "filterVerb": "filter",
        "bindVerb": "bind",
        "weight": 1,
        "enableHTTPS": True,
        "httpTimeout": "30s",
        "nodeCacheCapable": True,
        "ignorable": False,
        "managedResources": [
            {"name": name, "ignoredByScheduler": True} for name in contract.MANAGED_RESOURCES
        ],
    }


def _verify_serving(cert_pem: bytes, ca_pem: bytes, host: str) -> None:
    cert, ca = x509.load_pem_x509_certificate(cert_pem), x509.load_pem_x509_certificate(ca_pem)
    cert.verify_directly_issued_by(ca)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert host in names.get_values_for_type(x509.DNSName)


def test_scheduler_trusts_the_extenders_generated_certificate(docs: list[Manifest]) -> None:
    """caData is the CA of the extender's Secret, whose certificate names the Service."""
    ca = secret_pem(docs, f"{PREFIX}-extender-tls", "ca.crt")
    (extender,) = scheduler_config(docs)["extenders"]
    assert base64.b64decode(extender["tlsConfig"]["caData"]) == ca
    cert = secret_pem(docs, f"{PREFIX}-extender-tls", "tls.crt")
    _verify_serving(cert, ca, f"{PREFIX}-extender.{NS}.svc")
    volumes = find(docs, "Deployment", f"{PREFIX}-extender")["spec"]["template"]["spec"]["volumes"]
    assert {"name": "tls", "secret": {"secretName": f"{PREFIX}-extender-tls"}} in volumes


def test_webhook_configurations(docs: list[Manifest]) -> None:
    """Both webhooks: the Service on 9443, caBundle = the Secret's CA, pods on CREATE."""
    ca = secret_pem(docs, f"{PREFIX}-webhook-tls", "ca.crt")
    cert = secret_pem(docs, f"{PREFIX}-webhook-tls", "tls.crt")
    _verify_serving(cert, ca, f"{PREFIX}-webhook.{NS}.svc")
    for kind, path in (("Mutating", "/mutate"), ("Validating", "/validate")):
        (hook,) = find(docs, f"{kind}WebhookConfiguration", f"{PREFIX}-webhook")["webhooks"]
        client = hook["clientConfig"]
        assert base64.b64decode(client["caBundle"]) == ca
        assert client["service"] == {
            "name": f"{PREFIX}-webhook",
            "namespace": NS,
            "path": path,
            "port": 9443,
        }
        operations = ["CREATE"] if kind == "Mutating" else ["CREATE", "UPDATE"]
        assert hook["rules"] == [
            {
                "apiGroups": [""],
                "apiVersions": ["v1"],
                "operations": operations,
                "resources": ["pods"],
                "scope": "Namespaced",
            }
        ]
        assert (hook["failurePolicy"], hook["timeoutSeconds"]) == ("Fail", 5)
        assert hook.get("reinvocationPolicy") == ("IfNeeded" if kind == "Mutating" else None)
        assert "matchConditions" not in hook
        assert hook["sideEffects"] == "None"
        assert hook["namespaceSelector"] == {
            "matchExpressions": [
                {
                    "key": "kubernetes.io/metadata.name",
                    "operator": "NotIn",
                    "values": ["kube-system", NS],
                }
            ]
        }
        assert "objectSelector" not in hook


def _toml(docs: list[Manifest], name: str, key: str) -> dict[str, Any]:
    return tomllib.loads(config_map_file(docs, f"{PREFIX}-{name}", key))


def test_component_configurations(docs: list[Manifest]) -> None:
    """Each daemon's TOML: the shared field names, no kubeconfig (in-cluster account)."""
    tls = {"tls_cert_file": "/etc/arkgpu/tls/tls.crt", "tls_key_file": "/etc/arkgpu/tls/tls.key"}
    listen = {"listen_address": "0.0.0.0"}
    assert _toml(docs, "extender", "extender.toml") == {**listen, "port": 8888, **tls}
    assert _toml(docs, "webhook", "webhook.toml") == {**listen, "port": 9443, **tls}
    regions = {"regions_dir": "/run/arkgpu/regions"}
    plugin = {
        "kubelet_dir": "/var/lib/kubelet/device-plugins",
        **regions,
        "library_path": "/usr/local/lib/arkgpu/libarkgpu_limiter.so",
        "split_count": 10,
        "preload_file": "/run/arkgpu/preload/ld.so.preload",
        "pod_resources_socket": "/var/lib/kubelet/pod-resources/kubelet.sock",
        "dev_root": "/host/dev",
        "device_list_strategy": "device-nodes",
        "cdi_kind": "nvidia.com/gpu",
        **listen,
        "port": 9403,
    }
    assert _toml(docs, "node", "device-plugin.toml") == plugin
    runtime = {**regions, "metrics_port": 9402, "metrics_address": "0.0.0.0"}
    assert _toml(docs, "node", "node.toml") == runtime


@pytest.mark.parametrize(
    ("workload", "name", "command"),
    [
        ("Deployment", "extender", "extender"),
        ("Deployment", "webhook", "webhook"),
        ("DaemonSet", "device-plugin", "device-plugin"),
        ("DaemonSet", "node-runtime", "node"),
    ],
)
def test_commands_read_the_mounted_configuration(
    docs: list[Manifest], workload: str, name: str, command: str
) -> None:
    """`arkgpu <command> run --config F`, F mounted from the component's ConfigMap."""
    owner = "node" if workload == "DaemonSet" else name
    spec = container(find(docs, workload, f"{PREFIX}-{owner}"), name)
    path = spec["command"][-1]
    assert spec["command"] == ["arkgpu", command, "run", "--config", path]
    (mount,) = [m for m in spec["volumeMounts"] if m["name"] == "config"]
    assert (mount["mountPath"], mount["readOnly"]) == (path, True)
    assert mount["subPath"] == Path(path).name
    assert spec["image"] == "arkgpu/arkgpu:0.1.0"


def test_node_daemonset(docs: list[Manifest]) -> None:
    """Labelled nodes only; host paths; NODE_NAME from the downward API; nothing privileged."""
    daemonset = find(docs, "DaemonSet", f"{PREFIX}-node")
    pod = daemonset["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {contract.LABEL_NODE_ENABLED: "true"}
    assert pod["hostPID"] is False
    host_paths = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v}
    assert host_paths == {
        "device-plugins": "/var/lib/kubelet/device-plugins",
        "pod-resources": "/var/lib/kubelet/pod-resources",
        "preload": "/run/arkgpu/preload",
        "host-dev": "/dev",
        "regions": "/run/arkgpu/regions",
        "library": "/usr/local/lib/arkgpu",
    }
    for name in ("device-plugin", "node-runtime"):
        spec = container(daemonset, name)
        env = {e["name"]: e for e in spec["env"]}
        assert env["NODE_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
        security = spec["securityContext"]
        assert security["privileged"] is False
        assert security["allowPrivilegeEscalation"] is False
        assert security["capabilities"] == {"drop": ["ALL"]}
    plugin = container(daemonset, "device-plugin")
    assert plugin["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "plugin-metrics"}
    assert plugin["ports"][0]["containerPort"] == 9403
    plugin_mounts = {m["name"]: m for m in plugin["volumeMounts"]}
    assert plugin_mounts["library"]["readOnly"] is True
    assert plugin_mounts["device-plugins"]["mountPath"] == "/var/lib/kubelet/device-plugins"
    assert plugin_mounts["pod-resources"]["mountPath"] == "/var/lib/kubelet/pod-resources"
    assert plugin_mounts["host-dev"] == {
        "name": "host-dev",
        "mountPath": "/host/dev",
        "readOnly": True,
    }
    install = container(daemonset, "install-library", init=True)
    assert install["command"][-1] == "/usr/local/lib/arkgpu"


def test_scheduler_runs_the_clusters_version_unprivileged(docs: list[Manifest]) -> None:
    """The stock image at helm's Kubernetes version (1.37 here), reading the ConfigMap."""
    scheduler = find(docs, "Deployment", f"{PREFIX}-scheduler")
    spec = container(scheduler, "kube-scheduler")
    assert spec["image"] == "registry.k8s.io/kube-scheduler:v1.37.0"
    assert "--config=/etc/arkgpu/scheduler/config.yaml" in spec["command"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    pod = scheduler["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == f"{PREFIX}-scheduler"


def _rules(docs: list[Manifest], kind: str, name: str) -> set[tuple[str, str, str]]:
    rules = find(docs, kind, name)["rules"]
    return {
        (group, resource, verb)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def test_rbac_is_least_privilege(docs: list[Manifest]) -> None:
    """Each account's exact permissions; no wildcard, no delete, no secrets anywhere."""
    core = ""
    read = ("get", "list", "watch")
    assert _rules(docs, "ClusterRole", f"{PREFIX}-extender") == {
        *[(core, "nodes", v) for v in read],
        *[(core, "pods", v) for v in (*read, "patch")],
        (core, "pods/binding", "create"),
        *[(g, "events", v) for g in (core, "events.k8s.io") for v in ("create", "patch")],
    }
    assert _rules(docs, "ClusterRole", f"{PREFIX}-node") == {
        (core, "nodes", "get"),
        (core, "nodes", "patch"),
        *[(core, "pods", v) for v in read],
    }
    assert _rules(docs, "ClusterRole", f"{PREFIX}-webhook") == {(core, "nodes", v) for v in read}
    lease = find(docs, "Role", f"{PREFIX}-scheduler-leader-election")["rules"]
    named = [r for r in lease if "resourceNames" in r]
    assert [(r["resourceNames"], r["verbs"]) for r in named] == [
        ([contract.SCHEDULER_NAME], ["get", "update"])
    ]
    for doc in docs:
        for rule in doc.get("rules", []):
            flat = [*rule["apiGroups"], *rule["resources"], *rule["verbs"]]
            assert not {"*", "delete", "secrets"} & set(flat), rule
