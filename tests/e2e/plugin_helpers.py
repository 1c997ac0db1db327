"""``arkgpu device-plugin run`` as the end-to-end tests run it: a process on the fake NVML (two
GPUs of 8 GiB) for one node, driven by the kubelet emulator over real Unix sockets."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from arkgpu.limiter import native
from k8s.kubelet_emulator import KubeletEmulator

WAIT_S = 60.0
"""Generous bound for the plugin's start and each API round trip on a loaded 2-core machine."""


@contextmanager
def running_plugin(kubeconfig: Path, node: str) -> Iterator[tuple[KubeletEmulator, Path]]:
    """The emulator and the plugin process serving ``node`` (which must exist); yields the
    emulator and the regions directory; stops both on exit."""
    root = Path(tempfile.mkdtemp(prefix="dpe-", dir="/tmp"))  # short: Unix socket paths
    (root / "kubelet").mkdir()
    kubelet = KubeletEmulator(root / "kubelet")
    kubelet.start()
    config = root / "plugin.toml"
    config.write_text(
        f'node_name = "{node}"\nkubeconfig = "{kubeconfig}"\n'
        f'kubelet_dir = "{root / "kubelet"}"\nregions_dir = "{root / "regions"}"\n'
        f'library_path = "{native.limiter_library()}"\n'
        f'preload_file = "{root / "preload"}"\n'
        f'pod_resources_socket = "{kubelet.pod_resources}"\n'
        "inventory_period_s = 0.5\nkubelet_check_s = 0.2\nport = 0\n",
        encoding="utf-8",
    )
    env = native.container_env(None, root / "fakegpu", preload=False)
    env.update(FAKEGPU_DEVICES="2", FAKEGPU_MEM_MIB="8192")
    arkgpu = Path(sys.executable).with_name("arkgpu")
    with (root / "plugin.log").open("wb") as log:
        process = subprocess.Popen(
            [str(arkgpu), "device-plugin", "run", "--config", str(config)], env=env, stderr=log
        )
    try:
        yield kubelet, root / "regions"
    finally:
        process.terminate()
        process.wait(timeout=30)
        kubelet.stop()
        shutil.rmtree(root, ignore_errors=True)
