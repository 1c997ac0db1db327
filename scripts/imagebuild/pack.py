"""``python3 scripts/imagebuild/pack.py``: files into a one-layer OCI image archive.

Used by scripts/build-node.sh for the pause image of the real-node tests and by
tests/e2e/node_images.py for their workload image; needs only Python's standard
library (it runs before the project's virtualenv exists). The archive is written
by :mod:`imagebuild.oci`, the writer ``make image`` uses, so both get its
normalisation: sorted entries, owner root, times 0, gzip without a time stamp;
the same inputs give the same archive byte for byte.

Usage: pack.py OUT.tar NAME:TAG ENTRYPOINT SRC=DEST [SRC=DEST ...]
Each SRC file lands at DEST in the image with its mode kept.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from imagebuild.oci import ImageConfig, write_archive, write_layer

USAGE = "usage: pack.py OUT.tar NAME:TAG ENTRYPOINT SRC=DEST [SRC=DEST ...]"
EPOCH = 0
"""The entries' times and the config's ``created``: the same every build."""


def _stage(files: list[tuple[Path, str]], root: Path) -> None:
    """Copy each source to its destination under ``root``, folders mode 0755."""
    for src, dest in files:
        target = root / dest.lstrip("/")
        for parent in reversed(target.relative_to(root).parents[:-1]):
            (root / parent).mkdir(exist_ok=True)
            (root / parent).chmod(0o755)
        shutil.copyfile(src, target)
        os.chmod(target, src.stat().st_mode & 0o7777)


def pack(out: Path, name: str, entrypoint: str, files: list[tuple[Path, str]]) -> None:
    """Write the archive ``out`` of image ``name`` running ``entrypoint``."""
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        root, blobs = Path(tmp) / "root", Path(tmp) / "blobs"
        root.mkdir()
        _stage(files, root)
        layer = write_layer(root, blobs, EPOCH, "files", owner=0)
        config = ImageConfig([entrypoint], [], {}, "/", {})
        write_archive(out, blobs, name, config, [layer], EPOCH)


def main(argv: list[str]) -> int:
    """Check the arguments, pack; 2 with a one-line error on bad input."""
    if len(argv) < 4 or any("=" not in a for a in argv[3:]) or ":" not in argv[1]:
        print(USAGE, file=sys.stderr)
        return 2
    out, name, entrypoint = Path(argv[0]), argv[1], argv[2]
    files = [(Path(a.split("=", 1)[0]), a.split("=", 1)[1]) for a in argv[3:]]
    for src, _ in files:
        if not src.is_file():
            print(f"pack: {src}: no such file", file=sys.stderr)
            return 2
    pack(out, name, entrypoint, files)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
