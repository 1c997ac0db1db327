"""The backstop's attribution of host pids to containers, with real processes in their own
pid and mount namespaces (``unshare``, as root), as on a Kubernetes node: the pid a
container's process has inside differs from the host pid NVML reports, and its region is
mounted at another path than the host's.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from arkgpu.limiter.region import USAGE_FILE, Limits, create_region
from arkgpu.node.attributing import Attribution, usage_identity

needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None,
    reason="new pid and mount namespaces need root and unshare(1)",
)


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(x) for x in text.split()]


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


@pytest.fixture
def spawn() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Started process groups, killed at the end."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()


def _contained(spawn: list[subprocess.Popen[bytes]], script: str) -> list[int]:
    """Run ``script`` under ``unshare --mount --pid --fork``; the host pids of the
    ``sleep`` processes it leaves running (the first one is pid 1 inside)."""
    proc = subprocess.Popen(
        ["unshare", "--mount", "--pid", "--fork", "sh", "-c", script], start_new_session=True
    )
    spawn.append(proc)
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline:
        first = _children(proc.pid)
        found = first + [c for p in first for c in _children(p)]
        wanted = script.count("sleep")
        if len(found) == wanted and all(_comm(p) == "sleep" for p in found):
            return found
        time.sleep(0.05)
    raise AssertionError(f"the contained processes did not start: {script}")


def _regions(tmp_path: Path) -> dict[tuple[int, int], str]:
    out = {}
    for name in ("a", "b"):
        identity = usage_identity(create_region(tmp_path / "regions" / name, Limits((None,))))
        assert identity is not None
        out[identity] = name
    return out


@needs_root
@pytest.mark.timeout(60)
def test_a_contained_process_is_found_by_its_region_not_its_pid(
    tmp_path: Path, spawn: list[subprocess.Popen[bytes]]
) -> None:
    """Region a bind-mounted at /.../mnt inside a new mount namespace (empty on the host),
    ARKGPU_REGION_DIR naming it there: the process (pid 1 inside) is a's; a second
    process of the namespace with no such variable is a's too (its namespace); the
    test's own process, in the host namespace, is nobody's."""
    regions = _regions(tmp_path)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    script = (
        f"mount --bind {tmp_path / 'regions' / 'a'} {mnt} && "
        f"(env -u ARKGPU_REGION_DIR sleep 60 &) ; ARKGPU_REGION_DIR={mnt} exec sleep 60"
    )
    leader, helper = _contained(spawn, script)
    status = Path(f"/proc/{leader}/status").read_text().splitlines()
    nspid = next(line.split()[1:] for line in status if line.startswith("NSpid:"))
    assert nspid == [str(leader), "1"]  # host pid, and pid 1 inside
    assert not (mnt / USAGE_FILE).exists()  # the host sees an empty folder there
    owners = Attribution().owners([leader, helper, os.getpid()], regions)
    assert owners == {leader: "a", helper: "a"}


@needs_root
@pytest.mark.timeout(60)
def test_a_link_to_another_region_names_nobody(
    tmp_path: Path, spawn: list[subprocess.Popen[bytes]]
) -> None:
    """ARKGPU_REGION_DIR through a symbolic link to region b's host path (which the
    kernel would follow from the host's root): refused, not b's."""
    regions = _regions(tmp_path)
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "regions" / "b")
    (pid,) = _contained(spawn, f"ARKGPU_REGION_DIR={link} exec sleep 60")
    (deep,) = _contained(spawn, f"ARKGPU_REGION_DIR={tmp_path}/regions/a/../b exec sleep 60")
    assert Attribution().owners([pid, deep], regions) == {}


@pytest.mark.timeout(60)
def test_a_process_mapping_its_usage_file_is_found_without_its_environment(
    tmp_path: Path, spawn: list[subprocess.Popen[bytes]]
) -> None:
    """A process that maps region b's usage file (as the library does), its environment
    cleaned: b's, by the mapped file's device and inode."""
    regions = _regions(tmp_path)
    code = (
        "import mmap, sys, time; f = open(sys.argv[1], 'rb'); "
        "m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ); print('mapped', flush=True); "
        "time.sleep(60)"
    )
    env = {k: v for k, v in os.environ.items() if k != "ARKGPU_REGION_DIR"}
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path / "regions" / "b" / USAGE_FILE)],
        stdout=subprocess.PIPE,
        env=env,
        start_new_session=True,
    )
    spawn.append(proc)
    assert proc.stdout is not None
    assert proc.stdout.readline().startswith(b"mapped")
    assert Attribution().owners([proc.pid], regions) == {proc.pid: "b"}
