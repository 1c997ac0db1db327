"""The device plugin's settings, loaded from a TOML file (``arkgpu device-plugin run``).

Every key of the file is a field of :class:`DevicePluginConfig`; an unknown
key, a wrong type or a value out of range stops the load with one line naming
the file and the field (:mod:`arkgpu.model.settings`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from arkgpu.model import settings
from arkgpu.model.settings import Parser, boolean, choice, integer, number, parsed, path, text

NODE_NAME_VARIABLE = "NODE_NAME"
"""Environment variable giving the node's name when ``node_name`` is not set (the
DaemonSet fills it from ``spec.nodeName`` with the downward API)."""


@dataclass(frozen=True)
class DevicePluginConfig:
    """Settings of ``arkgpu device-plugin run`` (units and defaults in each field's text)."""

    node_name: str = ""
    """Name of the Node object this plugin serves (default: environment ``NODE_NAME``);
    Allocate looks for pods bound to it and the inventory goes on it."""
    kubeconfig: Path | None = None
    """Kubeconfig file (default none: the pod's in-cluster service account)."""
    kubelet_dir: Path = Path("/var/lib/kubelet/device-plugins")
    """The kubelet's device plugin directory: ``kubelet.sock`` is there, and the plugin's
    own socket goes there (default /var/lib/kubelet/device-plugins, the kubelet's)."""
    regions_dir: Path = Path("/run/arkgpu/regions")
    """Where Allocate creates one control region per container (default /run/arkgpu/regions,
    the node runtime's ``regions_dir``)."""
    library_path: Path = Path("/usr/local/lib/arkgpu/libarkgpu_limiter.so")
    """Host path of the interception library mounted read-only into each container and
    preloaded there (default /usr/local/lib/arkgpu/libarkgpu_limiter.so, where the node
    DaemonSet installs it)."""
    preload_file: Path = Path("/run/arkgpu/ld.so.preload")
    """Host file the plugin writes at start with ``library_path`` on one line; mounted
    read-only at ``/etc/ld.so.preload`` in each container, so ld.so loads the library
    whatever the pod's ``LD_PRELOAD`` (default /run/arkgpu/ld.so.preload)."""
    pod_resources_socket: Path = Path("/var/lib/kubelet/pod-resources/kubelet.sock")
    """The kubelet's PodResources API socket: which pod holds which devices (default
    /var/lib/kubelet/pod-resources/kubelet.sock, the kubelet's)."""
    dev_root: Path = Path("/dev")
    """Where the plugin looks for the NVIDIA device nodes before naming them to the
    kubelet (default /dev: the host's, as the privileged plugin sees it)."""
    device_list_strategy: str = "device-nodes"
    """How a container gets its GPUs: ``device-nodes`` (default: device nodes and
    ``NVIDIA_VISIBLE_DEVICES`` for the NVIDIA container runtime) or ``cdi`` (CDI device
    names ``<cdi_kind>=<uuid>`` in the Allocate answer, for the GPU Operator's CDI mode
    and CRI-O)."""
    cdi_kind: str = "nvidia.com/gpu"
    """CDI kind of the GPUs when ``device_list_strategy`` is ``cdi`` (default
    nvidia.com/gpu, what nvidia-ctk generates)."""
    region_grace_s: float = 60.0
    """Seconds (default 60). A region no container holds (per PodResources) is removed at
    the next scan once its pod's container has started (it has ``pod.json``) and the kubelet
    has been up this long (a kubelet just started may list no pod yet); a region whose
    container never started, once it is this old (the kubelet records an allocation just
    after Allocate)."""
    split_count: int = 10
    """Virtual devices advertised per healthy GPU (default 10): how many containers may
    share one GPU, as HAMi's ``deviceSplitCount``."""
    inventory_period_s: float = 10.0
    """How often NVML is asked again for the GPUs and their health, seconds (default 10);
    a change updates ListAndWatch and the node's inventory annotation at once."""
    kubelet_check_s: float = 1.0
    """How often the plugin checks that ``kubelet.sock`` and its own socket are the ones
    it registered with, seconds (default 1): a restarted kubelet gets the plugin back
    within about this long."""
    listen_address: str = "0.0.0.0"
    """Address of the ``/healthz``, ``/readyz`` and ``/metrics`` endpoint (default 0.0.0.0:
    the kubelet's probes and Prometheus reach the pod's IP)."""
    port: int = 9403
    """TCP port of that endpoint (default 9403; 0: no endpoint)."""
    nvml: bool = True
    """Ask NVML (nvidia-ml-py) for the GPUs and their health (default true). False serves
    ``gpus`` assumed healthy GPUs of ``gpu_memory_mib`` each (tests, dry runs)."""
    gpus: int = 1
    """GPUs assumed when ``nvml`` is false (default 1)."""
    gpu_memory_mib: int = 16_384
    """Memory of each assumed GPU when ``nvml`` is false, MiB (default 16384)."""

    @property
    def socket_path(self) -> Path:
        """The plugin's own socket in the kubelet's directory."""
        return self.kubelet_dir / SOCKET_NAME

    @property
    def kubelet_socket(self) -> Path:
        """The kubelet's Registration socket."""
        return self.kubelet_dir / KUBELET_SOCKET


SOCKET_NAME = "arkgpu.sock"
"""The plugin's socket file, relative to ``kubelet_dir`` (the RegisterRequest endpoint)."""
SOCKET_PATH_MAX = 107
"""Longest Unix socket path Linux accepts (``sun_path`` less its terminating NUL)."""
KUBELET_SOCKET = "kubelet.sock"
"""The kubelet's Registration socket, relative to ``kubelet_dir``."""

PARSERS: dict[str, Parser] = {
    "node_name": text,
    "kubeconfig": path,
    "kubelet_dir": path,
    "regions_dir": path,
    "library_path": path,
    "preload_file": path,
    "pod_resources_socket": path,
    "dev_root": path,
    "device_list_strategy": choice("device-nodes", "cdi"),
    "cdi_kind": text,
    "region_grace_s": number(0.0, 86_400.0),
    "split_count": integer(1, 1000),
    "inventory_period_s": number(0.0, 86_400.0),
    "kubelet_check_s": number(0.0, 60.0),
    "listen_address": text,
    "port": integer(0, 65_535),
    "nvml": boolean,
    "gpus": integer(1, 64),
    "gpu_memory_mib": integer(1),
}
"""How each field is read from TOML."""


def config_from_dict(
    table: dict[str, Any], source: str = "config", environ: dict[str, str] | None = None
) -> DevicePluginConfig:
    """The configuration ``table`` describes (ValueError naming the field).

    ``node_name`` falls back to ``environ["NODE_NAME"]`` (default: the process's).
    """
    values = parsed(table, PARSERS, f"{source}: ")
    env = os.environ if environ is None else environ
    if "node_name" not in values:
        values["node_name"] = env.get(NODE_NAME_VARIABLE, "")
    if not values["node_name"]:
        raise ValueError(
            f"{source}: field node_name: not set and ${NODE_NAME_VARIABLE} is empty "
            "(the node this plugin serves)"
        )
    config = DevicePluginConfig(**values)
    if len(str(config.socket_path.absolute())) > SOCKET_PATH_MAX:
        raise ValueError(
            f"{source}: field kubelet_dir: too long for a Unix socket path "
            f"(at most {SOCKET_PATH_MAX - len(SOCKET_NAME) - 1} characters)"
        )
    return config


def load_config(file: Path, environ: dict[str, str] | None = None) -> DevicePluginConfig:
    """Read ``file`` (TOML); ValueError with one line naming the file and the field."""
    return settings.load_settings(
        file, lambda table, source: config_from_dict(table, source, environ)
    )


def field_names() -> list[str]:
    """Every field, in order (docs and tests)."""
    return [f.name for f in fields(DevicePluginConfig)]
