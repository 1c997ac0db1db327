"""Which container a GPU process belongs to, judged from the host (the backstop's question).

NVML reports each process by its host pid; a container's processes see their
own pid namespace, so the pids the library writes into a usage file are not
host pids (and the container writes that file: nothing in it is trusted).
The runtime attributes a host pid ``P`` to an adopted container by its pod's UID
or by the identity (device, inode) of the container's ``usage`` file, never by a pid:

0. **cgroup**: ``/proc/P/cgroup``, readable by every user, names the pod's cgroup,
   which the kubelet names after the pod's UID (``.../pod<uid>/<container>`` with
   the cgroupfs driver, ``...-pod<uid with _>.slice/...`` with systemd's), also seen
   from another cgroup namespace (as ``/../..``-relative paths). The region's
   ``pod.json`` names its pod (``pod_uid``, or ``pod_uids`` for a DRA claim); a UID
   that names two containers on one GPU (a pod with two GPU containers) places
   nobody this way. A container cannot move itself into another pod's cgroup. This
   is the only evidence that needs no CAP_SYS_PTRACE: the next three read
   ``/proc/P/maps``, ``environ`` and ``root``, which the kernel shows a process of
   another user only to a reader with that capability (the chart drops it).
1. **mapped**: ``/proc/P/maps`` lists the files ``P`` has mapped with their
   device and inode as the kernel sees them; the interception library maps
   its usage file, so a process running the library names its region in a
   way it cannot forge.
2. **environment**: ``ARKGPU_REGION_DIR`` in ``/proc/P/environ`` (the variable
   the device plugin sets and the library reads) is resolved inside ``P``'s
   own root, ``/proc/P/root``, one component at a time with no symbolic link
   and no ``..`` followed; ``usage`` there must be the region's file. A process
   can only name a file it can see: in a container, its own region.
3. **namespace**: a process neither names is attributed by its mount
   namespace when another process of that namespace was attributed by 1 or 2
   (a statically linked program started with a cleaned environment beside the
   container's server). The runtime's own namespace is never learned (every
   host process shares it), nor one seen with two containers.

A process none of these place is not attributed (the backstop leaves it alone).
"""

from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from arkgpu.limiter.region import USAGE_FILE
from arkgpu.node.pods import POD_FILE

REGION_VARIABLE = "ARKGPU_REGION_DIR"
"""The environment variable naming a container's region (read by the library,
``native/limiter_core.c``, set by the device plugin)."""
ENVIRON_LIMIT = 1 << 20
"""Most bytes of ``/proc/<pid>/environ`` read, bytes (1 MiB: far above a real
environment; a larger one is cut, not read whole)."""

Identity = tuple[int, int]
"""(st_dev, st_ino) of a file."""
POD_UID = re.compile(r"pod([0-9a-f]{8}([-_][0-9a-f]{4}){3}[-_][0-9a-f]{12})")
"""A pod's cgroup name as the kubelet writes it (cgroupfs: dashes; systemd: underscores)."""


def usage_identity(region: Path) -> Identity | None:
    """The identity of ``region``'s usage file on this host, None when it is gone."""
    try:
        st = os.stat(region / USAGE_FILE, follow_symlinks=False)
    except OSError:
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISREG(st.st_mode) else None


def pod_uids(region: Path) -> set[str]:
    """The pod UIDs ``region/pod.json`` names (empty when none or unreadable)."""
    try:
        body = json.loads((region / POD_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return set()
    if not isinstance(body, dict):
        return set()
    found = [body.get("pod_uid"), *(body.get("pod_uids") or [])]
    return {u.lower() for u in found if isinstance(u, str) and u}


def pod_uid_in(cgroups: str) -> str | None:
    """The pod UID a ``/proc/P/cgroup`` text names (None: none, or two different)."""
    found = {m.group(1).replace("_", "-") for m in POD_UID.finditer(cgroups.lower())}
    return found.pop() if len(found) == 1 else None


def cgroup_pod_uid(pid: int) -> str | None:
    """The pod UID ``pid``'s cgroups name (None: none, unreadable, or two different)."""
    try:
        return pod_uid_in(Path(f"/proc/{pid}/cgroup").read_text(errors="replace"))
    except OSError:
        return None


def pod_owners(regions: dict[Path, str]) -> dict[str, str]:
    """Pod UID -> container, from each region's ``pod.json`` (region -> container name);
    a UID two containers name is left out (it cannot tell them apart)."""
    seen: dict[str, set[str]] = {}
    for region, name in regions.items():
        for uid in pod_uids(region):
            seen.setdefault(uid, set()).add(name)
    return {uid: names.pop() for uid, names in seen.items() if len(names) == 1}


def mapped_identities(pid: int) -> set[Identity]:
    """(device, inode) of every file ``pid`` has mapped (empty when unreadable)."""
    try:
        text = Path(f"/proc/{pid}/maps").read_text(errors="replace")
    except OSError:
        return set()
    out = set()
    for line in text.splitlines():
        parts = line.split(maxsplit=5)
        if len(parts) < 5 or parts[4] == "0":
            continue
        try:
            major, minor = (int(x, 16) for x in parts[3].split(":"))
            out.add((os.makedev(major, minor), int(parts[4])))
        except ValueError:
            continue
    return out


def environment_region(pid: int) -> str | None:
    """The value of :data:`REGION_VARIABLE` in ``pid``'s environment, None when absent."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            raw = f.read(ENVIRON_LIMIT)
    except OSError:
        return None
    key = REGION_VARIABLE.encode() + b"="
    for item in raw.split(b"\0"):
        if item.startswith(key):
            return os.fsdecode(item[len(key) :])
    return None


def identity_inside(pid: int, directory: str) -> Identity | None:
    """Identity of ``directory/usage`` as ``pid`` sees it (its root, no link followed)."""
    parts = [p for p in directory.split("/") if p not in ("", ".")]
    if not directory.startswith("/") or ".." in parts:
        return None
    flags = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(f"/proc/{pid}/root", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        for part in parts:
            inner = os.open(part, flags, dir_fd=fd)
            os.close(fd)
            fd = inner
        st = os.stat(USAGE_FILE, dir_fd=fd, follow_symlinks=False)
    except OSError:
        return None
    finally:
        os.close(fd)
    return (st.st_dev, st.st_ino) if stat.S_ISREG(st.st_mode) else None


def mount_namespace(pid: int | str) -> int | None:
    """Inode of ``pid``'s mount namespace, None when unreadable."""
    try:
        return os.stat(f"/proc/{pid}/ns/mnt").st_ino
    except OSError:
        return None


@dataclass
class Attribution:
    """Attributes host pids to containers (call :meth:`owner`; keeps what it learned)."""

    own_namespace: int | None = field(default_factory=lambda: mount_namespace("self"))
    """The runtime's mount namespace (never learned)."""
    namespaces: dict[int, str] = field(default_factory=dict)
    """Mount namespace -> container, learned from attributed processes."""
    ambiguous: set[int] = field(default_factory=set)
    """Mount namespaces seen with two containers (never used)."""

    def owners(
        self, pids: list[int], regions: dict[Identity, str], pods: dict[str, str] | None = None
    ) -> dict[int, str]:
        """The container each of ``pids`` belongs to (those attributed), from ``pods`` (pod
        UID -> container name, :func:`pod_owners`) and ``regions`` (usage-file identity ->
        container name): direct evidence first, for every pid, then the mount namespaces
        it taught."""
        known = set(regions.values())
        self.namespaces = {ns: n for ns, n in self.namespaces.items() if n in known}
        out: dict[int, str] = {}
        spaces = {pid: mount_namespace(pid) for pid in pids}
        for pid in pids:
            name = _direct(pid, regions, pods or {})
            if name is not None:
                out[pid] = name
                self._learn(spaces[pid], name)
        for pid in pids:
            ns = spaces[pid]
            if pid not in out and ns in self.namespaces and ns not in self.ambiguous:
                out[pid] = self.namespaces[ns]
        return out

    def _learn(self, namespace: int | None, name: str) -> None:
        if namespace is None or namespace == self.own_namespace or namespace in self.ambiguous:
            return
        if self.namespaces.setdefault(namespace, name) != name:
            del self.namespaces[namespace]
            self.ambiguous.add(namespace)


def _direct(pid: int, regions: dict[Identity, str], pods: dict[str, str]) -> str | None:
    """The container ``pid``'s cgroup names, else the one it names by a mapped usage
    file, else by its environment."""
    uid = cgroup_pod_uid(pid) if pods else None
    name = pods.get(uid) if uid else None
    if name is not None:
        return name
    name = next((regions[i] for i in mapped_identities(pid) if i in regions), None)
    if name is None:
        directory = environment_region(pid)
        found = identity_inside(pid, directory) if directory else None
        name = regions.get(found) if found else None
    return name
