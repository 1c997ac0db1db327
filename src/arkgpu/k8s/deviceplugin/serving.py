"""``arkgpu device-plugin run``: build the plugin from its configuration and run it.

SIGTERM and SIGINT end the loop within ``kubelet_check_s``; the socket is
removed so the kubelet sees the plugin go (the regions stay for the node
runtime and for the containers that use them).
"""

from __future__ import annotations

import signal
import sys
import threading
from types import FrameType

from arkgpu.colocation.calibration import CALIBRATION_FILE
from arkgpu.k8s.deviceplugin.apiserver import KubernetesApi
from arkgpu.k8s.deviceplugin.config import DevicePluginConfig
from arkgpu.k8s.deviceplugin.health import serve_health
from arkgpu.k8s.deviceplugin.plugin import DevicePlugin
from arkgpu.k8s.deviceplugin.podresources import PodResourcesClient
from arkgpu.k8s.deviceplugin.service import now_rfc3339
from arkgpu.k8s.gpus import AssumedGpus, GpuSource, NvmlGpus
from arkgpu.k8s.inventory import InventoryPublisher, read_corrections
from arkgpu.probes import stop_probes


def log(message: str) -> None:
    """One line on standard error."""
    print(f"arkgpu device-plugin: {message}", file=sys.stderr, flush=True)


def serve(config: DevicePluginConfig) -> int:
    """Run the plugin until SIGTERM or SIGINT; returns the exit status."""
    if not config.kubelet_dir.is_dir():
        raise OSError(f"{config.kubelet_dir}: kubelet_dir is not a directory")
    gpus: GpuSource = NvmlGpus() if config.nvml else AssumedGpus(config.gpus, config.gpu_memory_mib)
    api = KubernetesApi(config.kubeconfig)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    published = config.regions_dir / CALIBRATION_FILE
    inventory = InventoryPublisher(
        api, config.node_name, now_rfc3339, lambda: read_corrections(published)
    )
    holders = PodResourcesClient(config.pod_resources_socket)
    plugin = DevicePlugin(config, gpus, api, holders, inventory, log)
    log(
        f"node {config.node_name}, {config.split_count} devices per GPU, "
        f"regions {config.regions_dir}"
    )
    health = serve_health(plugin, config.listen_address, config.port) if config.port else None
    try:
        plugin.run(stop)
    finally:
        stop_probes(health)
        api.close()
        if isinstance(gpus, NvmlGpus):
            gpus.close()
    return 0
