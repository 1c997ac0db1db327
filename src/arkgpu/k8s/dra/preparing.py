"""NodePrepareResources and NodeUnprepareResources on the node: regions and CDI specs.

The shares of a claim (:mod:`arkgpu.k8s.dra.claims`) are grouped by main request
(:mod:`arkgpu.k8s.dra.grouping`: what one container can be given). For each group
Prepare creates a control region ``<regions_dir>/dra-<claim uid>-<request>`` with the
limiter's own code (a memory cap per GPU = the consumed ``memory`` of the group's
shares of it, compute share = their consumed ``cores``) and the ``pod.json`` the node
runtime reads, then writes one CDI spec ``<cdi_dir>/arkgpu-dra-<claim uid>.json`` with
one device per group, ``<claim uid>-<request>``, which every result of the group names:
it gives the container the region, the interception library with the preload file
that loads it (mounted at ``/etc/ld.so.preload``: no ``LD_PRELOAD`` is set, the
container's own stays its own, :mod:`arkgpu.k8s.preload`), the device nodes of all the
group's GPUs and the environment (``CUDA_VISIBLE_DEVICES``: every GPU of the group), so
one container sees every GPU of its request, each capped and paced.

Device nodes: ``/dev/nvidia<minor>`` (the minor number NVML gives, which need not
be the index) and ``/dev/nvidiactl`` must exist under ``dev_dir`` (the host's
``/dev`` as the driver sees it), or Prepare fails naming the missing node;
``/dev/nvidia-uvm`` and ``/dev/nvidia-uvm-tools`` are listed only when they exist
(a listed node that is missing makes the runtime fail the container). Each is
written with its host path.

Crash safety: a region is built in ``<regions_dir>/.dra-staging/`` and renamed into
place (atomic on one file system), and the CDI spec is written to a temporary file
and renamed; an existing region is never rebuilt (Prepare is idempotent: a retried
or repeated call returns the same CDI devices). :meth:`Preparer.recover`, called at
start, deletes what a plugin killed mid-Prepare left in the staging folder.
Unprepare deletes the spec first, then the regions; it is idempotent too.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arkgpu.k8s.contract import InventoryGpu
from arkgpu.k8s.dra.claims import ClaimError, Share
from arkgpu.k8s.dra.grouping import Group, groups
from arkgpu.k8s.preload import PRELOAD_PATH, write_preload_file
from arkgpu.limiter.region import LIMITS_FILE, create_region

STAGING = ".dra-staging"
"""Folder of ``regions_dir`` where regions are built before they are renamed into place."""
CONTAINER_REGION = Path("/run/arkgpu/region")
"""Where a container sees its region."""
CDI_VERSION = "0.6.0"
"""CDI spec version written (mounts, env and device nodes need no newer one)."""
CDI_CLASS = "claim"
"""CDI class of our devices: ids are ``<driver>/claim=<claim uid>-<main request>``."""
REQUIRED_CONTROL_DEVICES = ("nvidiactl",)
"""Device nodes (in /dev) every CUDA process needs besides its GPU's: Prepare fails without."""
OPTIONAL_CONTROL_DEVICES = ("nvidia-uvm", "nvidia-uvm-tools")
"""Device nodes listed when the host has them (created by the driver's modules on demand)."""
POD_FILE = "pod.json"
"""The region's description for the node runtime (``arkgpu.node.pods``)."""


@dataclass(frozen=True)
class Prepared:
    """One prepared share: what NodePrepareResources reports for it."""

    share: Share
    cdi_id: str
    """Fully qualified CDI device id the container runtime injects."""


@dataclass(frozen=True)
class Preparer:
    """Creates and removes the regions and CDI specs of claims on this node."""

    regions_dir: Path
    cdi_dir: Path
    driver: str
    library_path: Path
    """Host path of the interception library (mounted read-only, preloaded)."""
    gpus: dict[int, InventoryGpu]
    """The node's GPUs by index: UUID (CUDA_VISIBLE_DEVICES) and device minor number."""
    dev_dir: Path = Path("/dev")
    """The host's /dev as this process sees it (existence checks of the device nodes)."""
    preload_file: Path = Path("/run/arkgpu/ld.so.preload")
    """Host file naming the library, mounted read-only at /etc/ld.so.preload (written by
    Prepare before the spec that names it)."""
    host_dev_dir: Path = Path("/dev")
    """Where the device nodes checked under ``dev_dir`` are on the host: the ``hostPath`` of
    each device node in the CDI specs (their path in the container stays /dev/<name>)."""

    def region_dir(self, claim_uid: str, group: Group) -> Path:
        """The region folder of one group (main request) of a claim."""
        return self.regions_dir / f"dra-{claim_uid}-{group.request}"

    def spec_path(self, claim_uid: str) -> Path:
        """The CDI spec of one claim."""
        return self.cdi_dir / f"arkgpu-dra-{claim_uid}.json"

    def recover(self) -> list[Path]:
        """Delete regions a killed Prepare left half-built; return them."""
        staging = self.regions_dir / STAGING
        left = sorted(staging.iterdir()) if staging.is_dir() else []
        for path in left:
            shutil.rmtree(path, ignore_errors=True)
        return left

    def prepare(self, claim: dict[str, Any], shares: list[Share]) -> list[Prepared]:
        """A region per group (created once) and the claim's CDI spec (rewritten, same
        content); each share reported with its group's CDI device."""
        meta = claim["metadata"]
        uid = str(meta["uid"])
        where = f"claim {meta.get('namespace')}/{meta.get('name')}"
        found = groups(shares, where)
        try:  # before anything is written
            nodes = [self.device_nodes(group.gpus) for group in found]
        except ClaimError as exc:
            raise ClaimError(f"{where}: {exc}") from None
        pods = reserved_pods(claim)
        write_preload_file(self.preload_file, self.library_path)
        for group in found:
            self._region(uid, meta, group, pods)
        devices = [self._cdi_device(uid, g, n) for g, n in zip(found, nodes, strict=True)]
        spec = {"cdiVersion": CDI_VERSION, "kind": f"{self.driver}/{CDI_CLASS}", "devices": devices}
        _write_atomic(self.spec_path(uid), json.dumps(spec, indent=2))
        prefix = f"{self.driver}/{CDI_CLASS}={uid}"
        return [Prepared(s, f"{prefix}-{s.base_request}") for s in shares]

    def device_nodes(self, indices: Sequence[int]) -> list[str]:
        """The /dev paths a container of GPUs ``indices`` gets (ClaimError naming a missing
        one)."""
        required = [f"nvidia{self._minor(i)}" for i in indices]
        required += REQUIRED_CONTROL_DEVICES
        for name in required:
            if not (self.dev_dir / name).exists():
                where = f"GPU {', '.join(map(str, indices))}: device node /dev/{name}"
                raise ClaimError(f"{where} not found in {self.dev_dir}")
        optional = [n for n in OPTIONAL_CONTROL_DEVICES if (self.dev_dir / n).exists()]
        return [f"/dev/{n}" for n in (*required, *optional)]

    def _minor(self, index: int) -> int:
        gpu = self.gpus.get(index)
        if gpu is None:
            raise ClaimError(f"GPU {index}: not on this node")
        return gpu.index if gpu.minor is None else gpu.minor

    def unprepare(self, claim_uid: str) -> None:
        """Delete the claim's CDI spec and regions (nothing there: nothing to do)."""
        self.spec_path(claim_uid).unlink(missing_ok=True)
        for region in self.regions_dir.glob(f"dra-{claim_uid}-*"):
            shutil.rmtree(region, ignore_errors=True)

    def _region(self, uid: str, meta: dict[str, Any], group: Group, pods: list[str]) -> Path:
        final = self.region_dir(uid, group)
        if (final / POD_FILE).is_file():
            return final  # prepared before (a retry, or a restart after success)
        staged = self.regions_dir / STAGING / final.name
        shutil.rmtree(staged, ignore_errors=True)
        create_region(staged, group.limits())
        _write_atomic(staged / POD_FILE, json.dumps(pod_description(uid, meta, group, pods)))
        staged.rename(final)
        return final

    def _cdi_device(self, uid: str, group: Group, nodes: list[str]) -> dict[str, Any]:
        region = self.region_dir(uid, group)
        visible = ",".join(self.gpus[i].uuid for i in group.gpus)
        library = str(self.library_path)
        env = {
            "ARKGPU_REGION_DIR": str(CONTAINER_REGION),
            "CUDA_VISIBLE_DEVICES": visible,
            "NVIDIA_VISIBLE_DEVICES": visible,
        }
        mounts = [
            _mount(library, library, "ro"),
            _mount(str(self.preload_file), str(PRELOAD_PATH), "ro"),
            _mount(str(region), str(CONTAINER_REGION), "rw"),
            _mount(str(region / LIMITS_FILE), str(CONTAINER_REGION / LIMITS_FILE), "ro"),
        ]
        edits = {
            "env": [f"{k}={v}" for k, v in env.items()],
            "mounts": mounts,
            "deviceNodes": [
                {"path": n, "hostPath": str(self.host_dev_dir / Path(n).name)} for n in nodes
            ],
        }
        return {"name": f"{uid}-{group.request}", "containerEdits": edits}


def reserved_pods(claim: dict[str, Any]) -> list[str]:
    """UIDs of the pods the claim is reserved for (``status.reservedFor``, resource pods):
    the kubelet prepares a claim for a pod kube-scheduler reserved it for."""
    reserved = (claim.get("status") or {}).get("reservedFor") or []
    return [str(r["uid"]) for r in reserved if r.get("resource") == "pods" and r.get("uid")]


def pod_description(
    uid: str, meta: dict[str, Any], group: Group, pods: list[str] | None = None
) -> dict[str, Any]:
    """``pod.json`` of a group's region, as the node runtime reads it (docs/NODE.md): ``gpu``
    and ``memory_mib`` of its first GPU, ``gpus`` all of them (CUDA's order); ``pod_uids``:
    the pods using the claim when it was prepared (the backstop's cgroup attribution,
    :mod:`arkgpu.node.attributing`)."""
    qos = group.shares[0].qos
    first = group.gpus[0]
    body: dict[str, Any] = {
        "kind": qos.kind,
        "gpu": first,
        "gpus": list(group.gpus),
        "model": qos.model,
        "memory_mib": group.memory_mib(first),
        "claim": {"namespace": meta.get("namespace", ""), "name": meta.get("name"), "uid": uid},
        "pod_uids": pods or [],
    }
    if qos.kind == "lc":
        body.update(target_ms=qos.target_ms, peak_rps=qos.peak_rps, max_batch=qos.max_batch)
    else:
        body["batch"] = qos.batch
    return body


def _mount(host: str, container: str, mode: str) -> dict[str, Any]:
    return {"hostPath": host, "containerPath": container, "options": ["bind", mode]}


def _write_atomic(path: Path, content: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(content, encoding="utf-8")
    tmp.chmod(0o644)
    tmp.replace(path)
