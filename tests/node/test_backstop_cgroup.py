"""The backstop sees another user's processes without CAP_SYS_PTRACE, by their cgroup.

The chart drops CAP_SYS_PTRACE, and without it the kernel hides ``/proc/P/maps``,
``environ`` and ``root`` of another user's process: a workload running as non-root
was invisible to the backstop. ``/proc/P/cgroup`` is readable by every user and names
the pod's UID, which the region's ``pod.json`` names too.

The real test runs ``arkgpu node run`` as root without CAP_SYS_PTRACE (``setpriv``),
and ``arkgpu-fake-escape`` as nobody in a cgroup named as the kubelet names a pod's
(a real cgroup made for the test), holding fake device memory past the library.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from arkgpu.limiter import native
from arkgpu.limiter.containers import NOBODY
from arkgpu.limiter.region import Limits, create_region
from arkgpu.node.attributing import pod_owners, pod_uid_in
from arkgpu.node.backstop import EVICT_FILE
from arkgpu.node.pods import POD_FILE, PodSpec, write_pod

UID = "3f2a9c1e-7b4d-4e8f-9a0b-1c2d3e4f5a6b"


@pytest.mark.parametrize(
    "text",
    [
        f"0::/kubepods/burstable/pod{UID}/0123abcd\n",  # cgroupfs driver
        "0::/kubepods.slice/kubepods-besteffort.slice/"
        f"kubepods-besteffort-pod{UID.replace('-', '_')}.slice/cri-containerd-9f.scope\n",
        f"0::/../../kubepods-pod{UID.replace('-', '_')}.slice/crio-1.scope\n",  # other ns
        f"12:pids:/kubepods/pod{UID}/c\n11:memory:/kubepods/pod{UID}/c\n",  # cgroup v1
    ],
)
def test_the_pod_uid_is_read_from_each_cgroup_driver_s_paths(text: str) -> None:
    assert pod_uid_in(text) == UID


def test_no_uid_or_two_different_ones_name_no_pod() -> None:
    other = "11111111-2222-4333-8444-555555555555"
    assert pod_uid_in("0::/user.slice/session-1.scope\n") is None
    assert pod_uid_in(f"1:a:/kubepods/pod{UID}/c\n2:b:/kubepods/pod{other}/c\n") is None


def test_a_pod_uid_two_containers_name_places_neither(tmp_path: Path) -> None:
    """A pod with two GPU containers (two regions naming one UID) cannot be told apart
    by its cgroup; a DRA region's ``pod_uids`` names each pod of the claim."""
    bodies = {
        "a": {"pod_uid": UID},
        "b": {"pod_uid": UID},
        "c": {"pod_uids": ["AAAAAAAA-0000-4000-8000-000000000001"]},
        "d": {"kind": "be"},
    }
    for name, body in bodies.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / POD_FILE).write_text(json.dumps(body))
    owners = pod_owners({tmp_path / n: n for n in bodies})
    assert owners == {"aaaaaaaa-0000-4000-8000-000000000001": "c"}


def _cgroup_root() -> Path | None:
    """A cgroup hierarchy this test may create a cgroup in (cgroup2, else v1 pids)."""
    for line in Path("/proc/self/mounts").read_text().splitlines():
        _, where, kind, options = line.split()[:4]
        if kind == "cgroup2" or (kind == "cgroup" and "pids" in options.split(",")):
            probe = Path(where) / f"arkgpu-probe-{os.getpid()}"
            try:
                probe.mkdir()
                probe.rmdir()
            except OSError:
                continue
            return Path(where)
    return None


needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="a process of another user, a new cgroup and setpriv(1) need root",
)


@pytest.fixture
def pod_cgroup() -> Iterator[Path]:
    """A cgroup named as the kubelet's cgroupfs driver names pod ``UID``'s container."""
    root = _cgroup_root()
    assert root is not None, "no writable cgroup hierarchy"
    top = root / f"arkgpu-test-{uuid.uuid4().hex[:8]}"
    leaf = top / "kubepods" / "burstable" / f"pod{UID}" / "container"
    leaf.mkdir(parents=True)
    yield leaf
    for pid in (leaf / "cgroup.procs").read_text().split():  # a test that failed early
        os.kill(int(pid), 9)
    deadline = time.monotonic() + 10.0
    while (leaf / "cgroup.procs").read_text().strip() and time.monotonic() < deadline:
        time.sleep(0.05)
    for path in (leaf, *leaf.parents):
        if path == root:
            break
        path.rmdir()


@needs_root
@pytest.mark.timeout(120)
def test_a_non_root_escape_is_caught_by_a_runtime_without_ptrace(
    shared_dir: Path, pod_cgroup: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """1 GiB held past the library by nobody in pod UID's cgroup, capped at 256 MiB: the
    runtime, root without CAP_SYS_PTRACE, marks it for eviction within 3 s."""
    monkeypatch.setenv(native.NATIVE_DIR_ENV, str(shared_dir / "native"))
    state = shared_dir / "fakegpu"
    for path in (state, shared_dir / "fakegpu.procs"):  # the device and its process table
        path.touch()
        path.chmod(0o666)
    env = native.container_env(None, state, preload=False)
    region = create_region(shared_dir / "regions" / "greedy", Limits((256 << 20,)))
    write_pod(region, PodSpec("greedy", "be", 0, "vgg16", 256))
    body = json.loads((region / POD_FILE).read_text())
    (region / POD_FILE).write_text(json.dumps({**body, "pod_uid": UID}))
    escape = subprocess.Popen(
        [str(shared_dir / "native" / "fake" / "arkgpu-fake-escape"), "1024", "60"],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        user=NOBODY,
    )
    assert escape.stdout is not None
    assert escape.stdout.readline().startswith("escaped")
    (pod_cgroup / "cgroup.procs").write_text(str(escape.pid))
    assert _root_hidden(escape.pid)  # what the runtime cannot read: the bug's cause
    config = shared_dir / "node.toml"
    config.write_text(f'regions_dir = "{shared_dir / "regions"}"\nbackstop = "evict"\n')
    no_ptrace = ["setpriv", "--inh-caps=-sys_ptrace", "--bounding-set=-sys_ptrace"]
    runtime = subprocess.Popen(
        [*no_ptrace, sys.executable, "-m", "arkgpu", "node", "run", "--config", str(config)],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert runtime.stderr is not None
        assert runtime.stderr.readline().startswith("arkgpu node:")
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline and not (region / EVICT_FILE).exists():
            time.sleep(0.05)
        assert (region / EVICT_FILE).exists(), "nobody's escape not caught within 3 s"
    finally:
        runtime.terminate()
        runtime.communicate(timeout=30)
        escape.kill()
        escape.communicate(timeout=10)


def _root_hidden(pid: int) -> bool:
    """Whether a reader without CAP_SYS_PTRACE is refused ``/proc/pid/root``."""
    reader = ["setpriv", "--inh-caps=-sys_ptrace", "--bounding-set=-sys_ptrace", "readlink"]
    done = subprocess.run(
        [*reader, f"/proc/{pid}/root"], capture_output=True, text=True, timeout=30, check=False
    )
    return done.returncode != 0
