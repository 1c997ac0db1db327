#!/usr/bin/env python3
"""Packs files into a one-layer OCI image archive that `ctr images import` loads.

Used by scripts/build-node.sh for the pause image of the real-node tests; needs
only Python's standard library (it runs before the project's virtualenv exists).

Usage: oci-archive.py OUT.tar NAME:TAG ENTRYPOINT SRC=DEST [SRC=DEST ...]
Each SRC file lands at DEST in the image with its mode kept; owner root, time 0,
so the same inputs give the same archive byte for byte.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import sys
import tarfile
from pathlib import Path


def _tar_bytes(entries: list[tuple[str, bytes, int]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data, mode in entries:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, 0
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _blob(blobs: dict[str, bytes], data: bytes, media_type: str) -> dict[str, object]:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    blobs[digest] = data
    return {"mediaType": media_type, "digest": digest, "size": len(data)}


def _json(value: object) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def build(name: str, entrypoint: str, files: list[tuple[Path, str]]) -> bytes:
    """The archive's bytes: an OCI image layout with one manifest named `name`."""
    layer_tar = _tar_bytes(
        [(dest.lstrip("/"), src.read_bytes(), src.stat().st_mode & 0o7777) for src, dest in files]
    )
    blobs: dict[str, bytes] = {}
    layer = _blob(
        blobs, gzip.compress(layer_tar, mtime=0), "application/vnd.oci.image.layer.v1.tar+gzip"
    )
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Entrypoint": [entrypoint]},
        "rootfs": {
            "type": "layers",
            "diff_ids": ["sha256:" + hashlib.sha256(layer_tar).hexdigest()],
        },
    }
    config_desc = _blob(blobs, _json(config), "application/vnd.oci.image.config.v1+json")
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": config_desc,
        "layers": [layer],
    }
    manifest_desc = _blob(blobs, _json(manifest), "application/vnd.oci.image.manifest.v1+json")
    manifest_desc["annotations"] = {
        "io.containerd.image.name": name,
        "org.opencontainers.image.ref.name": name.rsplit(":", 1)[-1],
    }
    index = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [manifest_desc],
    }
    top = [
        ("oci-layout", _json({"imageLayoutVersion": "1.0.0"}), 0o644),
        ("index.json", _json(index), 0o644),
    ]
    top += [
        (f"blobs/sha256/{d.split(':', 1)[1]}", data, 0o644) for d, data in sorted(blobs.items())
    ]
    return _tar_bytes(top)


def main(argv: list[str]) -> int:
    if len(argv) < 4 or any("=" not in a for a in argv[3:]):
        print(
            "usage: oci-archive.py OUT.tar NAME:TAG ENTRYPOINT SRC=DEST [SRC=DEST ...]",
            file=sys.stderr,
        )
        return 2
    out, name, entrypoint = Path(argv[0]), argv[1], argv[2]
    files = [(Path(a.split("=", 1)[0]), a.split("=", 1)[1]) for a in argv[3:]]
    for src, _ in files:
        if not src.is_file():
            print(f"oci-archive: {src}: no such file", file=sys.stderr)
            return 2
    tmp = out.with_suffix(".tmp")
    tmp.write_bytes(build(name, entrypoint, files))
    tmp.replace(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
