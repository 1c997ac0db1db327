"""The image builder's OCI writer (scripts/imagebuild/oci.py): the same tree gives
the same layer bytes whatever its files' times; entries are sorted, owned by
number, runtime folders empty, special files left out; the archive names its
image and unpacks to the tree."""

from __future__ import annotations

import gzip
import io
import json
import os
import tarfile
import time
from pathlib import Path

from imagebuild.oci import ImageConfig, read_image, unpack, write_archive, write_layer

EPOCH = 1_767_225_600
CONFIG = ImageConfig(["arkgpu"], ["--help"], {"PATH": "/usr/bin"}, "/", {"a": "b"})


def _tree(root: Path) -> Path:
    (root / "usr" / "bin").mkdir(parents=True)
    (root / "usr" / "bin" / "tool").write_text("#!/bin/sh\n")
    (root / "usr" / "bin" / "tool").chmod(0o755)
    os.link(root / "usr" / "bin" / "tool", root / "usr" / "bin" / "same")
    (root / "usr" / "lib").symlink_to("usr/bin")
    (root / "dev").mkdir()
    (root / "dev" / "null-ish").write_text("")
    os.mkfifo(root / "usr" / "fifo")
    (root / "b-file").write_text("b")
    (root / "a-file").write_text("a")
    return root


def _entries(blob: Path) -> list[tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(blob.read_bytes()))) as archive:
        return archive.getmembers()


def test_the_same_tree_gives_the_same_layer_whatever_its_times(tmp_path: Path) -> None:
    """Times after the epoch are clamped to it, so touching every file changes
    nothing; the digests name the bytes."""
    tree = _tree(tmp_path / "tree")
    first = write_layer(tree, tmp_path / "blobs", EPOCH, "x")
    now = time.time() + 10
    for path in [tree, *tree.rglob("*")]:
        os.utime(path, (now, now), follow_symlinks=False)
    again = write_layer(tree, tmp_path / "blobs", EPOCH, "x")
    assert again == first
    (tree / "a-file").write_text("changed")
    assert write_layer(tree, tmp_path / "blobs", EPOCH, "x").digest != first.digest


def test_entries_are_sorted_numeric_and_without_special_files(tmp_path: Path) -> None:
    """Sorted paths, directories before their contents, no user or group names,
    times at most the epoch, /dev kept empty, the fifo left out, the hard link
    stored as a link."""
    tree = _tree(tmp_path / "tree")
    layer = write_layer(tree, tmp_path / "blobs", EPOCH, "x")
    entries = _entries(tmp_path / "blobs" / layer.digest.removeprefix("sha256:"))
    names = [e.name for e in entries]
    assert names == [
        "a-file", "b-file", "dev", "usr", "usr/bin", "usr/bin/same", "usr/bin/tool", "usr/lib",
    ]  # fmt: skip
    assert all(e.uname == "" and e.gname == "" and e.mtime <= EPOCH for e in entries)
    links = {e.name: e.linkname for e in entries if e.islnk() or e.issym()}
    assert links == {"usr/bin/tool": "usr/bin/same", "usr/lib": "usr/bin"}


def test_a_prefixed_layer_names_its_root_and_everything_under_it(tmp_path: Path) -> None:
    """A tree written as ``usr/local/``: the folder itself, then its contents."""
    (tmp_path / "local" / "bin").mkdir(parents=True)
    layer = write_layer(tmp_path / "local", tmp_path / "blobs", EPOCH, "x", prefix="usr/local/")
    entries = _entries(tmp_path / "blobs" / layer.digest.removeprefix("sha256:"))
    assert [e.name for e in entries] == ["usr/local", "usr/local/bin"]


def test_the_archive_names_the_image_and_unpacks_to_the_tree(tmp_path: Path) -> None:
    """index.json names the image for containerd, manifest.json for Docker; the
    config lists the layers' diff_ids; unpacking gives the files back."""
    tree = _tree(tmp_path / "tree")
    layer = write_layer(tree, tmp_path / "blobs", EPOCH, "base")
    out = tmp_path / "image.tar"
    name = "docker.io/arkgpu/arkgpu:0.1.0"
    write_archive(out, tmp_path / "blobs", name, CONFIG, [layer], EPOCH)
    index, manifest, config = read_image(out)
    annotations = index["manifests"][0]["annotations"]
    assert annotations == {
        "io.containerd.image.name": name,
        "org.opencontainers.image.ref.name": "0.1.0",
    }
    assert index["manifests"][0]["platform"] == {"architecture": "amd64", "os": "linux"}
    assert config["rootfs"]["diff_ids"] == [layer.diff_id]
    assert config["config"]["Entrypoint"] == ["arkgpu"]
    assert manifest["layers"][0]["digest"] == layer.digest
    with tarfile.open(out) as outer:
        docker = json.load(outer.extractfile("manifest.json"))  # type: ignore[arg-type]
    assert docker[0]["RepoTags"] == ["arkgpu/arkgpu:0.1.0"]
    root = tmp_path / "root"
    unpack(out, root)
    assert (root / "usr" / "bin" / "tool").read_text() == "#!/bin/sh\n"
    assert os.stat(root / "usr" / "bin" / "same").st_ino == os.stat(root / "usr/bin/tool").st_ino
    assert list((root / "dev").iterdir()) == []
