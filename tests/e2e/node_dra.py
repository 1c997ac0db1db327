"""ArkGPU's DRA driver serving the real node as the chart's pod, and pods using its claims.

The chart is installed as a user installs it (``node_chart.installed_chart``) with the
values file :data:`VALUES` and the node labelled ``arkgpu.io/gpu=dra``: its DRA
DaemonSet's pod (the driver and the node runtime, under NVIDIA's runtime class: the fake
NVML) publishes the node's fake GPUs in a ResourceSlice and registers its kubelet plugin
in the real kubelet's plugin registry; Prepare writes each claim's CDI spec into the
folder containerd reads (the fake GPU's), naming the fake device nodes by their host path
(``dra.hostDevDir``). The chart also creates the DeviceClass. The GPU driver's libraries
and environment, which NVIDIA's toolkit adds on a real node, reach the claim pods as
hostPath volumes and env here: the claim's CDI device brings the GPU, the region and the
limiter (``/etc/ld.so.preload``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .controlplane import REPO
from .node_chart import NAMESPACE, Chart, installed_chart
from .node_fakegpu import CONTAINER_LIB_DIR, CONTAINER_STATE_DIR, DRIVER_LIBS
from .node_gpu_pods import REPORT, wait_output
from .realnode import RealNode

VALUES = REPO / "deploy" / "examples" / "values" / "dra-cdi-runtimeclass.yaml"
LABEL = "dra"
"""The node label value that selects the chart's DRA DaemonSet."""
COMPONENTS = ("scheduler", "extender", "webhook", "dra")
"""The chart's parts that run pods with DRA (the device plugin's DaemonSet does not)."""
REGIONS = Path("/run/arkgpu/regions")
"""The chart's regions folder (values.yaml: node.regionsDir)."""
DRA_SELECTOR = "app.kubernetes.io/component=dra"


@contextmanager
def chart_with_dra(node: RealNode) -> Iterator[Chart]:
    """The chart installed with :data:`VALUES`, every pod Ready (the DRA pod under its
    probes: ``/readyz`` answers once the slice is published and the kubelet registered the
    plugin); uninstalled on exit unless a test did."""
    with installed_chart(node, VALUES, LABEL, COMPONENTS) as chart:
        yield chart


def driver_log(node: RealNode) -> str:
    """The end of the DRA driver container's log (a diagnostic)."""
    try:
        args = ("logs", "-n", NAMESPACE, "-l", DRA_SELECTOR, "-c", "dra-driver", "--tail=40")
        return node.kubectl(*args)
    except Exception as failed:  # the log is a diagnostic only
        return str(failed)


def claim_pod(name: str, node: RealNode, image: str, claim: dict[str, str]) -> dict[str, Any]:
    """A pod whose container uses ``claim`` (a pod resourceClaims entry less its name),
    prints :data:`REPORT` and sleeps; the fake driver's libraries and state as volumes."""
    volumes = [
        {"name": f"lib{i}", "hostPath": {"path": str(node.gpu.lib_dir / lib), "type": "File"}}
        for i, lib in enumerate(DRIVER_LIBS)
    ]
    volumes.append({"name": "state", "hostPath": {"path": str(node.gpu.state_dir)}})
    mounts = [
        {"name": f"lib{i}", "mountPath": f"{CONTAINER_LIB_DIR}/{lib}", "readOnly": True}
        for i, lib in enumerate(DRIVER_LIBS)
    ]
    mounts.append({"name": "state", "mountPath": CONTAINER_STATE_DIR})
    container = {
        "name": "main",
        "image": image,
        "imagePullPolicy": "Never",
        "command": ["/bin/sh", "-c", f"{REPORT}; exec sleep 600"],
        "env": [{"name": k, "value": v} for k, v in node.gpu.env.items()],
        "volumeMounts": mounts,
        "resources": {"claims": [{"name": "gpu"}]},
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "automountServiceAccountToken": False,
            "containers": [container],
            "volumes": volumes,
            "resourceClaims": [{"name": "gpu", **claim}],
        },
    }


def output(node: RealNode, namespace: str, pod: str, lines: int) -> list[str]:
    """``wait_output`` of the pod's container; when it fails, with the container's log and
    the end of the driver's log in the message."""
    try:
        return wait_output(node, namespace, pod, lines)
    except AssertionError as exc:
        try:
            logs = node.kubectl("logs", pod, "-n", namespace)
        except Exception as failed:  # the log is a diagnostic only
            logs = str(failed)
        driver = driver_log(node)
        raise AssertionError(f"{exc}\ncontainer log:\n{logs}\ndriver log:\n{driver}") from None
