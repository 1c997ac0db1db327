"""A stand-in for NVIDIA's container runtime in CDI mode, for the real node's "nvidia" class.

NVIDIA's toolkit installs ``nvidia-container-runtime``: an OCI runtime that wraps runc
and, in CDI mode, turns a container's ``NVIDIA_VISIBLE_DEVICES`` (``all`` or a list of
names) into the CDI devices ``nvidia.com/gpu=<name>`` of the toolkit's spec, edits the
bundle's ``config.json`` with them (device nodes, mounts, environment) and runs runc.
Nodes where it is not the default runtime register it as a containerd runtime handler
``nvidia`` with a RuntimeClass of that name; the chart's ``node.runtimeClassName`` then
hands NVML to its node pods. This script does the same for the fake GPU's spec
(``node_fakegpu``), so the chart's node pods get the fake driver as a user's get the
real one. Standard library only: containerd's runc shim runs it for every runc call::

    python3 -I nvidia_runtime.py --runc RUNC --spec-dir DIR RUNC-ARGS...
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

KIND = "nvidia.com/gpu"
VARIABLE = "NVIDIA_VISIBLE_DEVICES"
NO_DEVICES = ("", "void", "none")


def _bundle(args: list[str]) -> Path | None:
    """The bundle of a ``create`` or ``run`` call (``--bundle``/``-b``; cwd by default)."""
    if "create" not in args and "run" not in args:
        return None
    for i, arg in enumerate(args):
        if arg in ("--bundle", "-b") and i + 1 < len(args):
            return Path(args[i + 1])
        if arg.startswith("--bundle="):
            return Path(arg.split("=", 1)[1])
    return Path.cwd()


def _requested(spec: dict[str, Any]) -> list[str]:
    env = spec.get("process", {}).get("env", [])
    values = [e.split("=", 1)[1] for e in env if e.startswith(f"{VARIABLE}=")]
    if not values or values[-1].strip() in NO_DEVICES:
        return []
    return [name.strip() for name in values[-1].split(",") if name.strip()]


def _edits(spec_dir: Path, names: list[str]) -> list[dict[str, Any]]:
    """The common edits of the spec of kind ``nvidia.com/gpu`` and each named device's."""
    for path in sorted(spec_dir.glob("*.json")):
        cdi = json.loads(path.read_text(encoding="utf-8"))
        if cdi.get("kind") != KIND:
            continue
        devices = {d["name"]: d["containerEdits"] for d in cdi.get("devices", [])}
        missing = [n for n in names if n not in devices]
        if missing:
            raise SystemExit(f"nvidia_runtime: no CDI device {KIND}={missing[0]} in {path}")
        return [cdi.get("containerEdits", {}), *(devices[n] for n in names)]
    raise SystemExit(f"nvidia_runtime: no CDI spec of kind {KIND} in {spec_dir}")


def _add_node(linux: dict[str, Any], node: dict[str, Any]) -> None:
    info = os.stat(node.get("hostPath", node["path"]))
    major, minor = os.major(info.st_rdev), os.minor(info.st_rdev)
    kind = "c" if stat.S_ISCHR(info.st_mode) else "b"
    linux.setdefault("devices", []).append(
        {"path": node["path"], "type": kind, "major": major, "minor": minor,
         "fileMode": 0o666, "uid": 0, "gid": 0}
    )  # fmt: skip
    allowed = linux.setdefault("resources", {}).setdefault("devices", [])
    allowed.append({"allow": True, "type": kind, "major": major, "minor": minor, "access": "rwm"})


def apply(spec: dict[str, Any], edits: list[dict[str, Any]]) -> None:
    """Applies CDI container edits to an OCI runtime spec, as a CDI-aware runtime does."""
    process = spec.setdefault("process", {})
    for edit in edits:
        process.setdefault("env", []).extend(edit.get("env", []))
        for node in edit.get("deviceNodes", []):
            _add_node(spec.setdefault("linux", {}), node)
        for mount in edit.get("mounts", []):
            spec.setdefault("mounts", []).append(
                {"destination": mount["containerPath"], "source": mount["hostPath"],
                 "type": "bind", "options": mount.get("options", ["rbind", "ro"])}
            )  # fmt: skip


def main(argv: list[str]) -> None:
    """``--runc RUNC --spec-dir DIR`` then runc's own arguments."""
    runc, spec_dir, args = argv[2], Path(argv[4]), argv[5:]
    bundle = _bundle(args)
    if bundle is not None:
        config = bundle / "config.json"
        spec = json.loads(config.read_text(encoding="utf-8"))
        names = _requested(spec)
        if names:
            apply(spec, _edits(spec_dir, names))
            config.write_text(json.dumps(spec), encoding="utf-8")
    os.execv(runc, [runc, *args])


if __name__ == "__main__":
    main(sys.argv)
