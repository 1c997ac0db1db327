"""The limiter reaches a container through /etc/ld.so.preload, so the pod's LD_PRELOAD neither
removes it nor is replaced by it (issue 32, item 9).

Real ld.so, real files: the preload file the plugin writes is bind-mounted over
``/etc/ld.so.preload`` in a private mount namespace (``unshare -m``, as the
container runtime mounts the Allocate answer's file), and a process whose
environment sets its own ``LD_PRELOAD`` (another library, as a pod preloading
jemalloc would) or none lists its mappings. Needs root for the mount namespace.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from arkgpu.k8s.deviceplugin.config import DevicePluginConfig
from arkgpu.k8s.deviceplugin.containers import write_preload_file
from arkgpu.limiter import native

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None,
    reason="needs root and unshare(1) for a private mount namespace",
)


def _maps_in_namespace(tmp_path: Path, preload: Path, env: dict[str, str]) -> str:
    """``/proc/self/maps`` of ``cat`` run with ``preload`` mounted at /etc/ld.so.preload."""
    etc = tmp_path / "etc"
    shutil.copytree("/etc", etc, symlinks=True, ignore_dangling_symlinks=True)
    shutil.copy(preload, etc / "ld.so.preload")
    script = f"mount --bind {etc} /etc && exec cat /proc/self/maps"
    done = subprocess.run(
        ["unshare", "-m", "sh", "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_limiter_loads_beside_the_pods_own_preload_and_without_any(tmp_path: Path) -> None:
    """With the pod's LD_PRELOAD naming another library, both are mapped; with LD_PRELOAD
    unset, the limiter still is."""
    library = native.limiter_library()
    own = native.fake_driver_dir() / "libnvidia-ml.so.1"  # any other library
    config = DevicePluginConfig(
        node_name="n", library_path=library, preload_file=tmp_path / "preload" / "ld.so.preload"
    )
    write_preload_file(config)
    base = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    with_own = _maps_in_namespace(
        tmp_path / "a", config.preload_file, {**base, "LD_PRELOAD": str(own)}
    )
    assert library.name in with_own
    assert own.name in with_own
    without = _maps_in_namespace(tmp_path / "b", config.preload_file, base)
    assert library.name in without
