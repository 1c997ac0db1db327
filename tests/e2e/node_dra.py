"""ArkGPU's DRA driver serving the real node, as a host process, and pods using its claims.

``arkgpu dra-driver run`` publishes the node's fake GPUs (fake NVML) in a ResourceSlice
and registers its kubelet plugin in the real kubelet's plugin registry
(``<kubelet root>/plugins_registry``); Prepare writes each claim's CDI spec into the
folder containerd reads (the fake GPU's), naming the fake device nodes by their host
path (``host_dev_dir``). The GPU driver's libraries and environment, which NVIDIA's
toolkit adds on a real node, reach the pod as hostPath volumes and env here: the
claim's CDI device brings the GPU, the region and the limiter (``/etc/ld.so.preload``).
Its log is ``<node logs>/dra-driver.log``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from arkgpu.k8s.dra.config import DRIVER_NAME
from arkgpu.limiter import native

from .controlplane import REPO
from .node_fakegpu import CONTAINER_LIB_DIR, CONTAINER_STATE_DIR, DRIVER_LIBS
from .node_gpu_pods import REPORT, wait_output
from .node_host import DATA_ROOT
from .realnode import RealNode

DRA_ROOT = DATA_ROOT / "arkgpu-dra"
REGIONS = DRA_ROOT / "regions"
REGISTERED_WAIT_S = 120.0
"""Bound for the slice to be published and the plugin registered (seconds when idle)."""


def _config(node: RealNode) -> str:
    kubelet = node.paths.root / "kubelet"
    lines = {
        "node_name": node.name,
        "kubeconfig": str(node.plane.admin_kubeconfig),
        "registry_dir": str(kubelet / "plugins_registry"),
        "plugin_dir": str(kubelet / "plugins" / DRIVER_NAME),
        "regions_dir": str(REGIONS),
        "cdi_dir": str(node.gpu.cdi_dir),
        "dev_dir": str(node.gpu.dev_dir),
        "host_dev_dir": str(node.gpu.dev_dir),
        "library_path": str(native.stage(DRA_ROOT / "native") / "libarkgpu_limiter.so"),
        "preload_file": str(DRA_ROOT / "ld.so.preload"),
    }
    return "".join(f"{k} = {json.dumps(v)}\n" for k, v in lines.items()) + "resync_s = 1\n"


def _ready(node: RealNode) -> bool:
    """The slice is published and the registration socket is in the kubelet's registry
    (the kubelet's watcher registers it; a Prepare before that is retried by the kubelet)."""
    slices = node.kubectl("get", "resourceslices", "-o", "name")
    registry = node.paths.root / "kubelet" / "plugins_registry"
    return f"{node.name}-{DRIVER_NAME}" in slices and any(registry.glob(f"{DRIVER_NAME}*"))


@contextmanager
def serving_dra_driver(node: RealNode) -> Iterator[None]:
    """The DeviceClass, and the driver until stopped (SIGTERM) on exit."""
    deviceclass = REPO / "deploy" / "dra" / "deviceclass.yaml"
    node.kubectl("apply", "-f", str(deviceclass))
    REGIONS.mkdir(parents=True, exist_ok=True)
    config = DRA_ROOT / "dra.toml"
    config.write_text(_config(node), encoding="utf-8")
    env = native.container_env(None, node.gpu.state_dir / "state", preload=False)
    env.update(node.gpu.env, FAKEGPU_STATE=str(node.gpu.state_dir / "state"))
    log = node.paths.logs / "dra-driver.log"
    with log.open("wb") as out:
        driver = subprocess.Popen(
            [sys.executable, "-m", "arkgpu", "dra-driver", "run", "--config", str(config)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + REGISTERED_WAIT_S
        while not _ready(node):
            tail = log.read_text()[-3000:]
            assert driver.poll() is None, f"the DRA driver exited:\n{tail}"
            assert time.monotonic() < deadline, f"the DRA driver never became ready:\n{tail}"
            time.sleep(0.5)
        yield
    finally:
        driver.terminate()
        driver.wait(timeout=30)
        node.kubectl("delete", "-f", str(deviceclass), "--ignore-not-found")


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
        driver = (node.paths.logs / "dra-driver.log").read_text()[-1500:]
        raise AssertionError(f"{exc}\ncontainer log:\n{logs}\ndriver log:\n{driver}") from None
