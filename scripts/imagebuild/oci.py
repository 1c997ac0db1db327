"""An OCI image archive from directory trees, with the standard library alone.

Why not umoci or skopeo: the archive needs four JSON documents and gzip'd tars,
and the normalisation that makes two builds give the same bytes (entries in
sorted order, numeric owners, no user or group names, modification times
clamped to a fixed instant, gzip headers without a time or file name) is what
this module is for; umoci 0.4 (Debian bookworm) stores the times it finds and
would still need an unpack/repack round trip (docs/IMAGE.md).

A layer is a tree: every entry under it, paths relative to it. The archive is
an OCI image layout (``oci-layout``, ``index.json``, ``blobs/sha256/``) that
``ctr images import`` reads, with Docker's ``manifest.json`` beside it so that
``docker load`` reads the same file. Both name the image (containerd's
``io.containerd.image.name`` annotation, Docker's ``RepoTags``).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import stat
import tarfile
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

MANIFEST = "application/vnd.oci.image.manifest.v1+json"
CONFIG = "application/vnd.oci.image.config.v1+json"
LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
INDEX = "application/vnd.oci.image.index.v1+json"
#: Directories whose contents a container runtime provides (entries kept, contents not).
RUNTIME_DIRS = ("dev", "proc", "sys")
#: gzip level of the layers (6: zlib's default; 9 saves ~2 % for twice the time).
GZIP_LEVEL = 6


@dataclass(frozen=True)
class Layer:
    """A written layer blob."""

    digest: str
    """sha256 of the gzip'd tar (the blob's name), ``sha256:<hex>``."""
    diff_id: str
    """sha256 of the uncompressed tar, ``sha256:<hex>`` (the config's rootfs)."""
    size: int
    """Size of the gzip'd tar, bytes."""
    unpacked: int
    """Size of the uncompressed tar, bytes."""
    comment: str
    """What the layer holds (the config's history)."""


@dataclass(frozen=True)
class ImageConfig:
    """What the image runs with (the OCI config's ``config`` object)."""

    entrypoint: list[str]
    cmd: list[str]
    env: dict[str, str]
    workdir: str
    labels: dict[str, str]


class _Hashing:
    """A file-like sink that hashes and counts what it writes, then passes it on."""

    def __init__(self, sink: IO[bytes] | gzip.GzipFile | None) -> None:
        self.sha = hashlib.sha256()
        self.count = 0
        self.sink = sink

    def write(self, data: bytes) -> int:
        self.sha.update(data)
        self.count += len(data)
        if self.sink is not None:
            self.sink.write(data)
        return len(data)

    def flush(self) -> None:
        if self.sink is not None:
            self.sink.flush()


def walk(root: Path) -> Iterator[Path]:
    """Every entry under ``root`` in sorted order, directories before their
    contents; symbolic links not followed; the runtime's directories empty."""
    for entry in sorted(root.iterdir(), key=lambda p: p.name):
        yield entry
        if entry.is_dir() and not entry.is_symlink():
            if entry.parent == root and entry.name in RUNTIME_DIRS:
                continue
            yield from walk(entry)


def _tarinfo(
    archive: tarfile.TarFile, path: Path, name: str, epoch: int, owner: int | None
) -> tarfile.TarInfo:
    info = archive.gettarinfo(str(path), arcname=name)
    info.mtime = min(int(info.mtime), epoch)
    info.uname = info.gname = ""
    if owner is not None:
        info.uid = info.gid = owner
    return info


def _add_tree(
    archive: tarfile.TarFile, root: Path, epoch: int, prefix: str, owner: int | None
) -> None:
    if prefix:
        archive.addfile(_tarinfo(archive, root, prefix.rstrip("/"), epoch, owner))
    for path in walk(root):
        mode = path.lstat().st_mode
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode)):
            continue  # device nodes, sockets, fifos: the runtime's business
        name = prefix + path.relative_to(root).as_posix()
        info = _tarinfo(archive, path, name, epoch, owner)
        if info.isreg():
            with path.open("rb") as data:
                archive.addfile(info, data)
        else:
            archive.addfile(info)


def write_layer(
    root: Path,
    blobs: Path,
    epoch: int,
    comment: str,
    prefix: str = "",
    owner: int | None = None,
) -> Layer:
    """Write ``root`` as a gzip'd tar blob into ``blobs`` (named by its digest), its
    entries named ``prefix`` + their path under ``root`` (``root`` itself too
    when there is a prefix); ``owner``: the numeric user and group of every
    entry (default: each file's own)."""
    blobs.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=blobs, delete=False) as out:
        compressed = _Hashing(out)
        with gzip.GzipFile(filename="", mode="wb", fileobj=compressed, mtime=0,
                           compresslevel=GZIP_LEVEL) as zipped:  # fmt: skip
            plain = _Hashing(zipped)
            with tarfile.open(fileobj=plain, mode="w|", format=tarfile.PAX_FORMAT) as archive:  # type: ignore[call-overload]
                _add_tree(archive, root, epoch, prefix, owner)
    digest = compressed.sha.hexdigest()
    os.replace(out.name, blobs / digest)
    os.chmod(blobs / digest, 0o644)
    return Layer(
        f"sha256:{digest}",
        f"sha256:{plain.sha.hexdigest()}",
        compressed.count,
        plain.count,
        comment,
    )


def _json_blob(blobs: Path, document: dict[str, Any]) -> tuple[str, int]:
    data = json.dumps(document, sort_keys=True, separators=(",", ":")).encode()
    digest = hashlib.sha256(data).hexdigest()
    (blobs / digest).write_bytes(data)
    return f"sha256:{digest}", len(data)


def config_document(config: ImageConfig, layers: list[Layer], epoch: int) -> dict[str, Any]:
    """The OCI image configuration of ``layers`` run as ``config`` (linux/amd64)."""
    created = datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "architecture": "amd64",
        "os": "linux",
        "created": created,
        "config": {
            "Entrypoint": config.entrypoint,
            "Cmd": config.cmd,
            "Env": [f"{k}={v}" for k, v in config.env.items()],
            "WorkingDir": config.workdir,
            "Labels": config.labels,
        },
        "rootfs": {"type": "layers", "diff_ids": [layer.diff_id for layer in layers]},
        "history": [{"created": created, "created_by": layer.comment} for layer in layers],
    }


def _descriptor(media_type: str, digest: str, size: int) -> dict[str, Any]:
    return {"mediaType": media_type, "digest": digest, "size": size}


def write_archive(
    out: Path, blobs: Path, name: str, config: ImageConfig, layers: list[Layer], epoch: int
) -> str:
    """Write the image archive ``out`` of ``layers`` (blobs in ``blobs``), named
    ``name`` (``registry/repository:tag``); returns the manifest's digest."""
    config_digest, config_size = _json_blob(blobs, config_document(config, layers, epoch))
    manifest = {
        "schemaVersion": 2,
        "mediaType": MANIFEST,
        "config": _descriptor(CONFIG, config_digest, config_size),
        "layers": [_descriptor(LAYER, layer.digest, layer.size) for layer in layers],
    }
    manifest_digest, manifest_size = _json_blob(blobs, manifest)
    tag = name.rsplit(":", 1)[1]
    described = _descriptor(MANIFEST, manifest_digest, manifest_size)
    described["platform"] = {"architecture": "amd64", "os": "linux"}  # ctr's platform filter
    described["annotations"] = {
        "io.containerd.image.name": name,
        "org.opencontainers.image.ref.name": tag,
    }
    index = {"schemaVersion": 2, "mediaType": INDEX, "manifests": [described]}
    docker = [
        {
            "Config": _blob_path(config_digest),
            "RepoTags": [name.removeprefix("docker.io/")],
            "Layers": [_blob_path(layer.digest) for layer in layers],
        }
    ]
    members = {
        "oci-layout": _dumps({"imageLayoutVersion": "1.0.0"}),
        "index.json": _dumps(index),
        "manifest.json": _dumps(docker),
    }
    digests = [config_digest, manifest_digest, *(layer.digest for layer in layers)]
    _write_outer(out, blobs, members, digests, epoch)
    return manifest_digest


def _blob_path(digest: str) -> str:
    return "blobs/sha256/" + digest.removeprefix("sha256:")


def _dumps(document: object) -> bytes:
    return json.dumps(document, sort_keys=True, separators=(",", ":")).encode()


def _write_outer(
    out: Path, blobs: Path, members: dict[str, bytes], digests: list[str], epoch: int
) -> None:
    """The archive: a plain tar of the layout's files (the layers are gzip'd already)."""
    partial = out.with_name(out.name + ".partial")
    with tarfile.open(partial, "w", format=tarfile.PAX_FORMAT) as archive:
        for member, data in members.items():
            archive.addfile(_file_info(member, len(data), epoch), io.BytesIO(data))
        for digest in dict.fromkeys(digests):
            blob = blobs / digest.removeprefix("sha256:")
            with blob.open("rb") as stream:
                info = _file_info(_blob_path(digest), blob.stat().st_size, epoch)
                archive.addfile(info, stream)
    os.replace(partial, out)


def _file_info(name: str, size: int, epoch: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = size, epoch, 0o644
    return info


def read_image(archive: Path) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The index, manifest and config of the archive's (first) image."""
    with tarfile.open(archive) as outer:

        def document(name: str) -> dict[str, Any]:
            member = outer.extractfile(name)
            assert member is not None, name
            loaded: dict[str, Any] = json.load(member)
            return loaded

        index = document("index.json")
        manifest = document(_blob_path(index["manifests"][0]["digest"]))
        return index, manifest, document(_blob_path(manifest["config"]["digest"]))


def unpack(archive: Path, dest: Path) -> None:
    """Extract the image's layers in order into ``dest`` (a container's root file
    system; our layers hold no whiteouts)."""
    _, manifest, _ = read_image(archive)
    with tarfile.open(archive) as outer:
        for layer in manifest["layers"]:
            blob = outer.extractfile(_blob_path(layer["digest"]))
            assert blob is not None, layer["digest"]
            with tarfile.open(fileobj=blob, mode="r|gz") as inner:
                inner.extractall(dest, filter="fully_trusted")
