"""One runtime per node: the second is refused; a crashed holder's lock is free again."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from arkgpu.node.locking import AlreadyRunningError, NodeLock

HOLD = """
import sys, time
from pathlib import Path
from arkgpu.node.locking import NodeLock
lock = NodeLock(Path(sys.argv[1]))
print("held", flush=True)
time.sleep(60)
"""


def test_a_second_lock_is_refused_naming_the_holder(tmp_path: Path) -> None:
    """While one holder lives, another refuses with the holder's pid; closing frees it."""
    path = tmp_path / "node.lock"
    first = NodeLock(path)
    with pytest.raises(AlreadyRunningError, match="another node runtime") as info:
        NodeLock(path)
    assert str(path) in str(info.value)
    first.close()
    NodeLock(path).close()


def test_the_kernel_frees_the_lock_of_a_killed_holder(tmp_path: Path) -> None:
    """SIGKILL of the holding process frees the lock (no stale lock file blocks a restart)."""
    path = tmp_path / "node.lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(path)], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None
    assert holder.stdout.readline().strip() == "held"
    with pytest.raises(AlreadyRunningError, match=str(holder.pid)):
        NodeLock(path)
    holder.send_signal(signal.SIGKILL)
    holder.communicate(timeout=10)
    deadline = time.monotonic() + 5
    while True:
        try:
            NodeLock(path).close()
            break
        except AlreadyRunningError:
            assert time.monotonic() < deadline
            time.sleep(0.05)
