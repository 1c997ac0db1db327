"""The chart with non-default values, and bad values rejected with a message naming the value."""

from __future__ import annotations

import base64
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from arkgpu.k8s import contract

from .helm import CHART, HelmError, Manifest, config_map_file, container, find, render, run_helm

NS = "gpu-infra"
CA_PEM = "-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n"
"""Any PEM text: the chart passes a user's CA through unread (base64 in the configurations)."""

CUSTOM: dict[str, Any] = {
    "image": {"repository": "registry.example/arkgpu", "tag": "0.1.0-rc1"},
    "imagePullSecrets": ["regcred"],
    "commonLabels": {"team": "ml-platform"},
    "scheduler": {
        "replicas": 2,
        "image": {"tag": "v1.37.4"},
        "nodeCacheCapable": False,
        "httpTimeout": "5s",
        "nodeSelector": {"node-role.kubernetes.io/control-plane": ""},
    },
    "extender": {"port": 8080, "tls": {"enabled": False}, "settings": {"log_level": "debug"}},
    "webhook": {
        "failurePolicy": "Ignore",
        "timeoutSeconds": 9,
        "gpuPodsOnly": True,
        "namespaceSelector": {"matchLabels": {"arkgpu.io/enabled": "true"}},
        "objectSelector": {
            "matchExpressions": [{"key": "skip-arkgpu", "operator": "DoesNotExist"}]
        },
        "tls": {"existingSecret": "my-webhook-cert", "caPEM": CA_PEM},
    },
    "node": {
        "regionsDir": "/var/run/arkgpu",
        "privileged": True,
        "hostPID": True,
        "runtimeClassName": "nvidia",
        "extraNodeSelector": {"gpu.vendor": "nvidia"},
        "libraryDir": "/opt/arkgpu/lib",
        "nvidiaDevicePlugin": {"requireOff": True},
        "devicePlugin": {
            "splitCount": 4,
            "metricsPort": 0,
            "deviceListStrategy": "cdi",
            "settings": {"kubelet_check_s": 5},
        },
        "runtime": {
            "metricsPort": 0,
            "settings": {"backstop": "kill", "period_s": 0.2, "adjustment": {"raise_step": 0.1}},
        },
    },
}


@pytest.fixture(scope="module")
def docs(helm: Path, tmp_path_factory: pytest.TempPathFactory) -> list[Manifest]:
    return render(helm, tmp_path_factory.mktemp("values"), CUSTOM, release="gpu", namespace=NS)


def test_lint_with_custom_values(helm: Path, tmp_path: Path) -> None:
    values = tmp_path / "custom.yaml"
    values.write_text(yaml.safe_dump(CUSTOM))
    result = run_helm(helm, "lint", "--strict", str(CHART), "-f", str(values))
    assert "0 chart(s) failed" in result.stdout


def test_plain_http_extender(docs: list[Manifest]) -> None:
    """TLS off: http URL, no tlsConfig, no certificate Secret, HTTP probes, no TLS fields."""
    config = yaml.safe_load(config_map_file(docs, "gpu-arkgpu-scheduler", "config.yaml"))
    (extender,) = config["extenders"]
    assert extender["urlPrefix"] == f"http://gpu-arkgpu-extender.{NS}.svc:8080"
    assert extender["enableHTTPS"] is False
    assert "tlsConfig" not in extender
    assert extender["nodeCacheCapable"] is False
    assert extender["httpTimeout"] == "5s"
    assert not [d for d in docs if d["metadata"]["name"] == "gpu-arkgpu-extender-tls"]
    toml = tomllib.loads(config_map_file(docs, "gpu-arkgpu-extender", "extender.toml"))
    assert toml == {"listen_address": "0.0.0.0", "port": 8080, "log_level": "debug"}
    spec = container(find(docs, "Deployment", "gpu-arkgpu-extender"), "extender")
    assert spec["readinessProbe"]["httpGet"]["scheme"] == "HTTP"
    assert spec["image"] == "registry.example/arkgpu:0.1.0-rc1"


def test_user_supplied_webhook_certificate(docs: list[Manifest]) -> None:
    """existingSecret: no generated Secret; the user's CA is the caBundle; selectors merged."""
    assert not [d for d in docs if d["kind"] == "Secret"]
    spec = find(docs, "Deployment", "gpu-arkgpu-webhook")["spec"]["template"]["spec"]
    assert {"name": "tls", "secret": {"secretName": "my-webhook-cert"}} in spec["volumes"]
    assert spec["imagePullSecrets"] == [{"name": "regcred"}]
    for kind in ("Mutating", "Validating"):
        (hook,) = find(docs, f"{kind}WebhookConfiguration", "gpu-arkgpu-webhook")["webhooks"]
        assert base64.b64decode(hook["clientConfig"]["caBundle"]).decode() == CA_PEM
        assert (hook["failurePolicy"], hook["timeoutSeconds"]) == ("Ignore", 9)
        (condition,) = hook["matchConditions"]
        for name in (*contract.MANAGED_RESOURCES, contract.ANNOTATION_ASSIGNMENT):
            assert f"'{name}'" in condition["expression"]
        assert f"'{contract.ANNOTATION_ALLOCATED}'" in condition["expression"]
        selector = hook["namespaceSelector"]
        assert selector["matchLabels"] == {"arkgpu.io/enabled": "true"}
        assert selector["matchExpressions"][0]["values"] == ["kube-system", NS]
        assert hook["objectSelector"] == CUSTOM["webhook"]["objectSelector"]


def test_node_settings_and_privileges(docs: list[Manifest]) -> None:
    """Settings merged into the TOML (tables too); privileged and hostPID as asked."""
    plugin = tomllib.loads(config_map_file(docs, "gpu-arkgpu-node", "device-plugin.toml"))
    assert plugin == {
        "kubelet_dir": "/var/lib/kubelet/device-plugins",
        "regions_dir": "/var/run/arkgpu",
        "library_path": "/opt/arkgpu/lib/libarkgpu_limiter.so",
        "split_count": 4,
        "preload_file": "/run/arkgpu/preload/ld.so.preload",
        "pod_resources_socket": "/var/lib/kubelet/pod-resources/kubelet.sock",
        "dev_root": "/host/dev",
        "device_list_strategy": "cdi",
        "cdi_kind": "nvidia.com/gpu",
        "port": 0,
        "kubelet_check_s": 5,
    }
    runtime = tomllib.loads(config_map_file(docs, "gpu-arkgpu-node", "node.toml"))
    assert runtime == {
        "backstop": "kill",
        "period_s": 0.2,
        "metrics_port": 0,
        "metrics_address": "0.0.0.0",
        "regions_dir": "/var/run/arkgpu",
        "adjustment": {"raise_step": 0.1},
    }
    daemonset = find(docs, "DaemonSet", "gpu-arkgpu-node")
    pod = daemonset["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {
        contract.LABEL_NODE_ENABLED: "true",
        "nvidia.com/gpu.deploy.device-plugin": "false",  # NVIDIA's plugin kept off
        "gpu.vendor": "nvidia",
    }
    assert (pod["hostPID"], pod["runtimeClassName"]) == (True, "nvidia")
    node_runtime = container(daemonset, "node-runtime")
    assert node_runtime["securityContext"] == {
        "runAsUser": 0,
        "readOnlyRootFilesystem": True,
        "privileged": True,
    }
    assert "readinessProbe" not in container(daemonset, "device-plugin")  # metricsPort 0
    install = container(daemonset, "install-library", init=True)
    assert install["securityContext"]["privileged"] is False
    assert "ports" not in node_runtime  # metricsPort 0: no endpoint, no probes
    assert "livenessProbe" not in node_runtime


def test_kill_backstop_adds_only_the_kill_capability(helm: Path, tmp_path: Path) -> None:
    values = {"node": {"hostPID": True, "runtime": {"settings": {"backstop": "kill"}}}}
    docs = render(helm, tmp_path, values)
    daemonset = find(docs, "DaemonSet", "arkgpu-node")
    runtime = container(daemonset, "node-runtime")["securityContext"]
    assert runtime["capabilities"] == {"drop": ["ALL"], "add": ["KILL"]}
    assert container(daemonset, "device-plugin")["securityContext"]["capabilities"] == {
        "drop": ["ALL"]
    }


def test_selinux_options_label_the_node_pods(helm: Path, tmp_path: Path) -> None:
    """node.seLinuxOptions goes to both node DaemonSets' pods; none by default."""
    label = {"type": "spc_t", "level": "s0"}
    values = {"node": {"seLinuxOptions": label}, "dra": {"enabled": True}}
    docs = render(helm, tmp_path, values)
    for name in ("arkgpu-node", "arkgpu-dra"):
        pod = find(docs, "DaemonSet", name)["spec"]["template"]["spec"]
        assert pod["securityContext"]["seLinuxOptions"] == label
    plain = render(helm, tmp_path / "plain", {"dra": {"enabled": True}})
    for name in ("arkgpu-node", "arkgpu-dra"):
        pod = find(plain, "DaemonSet", name)["spec"]["template"]["spec"]
        assert "seLinuxOptions" not in pod["securityContext"]


def test_scheduler_values(docs: list[Manifest]) -> None:
    scheduler = find(docs, "Deployment", "gpu-arkgpu-scheduler")
    assert scheduler["spec"]["replicas"] == 2
    spec = container(scheduler, "kube-scheduler")
    assert spec["image"] == "registry.k8s.io/kube-scheduler:v1.37.4"
    pod = scheduler["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"node-role.kubernetes.io/control-plane": ""}
    assert all(d["metadata"]["labels"]["team"] == "ml-platform" for d in docs)


@pytest.mark.parametrize(
    ("kube_version", "tag"), [("1.37.5", "v1.37.5"), ("v1.38.1-gke.200", "v1.38.1")]
)
def test_scheduler_image_follows_the_cluster_version(
    helm: Path, tmp_path: Path, kube_version: str, tag: str
) -> None:
    """No tag given: the cluster's version, build suffix dropped."""
    docs = render(helm, tmp_path, extra=["--kube-version", kube_version])
    spec = container(find(docs, "Deployment", "arkgpu-scheduler"), "kube-scheduler")
    assert spec["image"] == f"registry.k8s.io/kube-scheduler:{tag}"


@pytest.mark.parametrize(
    ("values", "extra", "message"),
    [
        ({"extender": {"replicas": 2}}, [], "/extender/replicas"),
        ({"webhook": {"failurePolicy": "Maybe"}}, [], "/webhook/failurePolicy"),
        ({"webhook": {"port": 70000}}, [], "/webhook/port"),
        ({"scheduler": {"httpTimeout": "30 seconds"}}, [], "/scheduler/httpTimeout"),
        ({"node": {"regionsDir": "relative/dir"}}, [], "/node/regionsDir"),
        ({"webhook": {"tslo": {}}}, [], "tslo"),
        ({"extender": {"settings": {"port": 1}}}, [], "extender.settings.port: the chart sets"),
        ({"node": {"runtime": {"settings": {"regions_dir": "/x"}}}}, [], "regions_dir"),
        ({"webhook": {"tls": {"existingSecret": "c"}}}, [], "webhook.tls.caPEM"),
        ({"extender": {"tls": {"existingSecret": "c"}}}, [], "extender.tls.caPEM"),
        (None, ["--kube-version", "1.36.4"], "kubeVersion"),
    ],
)
def test_bad_values_are_refused_by_name(
    helm: Path, tmp_path: Path, values: dict[str, Any] | None, extra: list[str], message: str
) -> None:
    with pytest.raises(HelmError) as refused:
        render(helm, tmp_path, values, extra=extra)
    assert message in str(refused.value)
