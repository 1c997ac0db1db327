"""What a real node changes on this machine, written down first and always undone.

kubelet and containerd change the host beyond the folders they are given:
sysctls (kubelet sets ``vm.overcommit_memory``, ``kernel.panic``,
``kernel.panic_on_oops``), fixed paths (``/var/lib/kubelet/device-plugins`` is a
constant whatever ``--root-dir`` says; ``/var/log/containers``, ``/run/containerd``
...), a CNI bridge, the ``kubepods`` cgroups, mounts, and shim processes that
outlive containerd. Before anything starts, :func:`claim` takes the machine's one
real-node lock and writes a ledger (:data:`LEDGER`): the sysctls' values, which
fixed paths did not exist, the bridge's name. :func:`restore` undoes all of it and
deletes the ledger; it runs at teardown, and at the next start when a previous
run died before its teardown (the ledger is still there).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from . import node_iptables
from .node_iptables import IptablesError

STATE_ROOT = Path("/run/arkgpu-e2e-node")
"""Sockets, the lock and the ledger (tmpfs; short paths for Unix sockets)."""
DATA_ROOT = Path("/var/lib/arkgpu-e2e-node")
"""containerd's content and snapshots, kubelet's root, logs and the fake GPU (disk)."""
LOCK = Path("/run/arkgpu-e2e-node.lock")
"""One real kubelet per machine: held for the node's whole life."""
LEDGER = Path("/run/arkgpu-e2e-node.ledger.json")
"""What :func:`restore` must undo; present only while a node may be running."""
SYSCTLS = ("vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops")
"""The sysctls kubelet writes (``/proc/sys`` relative names)."""
BRIDGE_NF = "net/bridge/bridge-nf-call-iptables"
"""Set to 1 by the harness (``node_proxy``): bridged pod-to-pod replies pass kube-proxy's
rules, so a pod reaches a Service whose endpoint is on the same bridge."""
FIXED_PATHS = (
    "/var/lib/kubelet",
    "/var/log/pods",
    "/var/log/containers",
    "/run/containerd",
    "/var/run/netns",
    "/var/lib/cni",
    "/etc/cni",
    "/opt/cni",
    "/etc/cdi",
    "/var/run/cdi",
    "/etc/kubernetes",
    "/run/arkgpu",
    "/usr/local/lib/arkgpu",
)
"""Host paths kubelet, containerd or the CNI plugins may create whatever they are told, and
the chart's default host paths (its node pods' hostPath volumes create them)."""
CGROUP_ROOT = Path("/sys/fs/cgroup")
KUBEPODS = "kubepods"
"""kubelet's cgroup parent (cgroupfs driver)."""
BRIDGE = "arkgpucni0"
"""The CNI bridge the node's network config names."""
STOP_WAIT_S = 15.0
"""Seconds for processes to go after SIGKILL (a loaded machine)."""


class NodeHostError(RuntimeError):
    """The machine's real node could not be claimed or restored."""


@dataclass
class Ledger:
    """What a real node run changed (JSON in :data:`LEDGER`)."""

    sysctls: dict[str, str]
    created: list[str]
    """Fixed paths and cgroups that did not exist before the run."""
    bridge: str
    shim: str
    """The containerd shim binary: its processes outlive containerd and are killed by path."""
    kube_proxy: str = ""
    """kube-proxy's binary: ``kube-proxy --cleanup`` removes its iptables rules at restore."""

    def save(self) -> None:
        tmp = LEDGER.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2), encoding="utf-8")
        tmp.replace(LEDGER)


def _read_sysctl(name: str) -> str:
    return (Path("/proc/sys") / name).read_text(encoding="utf-8").strip()


def write_sysctl(name: str, value: str) -> None:
    path = Path("/proc/sys") / name
    if _read_sysctl(name) != value:
        path.write_text(value + "\n", encoding="utf-8")


def _cgroup_dirs() -> list[Path]:
    return [c / KUBEPODS for c in sorted(CGROUP_ROOT.iterdir()) if (c / "cgroup.procs").exists()]


def _new_ledger(shim: Path, kube_proxy: Path | None) -> Ledger:
    candidates = [Path(p) for p in FIXED_PATHS] + _cgroup_dirs() + [DATA_ROOT, STATE_ROOT]
    sysctls = [*SYSCTLS, BRIDGE_NF] if kube_proxy else SYSCTLS
    if kube_proxy and not (Path("/proc/sys") / BRIDGE_NF).exists():
        raise NodeHostError(f"kube-proxy needs {BRIDGE_NF}: run 'modprobe br_netfilter' as root")
    return Ledger(
        sysctls={name: _read_sysctl(name) for name in sysctls},
        created=[str(p) for p in candidates if not p.exists()],
        bridge=BRIDGE,
        shim=str(shim),
        kube_proxy=str(kube_proxy or ""),
    )


def _kill_by_exe(exe: str) -> list[int]:
    """SIGKILL every process whose executable is ``exe`` (the node's own shims); their pids."""
    killed = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.readlink(entry / "exe") == exe:
                os.kill(int(entry.name), signal.SIGKILL)
                killed.append(int(entry.name))
        except OSError:
            continue
    return killed


def _cgroup_pids(root: Path) -> set[int]:
    pids: set[int] = set()
    for procs in root.rglob("cgroup.procs"):
        try:
            pids.update(int(p) for p in procs.read_text().split())
        except OSError:
            continue
    return pids


def _kill_pods(cgroups: list[Path]) -> None:
    """SIGKILL every process in the ``kubepods`` cgroups (containers of this node) and wait."""
    deadline = time.monotonic() + STOP_WAIT_S
    while time.monotonic() < deadline:
        pids = set().union(*(_cgroup_pids(c) for c in cgroups if c.exists()))
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
        time.sleep(0.2)


def _remove_cgroup_tree(root: Path) -> None:
    if not root.exists():
        return
    for folder in sorted((p for p in root.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
        folder.rmdir()
    root.rmdir()


def mounts_under(prefixes: list[str]) -> list[str]:
    """Mount points under any of ``prefixes``, deepest first (the order to unmount them)."""
    found = []
    for line in Path("/proc/self/mounts").read_text(encoding="utf-8").splitlines():
        point = line.split()[1].encode().decode("unicode_escape")
        if any(point == p or point.startswith(p.rstrip("/") + "/") for p in prefixes):
            found.append(point)
    return sorted(found, key=lambda p: -p.count("/"))


def _unmount_all(prefixes: list[str]) -> None:
    for _ in range(5):  # a mount under a mount appears once the one above is gone
        points = mounts_under(prefixes)
        if not points:
            return
        for point in points:
            subprocess.run(["umount", "-l", point], check=False, capture_output=True)
    raise NodeHostError(f"still mounted after teardown: {mounts_under(prefixes)}")


def _remove_created(ledger: Ledger) -> None:
    created = [Path(p) for p in ledger.created]
    _unmount_all([str(DATA_ROOT), str(STATE_ROOT), *ledger.created])
    for cgroup in (p for p in created if CGROUP_ROOT in p.parents):
        _remove_cgroup_tree(cgroup)
    for path in [*(p for p in created if CGROUP_ROOT not in p.parents), DATA_ROOT, STATE_ROOT]:
        shutil.rmtree(path, ignore_errors=True)


def _delete_bridge(ledger: Ledger) -> None:
    if Path(f"/sys/class/net/{ledger.bridge}").exists():
        subprocess.run(["ip", "link", "delete", ledger.bridge], check=True, capture_output=True)


def _cleanup_iptables(ledger: Ledger) -> None:
    node_iptables.remove_kube_chains(Path(ledger.kube_proxy) if ledger.kube_proxy else None)


def _reset_sysctls(ledger: Ledger) -> None:
    for name, value in ledger.sysctls.items():
        write_sysctl(name, value)


def restore(ledger: Ledger) -> None:
    """Undo a run: kill its containers and shims, remove kube-proxy's and kubelet's iptables
    chains (``node_iptables``), unmount,
    remove what it created, reset the sysctls, delete the bridge; then delete the ledger.
    Every step runs even when one fails; a failure keeps the ledger (the next run tries
    again) and raises with every reason."""
    failures = []
    steps = (
        lambda: _kill_by_exe(ledger.shim),
        lambda: _kill_pods(_cgroup_dirs()),
        lambda: _cleanup_iptables(ledger),
        lambda: _remove_created(ledger),
        lambda: _delete_bridge(ledger),
        lambda: _reset_sysctls(ledger),
    )
    for step in steps:
        try:
            step()
        except (OSError, subprocess.SubprocessError, NodeHostError, IptablesError) as exc:
            failures.append(f"{type(exc).__name__}: {exc}")
    if failures:
        raise NodeHostError(f"real node not fully restored (ledger kept in {LEDGER}): {failures}")
    LEDGER.unlink(missing_ok=True)


def load_ledger() -> Ledger | None:
    """The ledger a run left, or None."""
    if not LEDGER.exists():
        return None
    return Ledger(**json.loads(LEDGER.read_text(encoding="utf-8")))


@contextmanager
def claimed(shim: Path, kube_proxy: Path | None = None, wait_s: float = 1800.0) -> Iterator[Ledger]:
    """The machine's real node: lock, stale run restored, ledger written; restored on exit.
    With ``kube_proxy``, its rules are cleaned up and :data:`BRIDGE_NF` restored too."""
    if os.geteuid() != 0:
        raise NodeHostError("the real node runs kubelet and containerd as root: run as root")
    with LOCK.open("w") as lock:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise NodeHostError(f"another real node holds {LOCK}") from None
                time.sleep(1.0)
        stale = load_ledger()
        if stale is not None:
            restore(stale)
        ledger = _new_ledger(shim, kube_proxy)
        ledger.save()
        try:
            STATE_ROOT.mkdir(mode=0o755, exist_ok=True)
            DATA_ROOT.mkdir(mode=0o755, exist_ok=True)
            yield ledger
        finally:
            restore(ledger)
