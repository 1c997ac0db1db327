"""One runtime per node: an exclusive flock on a lock file.

The kernel drops the lock when the holder exits, however it exits (SIGKILL
included), so a crashed runtime never blocks the next one; a second runtime
started while the first lives is refused with one line naming the holder.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path


class AlreadyRunningError(OSError):
    """Another runtime holds the node's lock."""


class NodeLock:
    """The held lock (close to release; the kernel releases it on exit)."""

    def __init__(self, path: Path) -> None:
        """Take the lock at ``path`` or raise :class:`AlreadyRunningError`."""
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(self._fd, 32, 0).decode(errors="replace").strip() or "?"
            os.close(self._fd)
            raise AlreadyRunningError(
                f"{path}: another node runtime (pid {holder}) is running on this node; "
                "stop it first"
            ) from None
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, f"{os.getpid()}\n".encode(), 0)

    def close(self) -> None:
        """Release the lock."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
