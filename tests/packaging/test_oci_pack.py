"""scripts/imagebuild/pack.py: the OCI archives the real node imports (pause, test workloads),
written by the image builder's writer (scripts/imagebuild/oci.py)."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKER = REPO / "scripts" / "imagebuild" / "pack.py"


def _pack(tmp_path: Path, out: str, *pairs: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(PACKER), str(tmp_path / out), "example.org/x:1", "/bin/x", *pairs],
        capture_output=True,
        text=True,
        check=False,
    )


def _blob(archive: tarfile.TarFile, digest: str) -> bytes:
    member = archive.extractfile(f"blobs/sha256/{digest.split(':', 1)[1]}")
    assert member is not None
    data = member.read()
    assert "sha256:" + hashlib.sha256(data).hexdigest() == digest
    return data


def test_the_archive_is_an_oci_layout_whose_digests_match(tmp_path: Path) -> None:
    """index -> manifest -> config and layer, each blob named by its digest; the config's
    diff_id is the uncompressed layer's digest; the file keeps its path and mode; the
    image's name is in the annotation containerd's import reads."""
    program = tmp_path / "prog"
    program.write_bytes(b"\x7fELF fake")
    program.chmod(0o751)
    if os.geteuid() == 0:
        os.chown(program, 1000, 1000)  # the layer says root whoever owns the source
    assert _pack(tmp_path, "a.tar", f"{program}=/bin/x").returncode == 0
    with tarfile.open(tmp_path / "a.tar") as archive:
        layout = archive.extractfile("oci-layout")
        assert layout is not None
        assert json.loads(layout.read()) == {"imageLayoutVersion": "1.0.0"}
        index_file = archive.extractfile("index.json")
        assert index_file is not None
        entry = json.loads(index_file.read())["manifests"][0]
        assert entry["annotations"]["io.containerd.image.name"] == "example.org/x:1"
        manifest = json.loads(_blob(archive, entry["digest"]))
        config = json.loads(_blob(archive, manifest["config"]["digest"]))
        layer = gzip.decompress(_blob(archive, manifest["layers"][0]["digest"]))
    assert config["config"]["Entrypoint"] == ["/bin/x"]
    assert config["rootfs"]["diff_ids"] == ["sha256:" + hashlib.sha256(layer).hexdigest()]
    with tarfile.open(fileobj=io.BytesIO(layer)) as files:
        assert files.getnames() == ["bin", "bin/x"]
        member = files.getmember("bin/x")
        assert member.mode == 0o751
        assert (member.uid, member.gid, member.mtime) == (0, 0, 0)
        content = files.extractfile(member)
        assert content is not None
        assert content.read() == b"\x7fELF fake"


def test_the_same_inputs_give_the_same_bytes(tmp_path: Path) -> None:
    """No time stamp or order leaks in: two packs of one file, touched between, are identical."""
    program = tmp_path / "prog"
    program.write_bytes(b"same")
    _pack(tmp_path, "a.tar", f"{program}=/bin/x")
    os.utime(program, (1_000_000_000, 1_000_000_000))
    _pack(tmp_path, "b.tar", f"{program}=/bin/x")
    assert (tmp_path / "a.tar").read_bytes() == (tmp_path / "b.tar").read_bytes()


def test_a_missing_file_is_named_in_one_line(tmp_path: Path) -> None:
    result = _pack(tmp_path, "a.tar", f"{tmp_path / 'nope'}=/bin/x")
    assert result.returncode == 2
    assert result.stderr.strip() == f"pack: {tmp_path / 'nope'}: no such file"
    assert not (tmp_path / "a.tar").exists()
