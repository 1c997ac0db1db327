"""A claim's container keeps the limiter when the pod sets its own LD_PRELOAD (issue 32,
item 9, DRA path).

Real ld.so, real files: Prepare writes the CDI spec; its ``/etc/ld.so.preload`` mount is
applied as the container runtime would, by bind-mounting a copy of /etc holding the
mount's host file in a private mount namespace (``unshare -m``), and a process with the
spec's environment plus its own ``LD_PRELOAD`` (another library) lists its mappings.
Needs root for the mount namespace.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from arkgpu.k8s.dra.claims import shares
from arkgpu.limiter import native

from .test_plugin import DRIVER, make_preparer
from .test_preparing import claim_with, result, spec_of

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None,
    reason="needs root and unshare(1) for a private mount namespace",
)


def test_the_pods_own_ld_preload_keeps_the_limiter(workdir: Path) -> None:
    """Both libraries are mapped: the pod's, from its LD_PRELOAD, and the limiter, from
    the spec's /etc/ld.so.preload mount."""
    claim = claim_with(result("gpu", "gpu-0", "s1"))
    make_preparer(workdir).prepare(claim, shares(claim, DRIVER))
    [device] = spec_of(workdir)["devices"]
    edits = device["containerEdits"]
    mounts = {m["containerPath"]: m["hostPath"] for m in edits["mounts"]}
    etc = workdir / "etc"
    shutil.copytree("/etc", etc, symlinks=True, ignore_dangling_symlinks=True)
    shutil.copy(mounts["/etc/ld.so.preload"], etc / "ld.so.preload")
    own = native.fake_driver_dir() / "libnvidia-ml.so.1"  # any other library
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    env |= dict(e.split("=", 1) for e in edits["env"]) | {"LD_PRELOAD": str(own)}
    done = subprocess.run(
        ["unshare", "-m", "sh", "-c", f"mount --bind {etc} /etc && exec cat /proc/self/maps"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert native.limiter_library().name in done.stdout
    assert own.name in done.stdout
