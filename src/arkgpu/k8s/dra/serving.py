"""``arkgpu dra-driver run``: publish the node's slice and keep it current until SIGTERM."""

from __future__ import annotations

import signal
import sys
import threading
from typing import Any

from arkgpu.k8s.dra import gpus
from arkgpu.k8s.dra.config import DraConfig
from arkgpu.k8s.dra.publishing import KubernetesSlices, Publisher
from arkgpu.k8s.dra.slices import devices


def api_client(config: DraConfig) -> Any:
    """A client of the official ``kubernetes`` package: the kubeconfig, or in-cluster."""
    from kubernetes import client  # noqa: PLC0415 (the k8s extra)
    from kubernetes import config as loaders  # noqa: PLC0415

    kube_config: Any = loaders  # its loaders carry no types
    conf = client.Configuration()
    if config.kubeconfig is not None:
        kube_config.load_kube_config(config_file=str(config.kubeconfig), client_configuration=conf)
    else:
        kube_config.load_incluster_config(client_configuration=conf)
    return client.ApiClient(conf)


def current_devices(config: DraConfig) -> list[dict[str, Any]]:
    """The slice's devices for the GPUs found now (NVML, or the assumed ones)."""
    found = gpus.discover() if config.nvml else gpus.assumed(config.gpus, config.gpu_memory_mib)
    return devices(found, config.memory_step_mib, config.cores_step)


def _say(text: str) -> None:
    print(f"arkgpu dra-driver: {text}", file=sys.stderr, flush=True)


def serve(config: DraConfig) -> int:
    """Publish, then re-scan every ``resync_s`` until SIGTERM or SIGINT; 0 on a clean stop."""
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    slices = KubernetesSlices(api_client(config))
    publisher = Publisher(slices, config.node_name, config.driver_name)
    found = current_devices(config)
    _say(f"{publisher.reconcile(found)} {publisher.name} ({len(found)} devices)")
    while not stop.wait(config.resync_s):
        try:
            outcome = publisher.reconcile(current_devices(config))
        except Exception as exc:  # the API server or NVML may be away a while
            _say(f"resync failed, retrying in {config.resync_s:g} s: {exc}")
            continue
        if outcome != "unchanged":
            _say(f"{outcome} {publisher.name}")
    if config.delete_on_exit:
        publisher.withdraw()
        _say(f"deleted {publisher.name}")
    return 0
