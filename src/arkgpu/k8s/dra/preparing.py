"""NodePrepareResources and NodeUnprepareResources on the node: regions and CDI specs.

For each share of a claim (:mod:`arkgpu.k8s.dra.claims`) Prepare creates a control
region ``<regions_dir>/dra-<claim uid>-<share name>`` with the limiter's own code
(memory cap = consumed ``memory``, compute share = consumed ``cores``) and the
``pod.json`` the node runtime reads, then writes one CDI spec
``<cdi_dir>/arkgpu-dra-<claim uid>.json`` whose devices give the container the
region, the interception library with the preload file that loads it (mounted at
``/etc/ld.so.preload``: no ``LD_PRELOAD`` is set, the container's own stays its own,
:mod:`arkgpu.k8s.preload`), the GPU's device nodes and the environment.

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arkgpu.k8s.contract import InventoryGpu
from arkgpu.k8s.dra.claims import ClaimError, Share
from arkgpu.k8s.gpus import MIB
from arkgpu.k8s.preload import PRELOAD_PATH, write_preload_file
from arkgpu.limiter.region import LIMITS_FILE, Limits, create_region

STAGING = ".dra-staging"
"""Folder of ``regions_dir`` where regions are built before they are renamed into place."""
CONTAINER_REGION = Path("/run/arkgpu/region")
"""Where a container sees its region."""
CDI_VERSION = "0.6.0"
"""CDI spec version written (mounts, env and device nodes need no newer one)."""
CDI_CLASS = "claim"
"""CDI class of our devices: ids are ``<driver>/claim=<claim uid>-<request>``."""
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

    def region_dir(self, claim_uid: str, share: Share) -> Path:
        """The region folder of one share."""
        return self.regions_dir / f"dra-{claim_uid}-{_name(share)}"

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
        """Regions (created once) and the claim's CDI spec (rewritten, same content)."""
        meta = claim["metadata"]
        uid = str(meta["uid"])
        try:  # before anything is written
            nodes = [self.device_nodes(share.gpu_index) for share in shares]
        except ClaimError as exc:
            raise ClaimError(f"claim {meta.get('namespace')}/{meta.get('name')}: {exc}") from None
        pods = reserved_pods(claim)
        write_preload_file(self.preload_file, self.library_path)
        for share in shares:
            self._region(uid, meta, share, pods)
        devices = [self._cdi_device(uid, s, n) for s, n in zip(shares, nodes, strict=True)]
        spec = {"cdiVersion": CDI_VERSION, "kind": f"{self.driver}/{CDI_CLASS}", "devices": devices}
        _write_atomic(self.spec_path(uid), json.dumps(spec, indent=2))
        return [Prepared(s, f"{self.driver}/{CDI_CLASS}={uid}-{_name(s)}") for s in shares]

    def device_nodes(self, index: int) -> list[str]:
        """The /dev paths a container of GPU ``index`` gets (ClaimError naming a missing one)."""
        gpu = self.gpus.get(index)
        if gpu is None:
            raise ClaimError(f"GPU {index}: not on this node")
        minor = gpu.index if gpu.minor is None else gpu.minor
        required = [f"nvidia{minor}", *REQUIRED_CONTROL_DEVICES]
        for name in required:
            if not (self.dev_dir / name).exists():
                where = f"GPU {index}: device node /dev/{name}"
                raise ClaimError(f"{where} not found in {self.dev_dir}")
        optional = [n for n in OPTIONAL_CONTROL_DEVICES if (self.dev_dir / n).exists()]
        return [f"/dev/{n}" for n in (*required, *optional)]

    def unprepare(self, claim_uid: str) -> None:
        """Delete the claim's CDI spec and regions (nothing there: nothing to do)."""
        self.spec_path(claim_uid).unlink(missing_ok=True)
        for region in self.regions_dir.glob(f"dra-{claim_uid}-*"):
            shutil.rmtree(region, ignore_errors=True)

    def _region(self, uid: str, meta: dict[str, Any], share: Share, pods: list[str]) -> Path:
        final = self.region_dir(uid, share)
        if (final / POD_FILE).is_file():
            return final  # prepared before (a retry, or a restart after success)
        staged = self.regions_dir / STAGING / final.name
        shutil.rmtree(staged, ignore_errors=True)
        limits = Limits((share.memory_mib * MIB,), share_bp=share.cores * 100)
        create_region(staged, limits)
        _write_atomic(staged / POD_FILE, json.dumps(pod_description(uid, meta, share, pods)))
        staged.rename(final)
        return final

    def _cdi_device(self, uid: str, share: Share, nodes: list[str]) -> dict[str, Any]:
        region = self.region_dir(uid, share)
        uuid = self.gpus[share.gpu_index].uuid
        library = str(self.library_path)
        env = {
            "ARKGPU_REGION_DIR": str(CONTAINER_REGION),
            "CUDA_VISIBLE_DEVICES": uuid,
            "NVIDIA_VISIBLE_DEVICES": uuid,
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
        return {"name": f"{uid}-{_name(share)}", "containerEdits": edits}


def reserved_pods(claim: dict[str, Any]) -> list[str]:
    """UIDs of the pods the claim is reserved for (``status.reservedFor``, resource pods):
    the kubelet prepares a claim for a pod kube-scheduler reserved it for."""
    reserved = (claim.get("status") or {}).get("reservedFor") or []
    return [str(r["uid"]) for r in reserved if r.get("resource") == "pods" and r.get("uid")]


def pod_description(
    uid: str, meta: dict[str, Any], share: Share, pods: list[str] | None = None
) -> dict[str, Any]:
    """``pod.json`` of a share's region, as the node runtime reads it (docs/NODE.md);
    ``pod_uids``: the pods using the claim when it was prepared (the backstop's cgroup
    attribution, :mod:`arkgpu.node.attributing`)."""
    qos = share.qos
    body: dict[str, Any] = {
        "kind": qos.kind,
        "gpu": share.gpu_index,
        "model": qos.model,
        "memory_mib": share.memory_mib,
        "claim": {"namespace": meta.get("namespace", ""), "name": meta.get("name"), "uid": uid},
        "pod_uids": pods or [],
    }
    if qos.kind == "lc":
        body.update(target_ms=qos.target_ms, peak_rps=qos.peak_rps, max_batch=qos.max_batch)
    else:
        body["batch"] = qos.batch
    return body


def _name(share: Share) -> str:
    """The share's name in its claim (a Share made without one: from its request)."""
    return share.name or share.request.replace("/", "_")


def _mount(host: str, container: str, mode: str) -> dict[str, Any]:
    return {"hostPath": host, "containerPath": container, "options": ["bind", mode]}


def _write_atomic(path: Path, content: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(content, encoding="utf-8")
    tmp.chmod(0o644)
    tmp.replace(path)
