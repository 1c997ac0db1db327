"""ld.so's system-wide preload list for GPU containers, shared by the device plugin and
the DRA driver.

The node's interception library reaches a container through a host file naming it,
mounted read-only at ``/etc/ld.so.preload``: ld.so loads it first in every process,
whatever the container's ``LD_PRELOAD`` (which the container keeps for itself).
"""

from __future__ import annotations

import os
from pathlib import Path

PRELOAD_PATH = Path("/etc/ld.so.preload")
"""ld.so's system-wide preload list, read before ``LD_PRELOAD``."""


def write_preload_file(target: Path, library: Path) -> None:
    """Write ``target``: ``library``'s path on one line (atomic, mode 0644; the temporary
    file is per process, so two writers of the same file never mix)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    tmp.write_text(f"{library}\n", encoding="utf-8")
    tmp.chmod(0o644)
    tmp.replace(target)
